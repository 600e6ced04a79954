"""The run engine: every (task, trial) episode of a spec, a bounded number at a time.

``agentsynth run`` and ``agentsynth bench`` both come through :func:`execute`.
Results go to the run store as soon as each episode ends, so a killed run can
resume: episodes already stored are not run again.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from .episode import EpisodeConfig, run_episode
from .errors import AgentsynthError
from .plugins import PluginHost, get_host
from .records import EpisodeResult
from .spec import Pack, RunSpec, Task, select_tasks, unstructure
from .store import RunStore


def derive_seed(base: int, task_id: str, trial: int) -> int:
    """A stable per-episode seed: same spec seed, task and trial -> same seed on every machine."""
    digest = hashlib.sha256(f"{base}:{task_id}:{trial}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


@attrs.define
class RunInfo:
    """What lifecycle hooks, progress displays and components know about a run.

    Component factories that take a ``run`` parameter receive it; ``services``
    holds run-scoped shared objects (e.g. the LLM client that enforces the
    run's budget), created on first use by whoever needs them.
    """

    run_id: str
    spec: RunSpec
    pack: Pack
    run_dir: Path | None
    total: int
    started_at: float = attrs.field(factory=time.time)
    services: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class RunReport:
    """The results of a run (including ones restored from the store on resume)."""

    info: RunInfo
    results: list[EpisodeResult]
    stopped: str = ""  # why the run ended early ("budget: ..."), empty when complete
    duration_s: float = 0.0


def versions() -> dict[str, str]:
    """Installed versions of the kernel and every agentsynth plugin distribution (provenance)."""
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name == "agentsynth" or name.startswith("agentsynth-"):
            out[name] = dist.version
    return dict(sorted(out.items()))


ProgressCallback = Callable[[RunInfo, EpisodeResult, int], None]


async def execute(
    spec: RunSpec,
    pack: Pack,
    *,
    host: PluginHost | None = None,
    run_dir: Path | None = None,
    on_result: ProgressCallback | None = None,
) -> RunReport:
    """Run every selected (task, trial) episode with at most ``spec.concurrency`` in flight."""
    host = host or get_host()
    started = time.perf_counter()
    tasks = select_tasks(spec, pack)
    if not tasks:
        raise AgentsynthError(f"no tasks selected from pack {pack.id!r} (split={spec.split!r}, only={spec.only})")
    plan = [(task, trial, derive_seed(spec.seed, task.id, trial)) for task in tasks for trial in range(spec.trials)]
    store = RunStore(run_dir) if run_dir is not None else None
    restored: list[EpisodeResult] = []
    if store is not None:
        run_id = store.get_meta("run_id") or uuid.uuid4().hex[:12]
        store.set_meta("run_id", run_id)
        store.set_meta("spec", unstructure(spec))
        store.set_meta("pack", {"id": pack.id, "source": pack.source, "content_hash": pack.content_hash})
        store.set_meta("versions", versions())
        wanted = {(t.id, trial, seed) for t, trial, seed in plan}
        restored = [r for r in store.results() if r.key in wanted]
        done = {r.key for r in restored}
        plan = [p for p in plan if (p[0].id, p[1], p[2]) not in done]
        store.event("run_started", pending=len(plan), restored=len(restored))
    else:
        run_id = uuid.uuid4().hex[:12]
    info = RunInfo(run_id, spec, pack, run_dir, total=len(plan) + len(restored))
    provenance = {
        "run_id": run_id, "pack": pack.id, "pack_hash": pack.content_hash,
        "policy": spec.policy.to_dict(), "versions": versions(),
    }
    config = EpisodeConfig(spec.policy, spec.max_steps, spec.timeout, spec.judge)
    results: list[EpisodeResult] = []
    stop_reason = ""
    queue: asyncio.Queue[tuple[Task, int, int]] = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)

    host.notify("run_started", run=info)

    async def worker() -> None:
        nonlocal stop_reason
        while not stop_reason:
            try:
                task, trial, seed = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            result = await run_episode(host, pack, task, trial, seed, config, info)
            result.provenance = provenance
            if result.error_kind == "budget":
                # Not stored: a resume with a larger budget runs this episode again.
                stop_reason = stop_reason or f"budget: {result.error}"
                if store is not None:
                    store.event("budget_stop", task_id=task.id, trial=trial, error=result.error)
                continue
            if store is not None:
                store.put(result)
            results.append(result)
            host.notify("episode_finished", run=info, result=result)
            if on_result is not None:
                on_result(info, result, len(results) + len(restored))

    try:
        await asyncio.gather(*(worker() for _ in range(min(spec.concurrency, max(1, len(plan))))))
    finally:
        all_results = sorted(restored + results, key=lambda r: (r.task_id, r.trial))
        report = RunReport(info, all_results, stop_reason, time.perf_counter() - started)
        if store is not None:
            store.event("run_finished", stopped=stop_reason, episodes=len(all_results))
            store.close()
        host.notify("run_finished", run=info, results=all_results)
    return report


def run(spec: RunSpec, pack: Pack, **kwargs: Any) -> RunReport:
    """Synchronous wrapper around :func:`execute` for scripts and notebooks without a loop."""
    return asyncio.run(execute(spec, pack, **kwargs))
