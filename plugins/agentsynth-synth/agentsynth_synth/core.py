"""The generator interface of agentsynth-synth and the runner every generator goes through.

A *synth generator* splits its work into **items** planned up front from the seed
(``plan(ctx) -> [Item]``, deterministic), and turns one item into an :class:`Outcome`
(``await make(ctx, item, meter)``): the accepted records (new tasks with a verifying
trajectory, or trajectories of existing tasks) and the rejections with their reasons.

:func:`synthesize` runs the items **depth-first**: at most ``concurrency`` items are in
flight, and an item runs to its end (every round, every rollout) before a new one starts.
Each finished item is written to the durable :class:`~agentsynth_kernel.store.RunStore`
in one transaction (accepted records as EpisodeResults, one ``synth_item`` event with the
rejection reasons and the LLM requests the item cost). A budget stop or a kill therefore
leaves only complete items in the store; a rerun on the same run directory skips the items
already done (``resume``). All LLM calls go through the run's kernel client
(``client_for(run)``: cache, retries, budget), so a fixed seed and a warm cache give the
same items again without a single request.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
import msgspec

from agentsynth_kernel import (
    AgentsynthError,
    Budget,
    BudgetExceeded,
    ComponentSpec,
    EpisodeConfig,
    EpisodeResult,
    Pack,
    RunSpec,
    RunStore,
    Task,
    ToolCall,
    Trajectory,
    Usage,
    Verdict,
    from_json,
    redact,
    replay_episode,
    run_episode,
    to_builtins,
    unstructure,
)

# --- records ---------------------------------------------------------------------------------------


@attrs.define
class Item:
    """One unit of generation work: ``id`` is stable across runs (resume key), ``seed`` derived."""

    id: str
    seed: int
    payload: Any = None


@attrs.define
class Accepted:
    """An accepted record. ``new_task`` records carry ``oracle`` (actions that solve the task,
    as ``{"tool", "arguments"}`` / ``{"answer"}`` dicts); trajectories of existing tasks do not."""

    task: Task
    trajectory: Trajectory
    verdicts: list[Verdict] = attrs.field(factory=list)
    new_task: bool = True
    oracle: list[dict[str, Any]] | None = None
    seed: int = 0
    trial: int = 0
    scores: dict[str, float] = attrs.field(factory=dict)
    usage: Usage = attrs.field(factory=Usage)
    info: dict[str, Any] = attrs.field(factory=dict)


@attrs.define
class Outcome:
    """What one item produced: accepted records and ``rejected`` entries ``{reason, detail, ...}``."""

    accepted: list[Accepted] = attrs.field(factory=list)
    rejected: list[dict[str, Any]] = attrs.field(factory=list)

    def reject(self, reason: str, detail: str = "", **extra: Any) -> Outcome:
        self.rejected.append({"reason": reason, "detail": _clip(detail, 500), **extra})
        return self


@attrs.define
class Meter:
    """LLM requests and usage spent on one item (the generator's own calls and its rollouts)."""

    requests: int = 0
    usage: Usage = attrs.field(factory=Usage)

    def add(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage = self.usage + usage
            self.requests += usage.requests


class Journal:
    """The finished steps of unfinished items (a proposal, one solver attempt, a reflection), one
    ``synth_step`` event each, written as each step lands. A rerun after a kill takes a stored step
    from here instead of requesting it again; a finished item's steps are not loaded."""

    def __init__(self, store: RunStore | None = None, generator: str = "",
                 steps: dict[tuple[str, str], dict[str, Any]] | None = None) -> None:
        self.store, self.generator = store, generator
        self.steps = steps or {}
        self.restored = 0  # steps taken from the store in this session

    def get(self, item: str, key: str) -> dict[str, Any] | None:
        return self.steps.get((item, key))

    def put(self, item: str, key: str, value: Any, usage: Usage) -> None:
        data = {"generator": self.generator, "item": item, "key": key, "value": redact(value),
                "usage": to_builtins(usage)}
        self.steps[(item, key)] = data
        if self.store is not None:
            self.store.event("synth_step", **data)


class SynthGenerator(Protocol):
    """The interface of this plugin's generators (richer than the kernel's ``generate()``)."""

    name: str
    makes_tasks: bool  # True: new tasks (written as a pack); False: trajectories of existing tasks

    def plan(self, ctx: SynthContext) -> list[Item]: ...

    async def make(self, ctx: SynthContext, item: Item, meter: Meter) -> Outcome: ...


class ItemIncomplete(AgentsynthError):
    """An item could not be finished for a reason outside it (the LLM provider failed for good):
    it is not recorded, so a rerun on the same run directory tries it again."""


# --- helpers ---------------------------------------------------------------------------------------


def derive_seed(base: int, *parts: Any) -> int:
    digest = hashlib.sha256(":".join(str(p) for p in (base, *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _clip(text: str, width: int = 300) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def action_dicts(trajectory: Trajectory, *, answer: str | None = None) -> list[dict[str, Any]]:
    """The valid, executed tool calls of a trajectory (+ its final answer) as oracle actions."""
    out: list[dict[str, Any]] = []
    for step in trajectory.steps:
        if isinstance(step.action, ToolCall) and not step.invalid:
            out.append({"tool": step.action.name, "arguments": dict(step.action.arguments)})
    final = answer if answer is not None else (trajectory.final_answer or "")
    out.append({"answer": final})
    return out


def why_failed(result: EpisodeResult, limit: int = 400) -> str:
    if result.status == "error":
        return _clip(f"{result.error_kind}: {result.error}", limit)
    return _clip("; ".join(f"{v.checker}: {v.detail}" for v in result.verdicts if not v.passed), limit)


_FENCE = re.compile(r"```(?:json|yaml)?\s*(.*?)```", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in an LLM answer (bare, fenced, or the outermost ``{...}``)."""
    candidates = [m.group(1) for m in _FENCE.finditer(text or "")] + [text or ""]
    start, end = (text or "").find("{"), (text or "").rfind("}")
    if start >= 0 and end > start:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate.strip())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError("the answer holds no JSON object")


def task_record(task: Task) -> dict[str, Any]:
    """A task as pack.yaml data (defaults left out)."""
    data = unstructure(task)
    defaults: dict[str, Any] = {"split": "test", "tier": "", "environment": {}, "max_steps": None, "metadata": {}, "checkers": []}
    return {k: v for k, v in data.items() if k not in defaults or v != defaults[k] or k == "checkers"}


# --- context ---------------------------------------------------------------------------------------


@attrs.define
class LLMSettings:
    """Where the generator's own LLM calls go (teachers and solvers are policy specs of their own)."""

    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = 0.0
    max_tokens: int | None = 1024


class SynthContext:
    """What a generator works with: the source pack, the plugin host, the run (budget, LLM client,
    services), episode settings, and the seed. Episodes are played by the kernel's
    ``run_episode`` in real environments with real checkers."""

    def __init__(self, pack: Pack, *, host: Any = None, seed: int = 0, budget_usd: float | None = None,
                 budget_tokens: int | None = None, cache: bool | str | Path = True, max_steps: int = 30,
                 timeout: float = 120.0, run_dir: Path | None = None, llm_client: Any = None,
                 llm: LLMSettings | None = None, name: str = "synth") -> None:
        from agentsynth_kernel import RunInfo, client_for, get_host

        self.host = host or get_host()
        self.pack = pack
        self.seed = seed
        self.max_steps, self.timeout = max_steps, timeout
        spec = RunSpec(policy=ComponentSpec("noop"), name=name, seed=seed, max_steps=max_steps, timeout=timeout,
                       budget=Budget(budget_usd, budget_tokens))
        self.run = RunInfo(run_id=f"synth-{seed}", spec=spec, pack=pack, run_dir=run_dir, total=0)
        if llm_client is not None:
            self.run.services["llm"] = llm_client
        self.llm_client = client_for(self.run, cache=cache)
        self.llm = llm or LLMSettings()
        self.journal = Journal()  # synthesize() gives it the run store and the steps stored before
        self._world: tuple[str, list[Any]] | None = None

    async def step(self, item: Item, key: str, meter: Meter, make: Callable[[Meter], Awaitable[Any]]) -> Any:
        """``await make(step_meter)`` once per (item, key) across sessions: a step stored by an
        earlier, killed session is returned as stored (its requests still count on ``meter``, the
        item's cost), a new one is stored as soon as it lands. ``make`` returns JSON-ready data."""
        stored = self.journal.get(item.id, key)
        if stored is not None:
            self.journal.restored += 1
            meter.add(msgspec.convert(stored.get("usage") or {}, Usage))
            return stored["value"]
        own = Meter()
        value = await make(own)
        meter.add(own.usage)
        self.journal.put(item.id, key, value, own.usage)
        return value

    async def stored_episode(self, item: Item, key: str, task: Task, policy: ComponentSpec, *, seed: int,
                             trial: int = 0, meter: Meter) -> EpisodeResult:
        """:meth:`episode` as a journaled step (see :meth:`step`)."""
        async def play(m: Meter) -> Any:
            return to_builtins(await self.episode(task, policy, seed=seed, trial=trial, meter=m))

        value = await self.step(item, key, meter, play)
        return from_json(json.dumps(value), EpisodeResult)

    # --- LLM ------------------------------------------------------------------------------------

    async def ask(self, messages: Sequence[dict[str, Any]], meter: Meter, *, salt: str,
                  settings: LLMSettings | None = None, **params: Any) -> str:
        """One request of the generator itself (counted on ``meter``); returns the text."""
        s = settings or self.llm
        if not s.model:
            raise AgentsynthError("this generator needs a model: set 'model:' (e.g. openai/gpt-4o-mini)")
        response = await self.llm_client.complete(
            list(messages), model=s.model, api_base=s.api_base, api_key_env=s.api_key_env,
            temperature=s.temperature, max_tokens=s.max_tokens, cache_salt=salt, **params,
        )
        meter.add(response.usage if not response.cached else Usage(0, 0, 0.0, 0))
        return response.content

    # --- episodes -------------------------------------------------------------------------------

    async def episode(self, task: Task, policy: ComponentSpec, *, seed: int, trial: int = 0,
                      meter: Meter | None = None, judge: ComponentSpec | None = None,
                      pack: Pack | None = None) -> EpisodeResult:
        """Play ``task`` with ``policy`` in a fresh world (kernel ``run_episode``); BudgetExceeded propagates."""
        config = EpisodeConfig(policy, task.max_steps or self.max_steps, self.timeout, judge)
        result = await run_episode(self.host, pack or self.pack, task, trial, seed, config, self.run)
        if meter is not None:
            meter.add(result.usage)  # the policy's turns and the judge's requests
        if result.error_kind == "budget":
            raise BudgetExceeded(result.error)
        if result.error_kind == "provider":
            raise ItemIncomplete(result.error)
        return result

    async def replay(self, task: Task, trajectory: Trajectory, *, seed: int) -> Any:
        return await replay_episode(self.host, self.pack, task, seed, trajectory, timeout=self.timeout, run=self.run)

    async def world(self) -> tuple[str, list[Any]]:
        """The world's first observation and tools (from one noop episode; cached)."""
        if self._world is None:
            probe = Task("synth-probe-world", "(inspect the world)", checkers=[ComponentSpec("synth_fingerprint")])
            result = await self.episode(probe, ComponentSpec("noop"), seed=self.seed)
            if result.status == "error" or result.trajectory is None:
                raise AgentsynthError(f"cannot start the pack's environment: {result.error}")
            self._world = (result.trajectory.initial_observation, list(result.trajectory.tools))
        return self._world


# --- the runner ------------------------------------------------------------------------------------


@attrs.define
class SynthReport:
    generator: str
    planned: int
    done_items: int = 0
    restored_items: int = 0
    accepted: list[EpisodeResult] = attrs.field(factory=list)
    rejected: Counter[str] = attrs.field(factory=Counter)
    requests: int = 0
    usage: Usage = attrs.field(factory=Usage)
    stopped: str = ""
    incomplete: int = 0  # items not finished because the provider failed (not stored: a rerun retries them)
    errors: list[str] = attrs.field(factory=list)
    duration_s: float = 0.0
    per_item: list[dict[str, Any]] = attrs.field(factory=list)
    restored_steps: int = 0  # steps of unfinished items taken from the store (not requested again)

    def status_lines(self) -> list[str]:
        """What `agentsynth status` prints for a generation run: accepted, rejected by reason, requests."""
        rejected = ", ".join(f"{reason} {n}" for reason, n in sorted(self.rejected.items())) or "none"
        return [f"items: {self.restored_items + self.done_items} of {self.planned} done · accepted {len(self.accepted)}",
                f"rejected: {rejected}", f"LLM requests: {self.requests}"]

    @property
    def requests_per_accepted(self) -> float | None:
        return self.requests / len(self.accepted) if self.accepted else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "generator": self.generator, "planned_items": self.planned, "done_items": self.done_items,
            "restored_items": self.restored_items, "accepted": len(self.accepted),
            "accepted_ids": [r.task_id for r in self.accepted],
            "rejected": dict(sorted(self.rejected.items())), "llm_requests": self.requests,
            "llm_requests_per_accepted": self.requests_per_accepted,
            "tokens": self.usage.prompt_tokens + self.usage.completion_tokens, "cost_usd": self.usage.cost_usd,
            "restored_steps": self.restored_steps,
            "stopped": self.stopped, "incomplete_items": self.incomplete, "errors": self.errors,
            "duration_s": round(self.duration_s, 3),
        }


def to_result(acc: Accepted, *, generator: str, item: Item, meter: Meter) -> EpisodeResult:
    traj = acc.trajectory
    synth = dict(traj.metadata.get("synth", {}))
    synth.update({"generator": generator, "item": item.id, "new_task": acc.new_task, "item_requests": meter.requests,
                  **acc.info})
    if acc.new_task:
        synth["task"] = task_record(acc.task)
        synth["oracle"] = acc.oracle or action_dicts(traj)
    traj.metadata["synth"] = synth
    return EpisodeResult(
        task_id=acc.task.id, trial=acc.trial, seed=acc.seed, status="passed", trajectory=traj,
        verdicts=list(acc.verdicts), usage=acc.usage, scores=dict(acc.scores), split=acc.task.split,
        tier=acc.task.tier, provenance={"generator": generator, "item": item.id},
    )


ProgressFn = Callable[[str, dict[str, Any]], None]


def _open_store(run_dir: Path) -> RunStore:
    from agentsynth_kernel import open_run_store

    return open_run_store(run_dir)  # refuses a non-empty directory that is not a run directory


def _check_resume(store: RunStore, meta: dict[str, Any]) -> None:
    """A run directory continues only the generation that made it (same generator, parameters, seed
    and pack content): item ids would otherwise name different work."""
    old = store.get_meta("synth")
    if old is None:
        if store.get_meta("spec") is not None or store.count():
            raise AgentsynthError(f"{store.run_dir}: holds a run of 'agentsynth run', not a generation; "
                                  "use a new --run-dir")
        return
    from agentsynth_kernel import spec_diff

    keys = ("generator", "params", "seed", "pack")
    before: dict[str, Any] = {k: old.get(k) for k in keys}
    after: dict[str, Any] = {k: meta.get(k) for k in keys}
    before["pack"] = {"content_hash": (before["pack"] or {}).get("content_hash")}
    after["pack"] = {"content_hash": after["pack"]["content_hash"]}
    diff = spec_diff(json.loads(json.dumps(before, default=str)), json.loads(json.dumps(after, default=str)))
    if diff:
        shown = "\n".join(f"  {line}" for line in diff)
        raise AgentsynthError(f"{store.run_dir}: this run directory holds a different generation:\n{shown}\n"
                              "use a new --run-dir (or the same parameters to continue it)")


async def synthesize(generator: SynthGenerator, ctx: SynthContext, *, run_dir: Path | None = None,
                     concurrency: int = 1, limit: int | None = None, params: dict[str, Any] | None = None,
                     on_progress: ProgressFn | None = None) -> SynthReport:
    """Run every planned item of ``generator`` depth-first (see the module docstring).

    ``on_progress(kind, data)`` is called with ``start`` / ``done`` / ``stopped`` (for progress bars).
    """
    started = time.perf_counter()
    items = generator.plan(ctx)
    if limit is not None:
        items = items[:limit]
    report = SynthReport(generator.name, len(items))
    store = _open_store(run_dir) if run_dir is not None else None
    done: set[str] = set()
    ctx.journal = Journal(None, generator.name)
    if store is not None:
        meta = {"generator": generator.name, "params": redact(params or {}), "seed": ctx.seed,
                "pack": {"id": ctx.pack.id, "source": ctx.pack.source, "content_hash": ctx.pack.content_hash},
                "makes_tasks": generator.makes_tasks}
        try:
            with store.transaction():
                _check_resume(store, meta)
                if store.get_meta("synth") is None:
                    store.set_meta("run_id", f"synth-{generator.name}-{ctx.seed}")
                    store.set_meta("created_at", time.time())
                store.set_meta("synth", meta)
                store.set_meta("planned", len(items))
                # what `agentsynth status RUN_DIR` shows (the generator stands where a run shows its policy)
                store.set_meta("pack", {"id": ctx.pack.id, "source": ctx.pack.source,
                                        "content_hash": ctx.pack.content_hash})
                store.set_meta("made_by", f"generator {generator.name}")
        except BaseException:
            store.close()
            raise
        events = store.events()
        for _, kind, data in events:
            if kind == "synth_item" and data.get("generator") == generator.name:
                done.add(data["item"])
                report.rejected.update(r["reason"] for r in data.get("rejected", []))
                report.requests += int(data.get("requests", 0))
        report.restored_items = len([i for i in items if i.id in done])
        steps = {(d["item"], d["key"]): d for _, kind, d in events
                 if kind == "synth_step" and d.get("generator") == generator.name and d.get("item") not in done}
        ctx.journal = Journal(store, generator.name, steps)
        report.accepted = [r for r in store.results()
                           if (r.trajectory and r.trajectory.metadata.get("synth", {}).get("item")) in done]
        store.event("synth_started", generator=generator.name, pending=len(items) - report.restored_items)
        store.event("run_started", pid=os.getpid(), host=socket.gethostname(), generator=generator.name)
    from agentsynth_kernel import LLMError  # the kernel's LLM client, not imported to register the plugin

    pending = [i for i in items if i.id not in done]
    queue: asyncio.Queue[Item] = asyncio.Queue()
    for item in pending:
        queue.put_nowait(item)

    async def worker() -> None:
        while not report.stopped:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if on_progress is not None:
                on_progress("start", {"item": item.id})
            meter = Meter()
            try:
                outcome = await generator.make(ctx, item, meter)
            except BudgetExceeded as exc:
                # not recorded: the item is incomplete, a rerun with a larger budget does it again
                report.stopped = report.stopped or f"budget: {exc}"
                if store is not None:
                    store.event("budget_stop", item=item.id, error=str(exc))
                if on_progress is not None:
                    on_progress("stopped", {"item": item.id, "reason": report.stopped})
                return
            except (ItemIncomplete, LLMError) as exc:
                # not recorded either: the provider failed, a rerun tries the item again
                report.incomplete += 1
                report.errors.append(f"{item.id}: provider: {exc}")
                if store is not None:
                    store.event("synth_incomplete", item=item.id, error=str(exc))
                if on_progress is not None:
                    on_progress("incomplete", {"item": item.id})
                continue
            except AgentsynthError as exc:
                outcome = Outcome().reject("error", str(exc))
                report.errors.append(f"{item.id}: {exc}")
            except Exception as exc:  # a generator bug on one item must not lose the others
                outcome = Outcome().reject("error", f"{type(exc).__name__}: {exc}")
                report.errors.append(f"{item.id}: {type(exc).__name__}: {exc}")
            results = [to_result(a, generator=generator.name, item=item, meter=meter) for a in outcome.accepted]
            event = {"generator": generator.name, "item": item.id, "accepted": [r.task_id for r in results],
                     "rejected": outcome.rejected, "requests": meter.requests}
            report.done_items += 1
            report.accepted.extend(results)
            report.rejected.update(r["reason"] for r in outcome.rejected)
            report.requests += meter.requests
            if store is not None:
                with store.transaction():
                    for result in results:
                        store.put(result)
                    store.event("synth_item", **event)
                    store.set_meta("status_lines", report.status_lines())
            report.usage = report.usage + meter.usage
            report.per_item.append(event)
            if on_progress is not None:
                on_progress("done", {**event, "report": report})

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(pending) or 1)))))
    finally:
        report.duration_s = time.perf_counter() - started
        report.restored_steps = ctx.journal.restored
        if store is not None:
            store.event("synth_finished", stopped=report.stopped, **{k: v for k, v in report.to_dict().items()
                                                                     if k in ("accepted", "llm_requests")})
            store.event("run_finished", stopped=report.stopped, episodes=len(report.accepted), interrupted=False)
            store.close()
    report.accepted.sort(key=lambda r: (r.task_id, r.trial))
    return report


