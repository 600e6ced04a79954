"""agentsynth-hub: a leaderboard server that verifies submissions by replaying them."""

__version__ = "0.1.0"
