"""agentsynth-generate: verified training trajectories from queries, a tool catalog or a world.

Names are imported on first use.
"""

from __future__ import annotations

from agentsynth_kernel import lazy_exports

__all__ = ["GenerateConfig", "GenerateSpec", "Generation", "Inputs", "Report", "Scenario", "generate",
           "generate_records", "load_queries", "load_tools", "parse_queries", "parse_tools"]

_EXPORTS: dict[str, str | None] = {  # name -> the submodule it comes from (None: the submodule itself)
    **dict.fromkeys(("generate_records",), "api"),
    **dict.fromkeys(("Scenario", "load_queries", "load_tools", "parse_queries", "parse_tools"), "catalog"),
    **dict.fromkeys(("GenerateConfig", "Generation", "Inputs", "Report", "generate"), "core"),
    **dict.fromkeys(("GenerateSpec",), "spec"),
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
