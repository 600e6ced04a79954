"""Run directories as a library: the spec a run was made with, its status, the episodes it still
owes, and a replay of its stored trajectories in fresh worlds (what ``resume``, ``status``,
``inspect --stuck`` and ``verify`` show, for a plugin or a script to call).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .errors import AgentsynthError, SpecError
from .records import EpisodeResult


def open_run(run_dir: Path) -> Any:
    """The store of an existing run directory (a clear error when there is none)."""
    from .store import RunStore

    return RunStore(run_dir, create=False)


def load_stored_spec(run_dir: Path) -> tuple[Any, Any, Path | None]:
    """The spec and pack a run directory was run with.

    The stored spec is used as is; when secrets were redacted from it, the original spec file
    (its path is stored too) is read instead, and the usual change check applies on resume.
    """
    from .plugins import get_host
    from .secrets import has_redacted
    from .spec import RunSpec, load_run_spec, resolve_run, structure
    from .store import STORE_FILE

    store = open_run(run_dir)
    try:
        data, spec_file, pack_meta = store.get_meta("spec"), store.get_meta("spec_file"), store.get_meta("pack") or {}
    finally:
        store.close()
    if not isinstance(data, dict):
        raise AgentsynthError(f"{run_dir}: the run store holds no run spec (it was not written by `agentsynth run`)")
    spec_path = Path(spec_file) if spec_file else None
    if has_redacted(data):
        if spec_path is not None and spec_path.is_file():
            spec, pack = load_run_spec(spec_path)
            return spec, pack, spec_path
        raise AgentsynthError(
            f"{run_dir}: the stored spec had secrets redacted and its file ({spec_file or 'unknown'}) is gone;"
            f" continue with: agentsynth run SPEC --run-dir {run_dir}"
        )
    base_dir = spec_path.parent if spec_path is not None else run_dir
    # inline tasks take the pack id from the spec file's name: keep the one the run had
    source = str(spec_path) if spec_path is not None else str(run_dir / f"{pack_meta.get('id', 'spec')}.yaml")
    label = f"{run_dir / STORE_FILE} (stored spec)"
    spec = structure(data, RunSpec, source=label)
    try:
        spec, pack = resolve_run(spec, base_dir=base_dir, source=source, host=get_host())
    except SpecError as exc:
        raise SpecError(label, exc.messages) from None
    return spec, pack, spec_path


def run_status(run_dir: Path) -> dict[str, Any]:
    """What ``agentsynth status`` shows, as data."""
    from .engine import session_state
    from .report import summarize_results
    from .results import ResultSet

    store = open_run(run_dir)
    try:
        meta = store.meta()
        results = ResultSet.of_store(store)
        state, last = session_state(store)
        sessions = sum(1 for _, kind, _ in store.events() if kind == "run_started")
    finally:
        store.close()
    spec = meta.get("spec") or {}
    planned = int(meta.get("planned") or len(results))
    summary = summarize_results(
        results, run_id=meta.get("run_id", ""), pack=meta.get("pack") or {}, policy=spec.get("policy") or {},
        trials=int(spec.get("trials", 1)), seed=int(spec.get("seed", 0)), planned=planned,
        stopped=last.get("stopped", "") if state == "stopped" else "",
    )
    summary.pop("results", None)
    summary.update(run_dir=str(run_dir), run_hash=meta.get("run_hash", ""), state=state, sessions=sessions,
                   pid=last.get("pid") if state == "running" else None, created_at=meta.get("created_at"),
                   # a run written by a plugin (e.g. a generator) names itself and keeps its own tallies
                   made_by=meta.get("made_by") or "", status_lines=list(meta.get("status_lines") or ()))
    return summary


def unfinished_episodes(run_dir: Path) -> list[tuple[str, int, int]]:
    """(task, trial, seed) of every planned episode the store does not hold: never started, or
    cut off by a kill, a crash or a budget stop. Rebuilt from the stored spec, so nothing is
    written per episode to know it."""
    from .engine import plan_episodes
    from .spec import select_tasks

    spec, pack, _ = load_stored_spec(run_dir)
    store = open_run(run_dir)
    try:
        stored = store.keys()
    finally:
        store.close()
    plan = [(task.id, trial, seed) for task, trial, seed in plan_episodes(spec, select_tasks(spec, pack))]
    return [key for key in plan if key not in stored]


async def verify_run(run_dir: Path, *, task_ids: list[str] | None = None) -> dict[str, Any]:
    """Replay every stored trajectory in a fresh world and compare the checkers' verdicts."""
    from .engine import RunInfo, pack_record
    from .episode import replay_episode
    from .plugins import get_host

    spec, pack, _ = load_stored_spec(run_dir)
    store = open_run(run_dir)
    try:
        integrity = store.integrity()
        stored_pack = store.get_meta("pack") or {}
        results = [r for r in store.results() if not task_ids or r.task_id in task_ids]
        run_id = store.get_meta("run_id") or ""
    finally:
        store.close()
    host = get_host()
    tasks = {t.id: t for t in pack.tasks}
    info = RunInfo(run_id, spec, pack, run_dir, total=len(results))
    warnings = []
    if integrity != "ok":
        warnings.append(f"store integrity check: {integrity}")
    current = pack_record(pack, spec)
    for key in ("content_hash", "oracle_hash"):
        if stored_pack.get(key) != current.get(key):
            warnings.append(f"pack {key} changed since the run ({stored_pack.get(key)} -> {current.get(key)})")
    limit = asyncio.Semaphore(max(1, spec.concurrency))
    rows: list[dict[str, Any]] = []

    async def one(result: EpisodeResult) -> None:
        row: dict[str, Any] = {"task_id": result.task_id, "trial": result.trial, "seed": result.seed,
                               "stored": result.status}
        rows.append(row)
        if result.status == "error" or result.trajectory is None:
            row["outcome"] = "skipped"
            row["reason"] = f"the episode ended with an error ({result.error_kind})"
            return
        task = tasks.get(result.task_id)
        if task is None:
            row["outcome"], row["reason"] = "differs", "the task is no longer in the pack"
            return
        async with limit:
            replay = await replay_episode(host, pack, task, result.seed, result.trajectory, timeout=spec.timeout,
                                          run=info)
        row["replayed"] = replay.status
        if replay.drift:
            row["drift_steps"] = replay.drift
        before = [(v.checker, v.passed) for v in result.verdicts]
        after = [(v.checker, v.passed) for v in replay.verdicts]
        if replay.status == result.status and before == after:
            row["outcome"] = "reproduced"
            return
        row["outcome"] = "differs"
        row["reason"] = replay.error or "; ".join(
            f"{v.checker}: {'passed' if v.passed else 'failed'} ({v.detail})" for v in replay.verdicts
        )
        row["stored_verdicts"] = [f"{v.checker}: {'passed' if v.passed else 'failed'} ({v.detail})" for v in result.verdicts]

    await asyncio.gather(*(one(r) for r in results))
    rows.sort(key=lambda r: (r["task_id"], r["trial"]))
    tally = {k: sum(r["outcome"] == k for r in rows) for k in ("reproduced", "differs", "skipped")}
    return {"run_dir": str(run_dir), "episodes": len(rows), **tally, "warnings": warnings, "results": rows}
