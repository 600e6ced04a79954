"""agentsynth-synth: generators of outcome-verified tasks and trajectories.

Use ``agentsynth synth`` on the command line, or :func:`run_generator` from Python.
Names are imported on first use, so loading the plugin (its entry point) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    **dict.fromkeys(("GENERATORS", "make_generator", "run_generator", "write_output"), "api"),
    **dict.fromkeys(("Accepted", "Item", "Meter", "Outcome", "SynthContext", "SynthReport", "synthesize",
                     "write_pack"), "core"),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsynth_synth' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
