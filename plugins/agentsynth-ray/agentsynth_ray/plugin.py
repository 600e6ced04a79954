"""Hook implementations: the ``ray`` executor."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl


@hookimpl
def register_executors(register: Any) -> None:
    from .executor import RayExecutor

    register("ray", RayExecutor,
             description="Episodes on a Ray cluster: worlds built on worker actors, results streamed to this store")
