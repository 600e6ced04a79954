"""agentsynth-synth: generators of outcome-verified tasks and trajectories.

Use ``agentsynth synth`` on the command line, or :func:`run_generator` from Python.
Names are imported on first use, so loading the plugin (its entry point) stays cheap.
"""

from __future__ import annotations

from agentsynth_kernel import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("GENERATORS", "make_generator", "run_generator", "write_output"), "api"),
    **dict.fromkeys(("Accepted", "Item", "Meter", "Outcome", "SynthContext", "SynthReport", "synthesize",
                     "write_pack"), "core"),
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
