"""Hook implementations: ``local`` models resolve to the embedded server (or the user's own server).

The server manager (and the HTTP client it probes servers with) is imported on first use of a
``local`` model, not to load the plugin: every ``agentsynth`` command loads it."""

from __future__ import annotations

import sys
import threading
from typing import Any

from agentsynth_kernel import hookimpl

_runs_lock = threading.Lock()
_active_runs = 0  # runs of this process under way: the last one to finish stops the servers


@hookimpl
def local_model_endpoint(model: str) -> tuple[str, str] | None:
    """``local`` / ``local/NAME``: start (once) and return the server that serves it."""
    from .manager import MANAGER

    return MANAGER.endpoint(model)


@hookimpl
def run_started(run: Any) -> None:
    global _active_runs
    with _runs_lock:
        _active_runs += 1


@hookimpl
def run_finished(run: Any, results: Any) -> None:
    """The last run in this process ended: free the model's memory and CPU (restarted on next use)."""
    global _active_runs
    with _runs_lock:
        _active_runs = max(0, _active_runs - 1)
        last = _active_runs == 0
    manager = sys.modules.get("agentsynth_local.manager")  # not imported: no server was started
    if last and manager is not None:
        manager.MANAGER.stop_all()
