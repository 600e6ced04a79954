"""The run engine: every (task, trial) episode of a spec, a bounded number at a time.

``agentsynth run``, ``resume`` and ``bench`` all come through :func:`execute`.
Results go to the run store as soon as each episode ends, so a killed run can
resume: episodes already stored are not run again, the ones that were in
flight are run again from scratch. A resume with a different spec is refused
with a diff (unless forced); a larger ``budget:`` or another ``concurrency:``
is always accepted. At the end, the spec's ``export:`` entries are written.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from .components import call
from .episode import EpisodeConfig
from .errors import AgentsynthError
from .plugins import PluginHost, get_host
from .records import EpisodeResult, Usage, from_json, to_builtins
from .results import ResultSet
from .secrets import redact, remember_environment
from .spec import ComponentSpec, Pack, RunSpec, Task, build, content_hash, select_tasks, unstructure
from .store import BATCH_SECONDS, STORE_FILE, RunStore
from .types import RunInfo as RunInfo  # defined in the leaf module types.py; public here as before

# Spec keys that may change between sessions of one run without --force: they do not change what an
# episode does or which episodes exist (a larger budget is how a budget-stopped run continues).
RESUMABLE_CHANGES = ("budget", "concurrency", "export", "run_dir", "executor")


class SpecChanged(AgentsynthError):
    """Resuming a run directory with a spec that differs from the one it was started with."""


class RunInUse(AgentsynthError):
    """Another live process is running this run directory."""


log = logging.getLogger(__name__)


def plan_episodes(spec: RunSpec, tasks: list[Task]) -> list[tuple[Task, int, int]]:
    """Every (task, trial, seed) a run of ``spec`` plays, in order; the seeds are stable."""
    return list(Plan(spec, tasks))


class Plan:
    """The episodes of a run, (task, trial, seed) in order, without listing them (a 1M-episode
    run plans in O(tasks) memory): iterable, sized, and ``key in plan`` for a stored episode."""

    def __init__(self, spec: RunSpec, tasks: list[Task]) -> None:
        self.tasks, self.trials, self.seed = tasks, spec.trials, spec.seed
        self._ids = {task.id for task in tasks}

    def __len__(self) -> int:
        return len(self.tasks) * self.trials

    def __iter__(self) -> Iterator[tuple[Task, int, int]]:
        for task in self.tasks:
            for trial in range(self.trials):
                yield task, trial, derive_seed(self.seed, task.id, trial)

    def __contains__(self, key: object) -> bool:
        if not (isinstance(key, tuple) and len(key) == 3):
            return False
        task_id, trial, seed = key
        return (task_id in self._ids and isinstance(trial, int) and 0 <= trial < self.trials
                and seed == derive_seed(self.seed, task_id, trial))

    def digest(self) -> str:
        """sha256 over the sorted (task, trial, seed) keys, streamed (part of the run hash)."""
        h = hashlib.sha256()
        for task_id in sorted(self._ids):
            for trial in range(self.trials):
                h.update(f"{task_id}\0{trial}\0{derive_seed(self.seed, task_id, trial)}\n".encode())
        return h.hexdigest()


def derive_seed(base: int, task_id: str, trial: int) -> int:
    """A stable per-episode seed: same spec seed, task and trial -> same seed on every machine."""
    digest = hashlib.sha256(f"{base}:{task_id}:{trial}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


@attrs.define
class RunReport:
    """The results of a run (including ones restored from the store on resume)."""

    info: RunInfo = attrs.field(repr=False)
    # in (task, trial) order, streamed from the run store when there is one (see results.ResultSet)
    results: Sequence[EpisodeResult] = attrs.field(repr=False)  # a repr of thousands of results is costly
    stopped: str = ""  # why the run ended early ("budget: ..."), empty when complete
    duration_s: float = 0.0
    exports: list[dict[str, Any]] = attrs.field(factory=list)  # {type, path, count} or {type, path, error}
    notes: list[str] = attrs.field(factory=list)  # what the user should know (accepted spec changes ...)

    @property
    def export_failed(self) -> bool:
        return any("error" in e for e in self.exports)


def versions() -> dict[str, str]:
    """Installed versions of the kernel and every agentsynth plugin distribution (provenance)."""
    return dict(_installed_versions())


# a distribution's folder (``agentsynth_sql-0.1.0.dist-info``) starts with its name: agentsynth's or not
_OURS = re.compile(r"agentsynth(?:[-_.]|$)", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def _installed_versions() -> tuple[tuple[str, str], ...]:
    # Parsing METADATA is ~0.25 ms a distribution (~45 ms in an environment of 180): only ours are
    # read, the others are told apart by their folder's name. Once per process, not once per run.
    out = {}
    for dist in metadata.distributions():
        folder = getattr(dist, "_path", None)  # a PathDistribution's; other finders: read as before
        if folder is not None and not _OURS.match(Path(folder).name):
            continue
        name = dist.metadata["Name"] or ""
        if name == "agentsynth" or name.startswith("agentsynth-"):
            out[name] = dist.version
    return tuple(sorted(out.items()))


# --- provenance ------------------------------------------------------------------------------------


def pack_record(pack: Pack, spec: RunSpec | None = None) -> dict[str, Any]:
    """What identifies the pack's content: its id, source and hashes (the oracle's too, when it
    lives outside the pack directory, as with inline tasks). Inline tasks are part of the spec
    itself, so the hash of the spec file is left out (a new budget must not look like a new pack)."""
    record = {"id": pack.id, "source": pack.source}
    if spec is None or spec.tasks is None:
        record["content_hash"] = pack.content_hash
    oracle = pack.oracle_path
    if oracle is not None and oracle.is_file():
        inside = pack.source.endswith("pack.yaml") and pack.base_dir in oracle.resolve().parents
        if not inside:  # not covered by the pack's content hash
            record["oracle_hash"] = content_hash(oracle)
    return record


def spec_record(spec: RunSpec) -> dict[str, Any]:
    """The spec as plain data with secrets redacted: what the run directory stores."""
    record: dict[str, Any] = redact(unstructure(spec))
    return record


def run_hash(spec_data: dict[str, Any], pack: dict[str, Any], plan: Plan, vers: dict[str, str]) -> str:
    """sha256 over what determines the episodes: spec (minus resumable keys), pack hashes, seeds, versions."""
    material = {
        "spec": {k: v for k, v in spec_data.items() if k not in RESUMABLE_CHANGES},
        "pack": {k: v for k, v in pack.items() if k != "source"},
        "episodes": plan.digest(),
        "versions": vers,
    }
    return "sha256:" + hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {f"{prefix}.length": len(value)} if prefix else {}
        for i, item in enumerate(value):
            out.update(_flatten(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def spec_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One readable line per changed leaf: ``trials: 2 -> 3``, ``tasks[1].instruction: '...' -> '...'``."""
    a, b = _flatten(old), _flatten(new)
    lines = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, ...) == b.get(key, ...):
            continue
        before = "(absent)" if key not in a else json.dumps(a[key], default=str)
        after = "(absent)" if key not in b else json.dumps(b[key], default=str)
        lines.append(f"{key}: {_clip(before)} -> {_clip(after)}")
    return lines


