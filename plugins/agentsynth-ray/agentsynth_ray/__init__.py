"""agentsynth-ray: the ``ray`` executor."""
