"""What this plugin is, for the generated plugin table and `agentsynth plugins`."""

METADATA = {
    "kind": "environment",
    "status": "beta",
    "capabilities": ["environment:sql", "environment:sql_compat", "checker:sql", "checker:sql_answer",
                     "checker:no_collateral", "checker:agentsynth_ai_sql", "pack:core", "scaffold_pack:sql",
                     "command:pack import --from agentsynth-ai"],
}
