"""What this plugin is, for the generated plugin table and `agentsynth plugins`."""

METADATA = {
    "kind": "environment",
    "status": "beta",
    "capabilities": ["environment:sql", "checker:sql", "checker:no_collateral", "pack:core", "scaffold_pack:sql"],
}