# --- writing the output ----------------------------------------------------------------------------


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


def outside_paths(value: Any, base_dir: Path, where: str) -> list[str]:
    """Strings in an environment override (an LLM wrote it) that name an existing file or directory
    outside ``base_dir``: absolute, or escaping with ``..``. A world must not be built from, and a
    written pack must not copy, a file of the host outside the pack."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in outside_paths(v, base_dir, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in outside_paths(v, base_dir, f"{where}[{i}]")]
    if not isinstance(value, str) or not value or "\n" in value or len(value) > 1000:
        return []
    path = Path(value.strip())
    if not (path.is_absolute() or ".." in path.parts):
        return []
    candidate = path if path.is_absolute() else base_dir / path
    try:
        exists = candidate.exists()
    except (OSError, ValueError):
        return []
    if exists and not _inside(candidate, base_dir):
        return [f"{where}: names a path outside the pack directory ({value!r}); a task may only use the "
                "pack's own files"]
    return []


def _copy_env_files(params: dict[str, Any], src: Path, dst: Path) -> None:
    """Copy the pack files an environment names (relative paths inside ``src`` only, to inside ``dst``)."""
    import shutil

    for value in params.values():
        if isinstance(value, str) and value and "\n" not in value and len(value) < 300:
            candidate = src / value
            target = dst / value
            try:
                if (not Path(value).is_absolute() and candidate.is_file() and _inside(candidate, src)
                        and _inside(target, dst)):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(candidate, target)
            except OSError:
                continue


def write_pack(results: Sequence[EpisodeResult], source: Pack, directory: Path, *, pack_id: str | None = None,
               description: str = "") -> Path:
    """Write accepted new tasks as a pack (pack.yaml + oracle.py, the source pack's environment and the
    files it names) that ``agentsynth pack validate`` can check. Returns the pack.yaml path."""
    import pprint

    import yaml

    tasks, oracle = [], {}
    seen: set[str] = set()
    for result in sorted(results, key=lambda r: r.task_id):
        synth = (result.trajectory.metadata.get("synth") if result.trajectory else None) or {}
        if not synth.get("new_task") or "task" not in synth:
            continue
        # two items that produced the same request (e.g. the same chain) give one task
        text = " ".join(str(synth["task"].get("instruction", "")).lower().split())
        if text in seen:
            continue
        seen.add(text)
        tasks.append(synth["task"])
        oracle[result.task_id] = synth["oracle"]
    if not tasks:
        raise AgentsynthError("no accepted tasks to write as a pack")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"id": pack_id or directory.name,
                            "description": description or f"Synthesised from pack {source.id!r} by agentsynth-synth"}
    if source.system_prompt:
        data["system_prompt"] = source.system_prompt
    if source.environment is not None:
        data["environment"] = source.environment.to_dict()
        _copy_env_files(source.environment.params, source.base_dir, directory)
    for task in tasks:
        _copy_env_files(task.get("environment", {}), source.base_dir, directory)
    if source.checkers:
        data["checkers"] = [c.to_dict() for c in source.checkers]
    data["oracle"] = "oracle.py"
    data["tasks"] = tasks
    path = directory / "pack.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")
    (directory / "oracle.py").write_text(
        '"""Oracle of a synthesised pack: the verified actions of every task (written by agentsynth-synth)."""\n\n'
        f"ORACLE = {pprint.pformat(oracle, width=110, sort_dicts=False)}\n", encoding="utf-8")
    return path


def write_jsonl(results: Sequence[EpisodeResult], path: Path) -> int:
    from agentsynth_kernel import write_jsonl as _write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fp:
        return _write(results, fp)


__all__ = [
    "Accepted", "Item", "ItemIncomplete", "Journal", "LLMSettings", "Meter", "Outcome", "SynthContext", "SynthGenerator",
    "SynthReport",
    "action_dicts", "derive_seed", "outside_paths", "parse_json_object", "synthesize", "task_record", "why_failed", "write_jsonl",
    "write_pack",
]
