"""What this plugin is, for the generated plugin table and `agentsynth plugins`."""

METADATA = {
    "kind": "integration",
    "status": "alpha",
    "capabilities": ["gym:PackEnv", "gym:AsyncPackEnv", "trl:reward_funcs", "trl:environment_factory",
                     "openenv:server", "export:verifiers", "export:openenv", "command:rl serve",
                     "command:pack export"],
}
