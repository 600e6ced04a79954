"""What this plugin is, for the generated plugin table (plugins/README.md) and `agentsynth plugins`."""

METADATA = {
    "kind": ["generator", "checker", "policy", "command"],
    "status": "alpha",
    "capabilities": [
        "generator:forward", "generator:back_translation", "generator:replay_filter", "generator:challenger",
        "generator:evolve", "generator:from_failures", "checker:state_probe", "checker:state_digest",
        "checker:synth_fingerprint", "policy:synth_replay", "command:synth",
    ],
}
