"""agentsynth-local: the embedded real model. ``model: local`` starts a small model shipped as a PyPI
wheel on 127.0.0.1, offline, on first use; ``local/ollama:NAME`` and ``local/server`` use a server you run."""