def _clip(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def trajectory_bytes(result: EpisodeResult) -> bytes:
    """A trajectory's canonical bytes: everything except wall-clock step durations (determinism checks)."""
    data = to_builtins(result.trajectory) if result.trajectory is not None else None
    if data:
        for step in data.get("steps", []):
            step.pop("duration_s", None)
    return json.dumps(data, sort_keys=True).encode()


# --- opening a run directory -----------------------------------------------------------------------


def open_run_store(run_dir: Path) -> RunStore:
    """The store of a run directory to write to: new, empty or an existing run; anything else is refused."""
    run_dir = Path(run_dir)
    if run_dir.is_dir() and not (run_dir / STORE_FILE).exists():
        foreign = sorted(p.name for p in run_dir.iterdir())
        if foreign:
            shown = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
            raise AgentsynthError(
                f"{run_dir}: not an agentsynth run directory (it holds {shown} but no {STORE_FILE});"
                " choose a new or empty --run-dir"
            )
    return RunStore(run_dir)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def session_state(store: RunStore) -> tuple[str, dict[str, Any]]:
    """``new``, ``running`` (a live process on this host), ``interrupted``, ``stopped`` or ``complete``."""
    last = store.last_event("run_started", "run_finished")
    if last is None:
        return "new", {}
    kind, data = last
    if kind == "run_finished":
        if data.get("interrupted"):
            return "interrupted", data
        return ("stopped" if data.get("stopped") else "complete"), data
    pid = data.get("pid")
    if data.get("host") == socket.gethostname() and isinstance(pid, int) and pid != os.getpid() and _pid_alive(pid):
        return "running", data
    return "interrupted", data


def _prepare_store(
    store: RunStore, spec: RunSpec, pack: Pack, plan: Plan, restored: ResultSet, *, force: bool,
    spec_file: Path | None, notes: list[str], vers: dict[str, str] | None = None,
) -> tuple[str, str, dict[str, bytearray]]:
    """Open a session in one transaction: check a resumed run against its stored spec, write this
    session's meta, count the finished episodes back into ``restored`` and log ``run_started`` (a
    kill half-way must not leave a run id without its spec; a second process sees this one as
    running). Returns (run_id, run_hash, the trials already done per task)."""
    vers = vers if vers is not None else versions()
    done: dict[str, bytearray] = {}
    with store.transaction():
        run_id, digest = _prepare_store_locked(store, spec, pack, plan, vers, force=force, spec_file=spec_file,
                                               notes=notes)
        for result in store.results():
            if result.key in plan:
                restored.add(result, stored=True)
                done.setdefault(result.task_id, bytearray(plan.trials))[result.trial] = 1
        store.event("run_started", pid=os.getpid(), host=socket.gethostname(), pending=len(plan) - len(restored),
                    restored=len(restored), run_hash=digest)
    return run_id, digest, done


def _prepare_store_locked(
    store: RunStore, spec: RunSpec, pack: Pack, plan: Plan, vers: dict[str, str], *,
    force: bool, spec_file: Path | None, notes: list[str],
) -> tuple[str, str]:
    new_spec, new_pack = spec_record(spec), pack_record(pack, spec)
    run_id = store.get_meta("run_id")
    if run_id is not None:
        state, data = session_state(store)
        if state == "running":
            raise RunInUse(f"{store.run_dir}: this run is being executed by process {data['pid']}; wait for it or stop it")
        old_spec, old_pack = store.get_meta("spec") or {}, store.get_meta("pack") or {}
        old_pack = {k: v for k, v in old_pack.items() if k != "source"}
        strict = spec_diff(
            {"spec": {k: v for k, v in old_spec.items() if k not in RESUMABLE_CHANGES}, "pack": old_pack},
            {"spec": {k: v for k, v in new_spec.items() if k not in RESUMABLE_CHANGES},
             "pack": {k: v for k, v in new_pack.items() if k != "source"}},
        )
        if strict and not force:
            shown = "\n".join(f"  {line}" for line in strict)
            raise SpecChanged(
                f"{store.run_dir}: the spec differs from the one this run was started with:\n{shown}\n"
                "resume with --force to continue anyway (stored episodes are kept), or use a new --run-dir"
            )
        if strict:
            store.event("spec_changed", diff=strict, forced=True)
            notes.append(f"spec changed ({len(strict)} difference(s)), resumed with --force")
        relaxed = spec_diff({k: old_spec.get(k) for k in RESUMABLE_CHANGES}, {k: new_spec.get(k) for k in RESUMABLE_CHANGES})
        if relaxed:
            store.event("spec_updated", diff=relaxed)
            notes.append("accepted change: " + "; ".join(relaxed))
        old_versions = store.get_meta("versions") or {}
        if old_versions != vers:
            changed = spec_diff(old_versions, vers)
            store.event("versions_changed", diff=changed)
            notes.append("installed versions changed since the last session: " + "; ".join(changed))
    else:
        run_id = uuid.uuid4().hex[:12]
        store.set_meta("run_id", run_id)
        store.set_meta("created_at", time.time())
    digest = run_hash(new_spec, new_pack, plan, vers)
    store.set_meta("spec", new_spec)
    store.set_meta("pack", new_pack)
    store.set_meta("versions", vers)
    store.set_meta("planned", len(plan))
    store.set_meta("run_hash", digest)
    if spec_file is not None:
        store.set_meta("spec_file", str(Path(spec_file).resolve()))
    return run_id, digest


def _flush(store: RunStore, flush_due: list[asyncio.TimerHandle]) -> None:
    flush_due.clear()
    try:
        store.flush()
    except AgentsynthError as exc:  # the next put or the end of the run tries again and raises
        log.warning("%s", exc)


def _not_done(plan: Plan, done: dict[str, bytearray]) -> Iterator[tuple[Task, int, int]]:
    """The plan's episodes the store does not hold yet, in plan order (shared by the workers)."""
    for task, trial, seed in plan:
        trials = done.get(task.id)
        if trials is None or not trials[trial]:
            yield task, trial, seed


def earlier_spending(store: RunStore, restored: ResultSet) -> Usage:
    """Usage of the restored episodes plus that of episodes stopped by a budget in earlier sessions."""
    total = restored.tally.usage
    for _, kind, data in store.events():
        if kind == "budget_stop" and isinstance(data.get("usage"), dict):
            total = total + from_json(json.dumps(data["usage"]), Usage)
    return total


# --- exports ---------------------------------------------------------------------------------------


async def run_exports(spec: RunSpec, results: Sequence[EpisodeResult], host: PluginHost,
                      base_dir: Path | None = None) -> list[dict[str, Any]]:
    """Write every ``export:`` entry; a failing exporter is recorded, never raised.

    ``path`` is taken out of the entry and handed to ``export(results, path)``; the other keys
    build the exporter (with ``base_dir``, the spec's directory, if its factory takes one).
    """
    done = []
    for i, cspec in enumerate(spec.export):
        params = dict(cspec.params)
        path = params.pop("path", None)
        entry: dict[str, Any] = {"type": cspec.type, "path": str(path or "")}
        try:
            if not isinstance(path, str) or not path:
                raise ValueError(f"export[{i}]: missing 'path' (the file to write)")
            exporter = build("exporter", ComponentSpec(cspec.type, params), host=host, base_dir=base_dir)
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            entry["count"] = await call(exporter.export, results, target)
        except Exception as exc:  # an exporter bug must not lose the run
            entry["error"] = f"{type(exc).__name__}: {exc}"
        done.append(entry)
    return done


# --- the engine ------------------------------------------------------------------------------------

ProgressCallback = Callable[[RunInfo, EpisodeResult, int], None]
StartCallback = Callable[[RunInfo, Task, int], None]


async def execute(
    spec: RunSpec,
    pack: Pack,
    *,
    host: PluginHost | None = None,
    run_dir: Path | None = None,
    on_result: ProgressCallback | None = None,
    on_start: StartCallback | None = None,
    force: bool = False,
    spec_file: Path | None = None,
) -> RunReport:
    """Run every selected (task, trial) episode with at most ``spec.concurrency`` in flight.

    With ``run_dir``, results are stored as they finish and an existing run there is resumed
    (refused with :class:`SpecChanged` when the spec differs, unless ``force``).
    ``on_start(info, task, trial)`` and ``on_result(info, result, done)`` drive progress displays.
    """
    host = host or get_host()
    started = time.perf_counter()
    remember_environment()  # provider keys are masked by value in everything the run writes
    tasks = select_tasks(spec, pack)
    if not tasks:
        raise AgentsynthError(f"no tasks selected from pack {pack.id!r} (split={spec.split!r}, only={spec.only})")
    plan = Plan(spec, tasks)
    notes: list[str] = []
    vers = versions()
    store = open_run_store(run_dir) if run_dir is not None else None
    # results live in the store as they finish (or in memory, then a temporary store): never all in memory
    results = ResultSet(run_dir=run_dir, wanted=plan.__contains__)
    done: dict[str, bytearray] = {}
    if store is not None:
        try:
            run_id, digest, done = _prepare_store(store, spec, pack, plan, results, force=force,
                                                  spec_file=spec_file, notes=notes, vers=vers)
            spent = earlier_spending(store, results)
        except BaseException:
            store.close()
            raise
    else:
        run_id, spent = uuid.uuid4().hex[:12], Usage()
        digest = run_hash(spec_record(spec), pack_record(pack, spec), plan, vers)
    restored = len(results)
    info = RunInfo(run_id, spec, pack, run_dir, total=len(plan), run_hash=digest,
                   restored=restored, spent=spent, journal=store)
    provenance = {
        "run_id": run_id, "run_hash": digest, "pack": pack.id, "pack_hash": pack.content_hash,
        "policy": redact(spec.policy.to_dict()), "versions": vers,
    }
    config = EpisodeConfig(spec.policy, spec.max_steps, spec.timeout, spec.judge)
    executor = build("executor", spec.executor or ComponentSpec("local"), host=host, run=info)
    stop_reason = ""
    pending = _not_done(plan, done)
    flush_due: list[asyncio.TimerHandle] = []  # the pending commit of deferred episodes, if any

    host.notify("run_started", run=info)

    async def worker() -> None:
        nonlocal stop_reason
        while not stop_reason:
            item = next(pending, None)
            if item is None:
                return
            task, trial, seed = item
            if on_start is not None:
                on_start(info, task, trial)
            # An episode of a world that runs on the loop and a policy that runs inline never
            # suspends: without this, one worker would run the whole queue, deaf to Ctrl-C (a
            # cancellation lands only at a suspension) and to the other workers.
            await asyncio.sleep(0)
            try:
                result = await executor.run_episode(host, pack, task, trial, seed, config, info)
            except Exception as exc:  # an executor that loses an episode fails it, not the run
                result = executor_failure(task, trial, seed, exc)
            result.provenance = provenance
            if result.error_kind == "budget":
                # Not stored: a resume with a larger budget runs this episode again.
                stop_reason = stop_reason or f"budget: {result.error}"
                if store is not None:
                    store.event("budget_stop", task_id=task.id, trial=trial, error=result.error,
                                usage=to_builtins(result.usage))
                if on_result is not None:
                    on_result(info, result, len(results))
                continue
            if store is not None:
                store.put(result, defer=True)
                if store.unflushed and not flush_due:  # commit the quick ones at most BATCH_SECONDS late
                    flush_due.append(asyncio.get_running_loop().call_later(BATCH_SECONDS, _flush, store, flush_due))
            results.add(result, stored=store is not None)
            host.notify("episode_finished", run=info, result=result)
            if on_result is not None:
                on_result(info, result, len(results))

    finished = False
    try:
        width = getattr(executor, "concurrency", None) or spec.concurrency
        await asyncio.gather(*(worker() for _ in range(min(width, max(1, len(plan) - restored)))))
        finished = True
    finally:
        for timer in flush_due:
            timer.cancel()
        report = RunReport(info, results, stop_reason, time.perf_counter() - started, notes=notes)
        if store is not None:
            store.flush()
            store.event("run_finished", stopped=stop_reason, episodes=len(results),
                        interrupted=not finished)
        try:
            host.notify("run_finished", run=info, results=results)  # also when interrupted: observers flush
            if finished:  # exports only from a session that ran to its end (complete or budget-stopped)
                base_dir = Path(spec_file).resolve().parent if spec_file is not None else pack.base_dir
                report.exports = await run_exports(spec, results, host, base_dir)
                if store is not None:
                    for entry in report.exports:
                        store.event("export_failed" if "error" in entry else "exported", **entry)
        finally:
            aclose = getattr(executor, "aclose", None)
            if callable(aclose):
                try:
                    await call(aclose)
                except Exception as exc:
                    log.warning("closing the executor failed: %s", exc)
            await close_services(info, store)
            if store is not None:
                store.close()
    report.duration_s = time.perf_counter() - started
    return report


def executor_failure(task: Task, trial: int, seed: int, exc: Exception) -> EpisodeResult:
    """The result of an episode its executor lost (a dead worker, a lost connection): an
    infrastructure failure, stored like any other, so a resume does not replay it by surprise."""
    return EpisodeResult(task_id=task.id, trial=trial, seed=seed, status="error", split=task.split, tier=task.tier,
                         error=f"executor: {type(exc).__name__}: {exc}", error_kind="environment")


async def close_services(info: RunInfo, store: RunStore | None) -> None:
    """Release run-scoped services (``aclose``/``close``) and record their stats (e.g. LLM requests,
    retries, cost) as a ``service_stats`` event. A failing close is logged, never raised."""
    for name, service in list(info.services.items()):
        stats = getattr(service, "stats", None)
        to_dict = getattr(stats, "to_dict", None)
        if store is not None and callable(to_dict):
            try:
                store.event("service_stats", service=name, stats=to_dict())
            except Exception as exc:  # stats are informative; never fail a finished run over them
                log.warning("could not record stats of run service %r: %s", name, exc)
        for method in ("aclose", "close"):
            close = getattr(service, method, None)
            if callable(close):
                try:
                    await call(close)
                except Exception as exc:
                    log.warning("closing run service %r failed: %s", name, exc)
                break
    info.services.clear()


def run(spec: RunSpec, pack: Pack, **kwargs: Any) -> RunReport:
    """Synchronous wrapper around :func:`execute` for scripts and notebooks without a loop."""
    return asyncio.run(execute(spec, pack, **kwargs))
