"""agentsynth-sql: a seeded, sandboxed SQLite world for outcome-verified agent tasks."""

from .checkers import NoCollateral, SqlChecker
from .env import SqlEnvironment, SqlEnvSpec
from .world import AllowedChanges, Change, snapshot_for

__all__ = ["AllowedChanges", "Change", "NoCollateral", "SqlChecker", "SqlEnvSpec", "SqlEnvironment", "snapshot_for"]
