"""What this plugin is, for the generated plugin table and `agentsynth plugins`."""

METADATA = {
    "name": "agentsynth-synth",
    "kind": "generator",
    "status": "alpha",
    "capabilities": [
        "generator:forward (multi-teacher rollouts, consensus + judge selection)",
        "generator:back_translation (executed tool chain -> instruction, checker from the end state)",
        "generator:replay_filter (reject sampling by sandbox replay)",
        "generator:challenger (challenger LLM vs strong/weak solvers, feedback rounds)",
        "generator:evolve (harder / more diverse variants that still validate)",
        "generator:from_failures (a run's failures -> targeted variants)",
        "checkers: state_probe, synth_fingerprint; policy: synth_replay",
        "command: agentsynth synth",
    ],
}
