"""Types that the contract modules share, in a leaf module: ``hookspecs`` and ``components`` name
them in signatures, and importing them from here (not from ``engine``) keeps those modules free of
the engine, even for type checkers (#23.2: the type-only cycle hookspecs -> engine -> hookspecs).

This module imports only records and specs; ``agentsynth_kernel.engine.RunInfo`` is the same class.
No ``from __future__ import annotations``: the classes' ``__module__`` names their public home, so
their annotations are evaluated here and now, never looked up in that module's namespace.
"""

import time
from pathlib import Path
from typing import Any

import attrs

from .records import Usage
from .spec import Pack, RunSpec

__all__ = ["RunInfo"]


@attrs.define
class RunInfo:
    """What lifecycle hooks, progress displays and components know about a run.

    Component factories that take a ``run`` parameter receive it; ``services``
    holds run-scoped shared objects (e.g. the LLM client that enforces the
    run's budget), created on first use by whoever needs them. ``restored``
    counts episodes taken from the store on resume (already part of ``total``);
    ``spent`` is what earlier sessions of the run used (restored episodes and the
    episodes a budget stopped), so a budget can be enforced over the whole run.
    """

    run_id: str
    spec: RunSpec
    pack: Pack
    run_dir: Path | None
    total: int
    started_at: float = attrs.field(factory=time.time)
    services: dict[str, Any] = attrs.field(factory=dict)
    run_hash: str = ""
    restored: int = 0
    spent: Usage = attrs.field(factory=Usage)
    # the run store's spend journal (None without a run directory): the LLM client writes each
    # request's worst case there before sending, so a budget holds across kill -9 and resume
    journal: Any = None


RunInfo.__module__ = "agentsynth_kernel.engine"  # its public home (PUBLIC["engine"]), as before the move
