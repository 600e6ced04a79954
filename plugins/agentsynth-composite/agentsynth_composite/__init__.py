"""agentsynth-composite: one episode in several worlds at once."""
