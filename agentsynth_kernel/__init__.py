"""agentsynth: outcome-verified agent data and benchmarks (the kernel).

Public API for plugins and scripts. Importing this package is cheap: names are
imported from their modules on first use (PEP 562), so ``agentsynth --help``
loads neither the records nor pluggy, and nothing is discovered until
:func:`get_plugin_manager` / :func:`get_host` is called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ("Checker", "Domain", "Environment", "EpisodeState", "Executor", "Exporter", "Generator", "Importer",
         "Judge", "JudgeResult", "Policy", "Turn", "runs_inline"),
        "components",
    ),
    **dict.fromkeys(("AgentsynthError", "BudgetExceeded", "PluginError", "SpecError"), "errors"),
    "hookimpl": "hookspecs",
    **dict.fromkeys(("PluginHost", "get_host", "get_plugin_manager", "reset_plugins"), "plugins"),
    **dict.fromkeys(
        ("SCHEMA_VERSION", "Action", "Answer", "EpisodeResult", "Message", "Observation", "Step", "ToolCall",
         "ToolSpec", "Trajectory", "Usage", "Verdict"),
        "records",
    ),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsynth_kernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:
    from .components import (
        Checker,
        Domain,
        Environment,
        EpisodeState,
        Executor,
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
