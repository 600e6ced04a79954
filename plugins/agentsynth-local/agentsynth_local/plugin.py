"""Hook implementations: ``local`` models resolve to the embedded server (or the user's own server)."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl

from .manager import MANAGER


@hookimpl
def local_model_endpoint(model: str) -> tuple[str, str] | None:
    """``local`` / ``local/NAME``: start (once) and return the server that serves it."""
    return MANAGER.endpoint(model)


@hookimpl
def run_started(run: Any) -> None:
    with MANAGER.lock:
        MANAGER.active_runs += 1


@hookimpl
def run_finished(run: Any, results: Any) -> None:
    """The last run in this process ended: free the model's memory and CPU (restarted on next use)."""
    with MANAGER.lock:
        MANAGER.active_runs = max(0, MANAGER.active_runs - 1)
        last = MANAGER.active_runs == 0
    if last:
        MANAGER.stop_all()
