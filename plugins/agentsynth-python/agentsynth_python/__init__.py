"""agentsynth-python: a fresh, sandboxed Python process per episode, and checkers on what it left."""

from .env import CheckError, PythonEnvironment, PythonEnvSpec
from .sandbox import Limits, SandboxError

__all__ = ["CheckError", "Limits", "PythonEnvSpec", "PythonEnvironment", "SandboxError"]
