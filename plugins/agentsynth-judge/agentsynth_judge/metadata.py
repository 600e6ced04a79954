"""What this plugin is, for the generated plugin table and `agentsynth plugins`."""

METADATA = {
    "name": "agentsynth-judge",
    "kind": "judge",
    "status": "beta",
    "capabilities": [
        "judge:heuristic",
        "judge:llm",
        "judge:ensemble",
        "pairwise preferences (swap-consistent)",
        "calibration (accuracy, Cohen's kappa, confusion matrix)",
        "terminal reward (outcome + verification + judge)",
        "command: agentsynth judge",
    ],
}
