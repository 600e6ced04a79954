"""agentsynth-domains: text-only domains and the autosynth challenger loop (see README.md)."""
