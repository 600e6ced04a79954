"""agentsynth: outcome-verified agent data and benchmarks (the kernel).

Public API for plugins and scripts. Importing this package is cheap: nothing is
discovered or loaded until :func:`get_plugin_manager` / :func:`get_host` is called.
"""

from .components import (
    Checker,
    Environment,
    EpisodeState,
    Exporter,
    Generator,
    Importer,
    Judge,
    JudgeResult,
    Policy,
    Turn,
)
from .errors import AgentsynthError, BudgetExceeded, PluginError, SpecError
from .hookspecs import hookimpl
from .plugins import PluginHost, get_host, get_plugin_manager, reset_plugins
from .records import (
    SCHEMA_VERSION,
    Action,
    Answer,
    EpisodeResult,
    Message,
    Observation,
    Step,
    ToolCall,
    ToolSpec,
    Trajectory,
    Usage,
    Verdict,
)

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION", "Action", "AgentsynthError", "Answer", "BudgetExceeded", "Checker", "Environment",
    "EpisodeResult", "EpisodeState", "Exporter", "Generator", "Importer", "Judge", "JudgeResult", "Message",
    "Observation", "PluginError", "PluginHost", "Policy", "SpecError", "Step", "ToolCall", "ToolSpec",
    "Trajectory", "Turn", "Usage", "Verdict", "get_host", "get_plugin_manager", "hookimpl", "reset_plugins",
]
