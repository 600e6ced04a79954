"""``replay_filter``: reject sampling of stored trajectories by sandbox replay (no LLM).

Input: trajectories of the pack's tasks, from a run directory (its store) or a JSONL file of
EpisodeResults or Trajectories. A trajectory is dropped, with the first reason that applies:

- ``unknown_task``: its task is not in the pack;
- ``unknown_tool``: it calls a tool the environment does not offer;
- ``invalid_arguments``: arguments that do not fit the tool's JSON Schema;
- ``syntax_error``: a call whose result reports a syntax error (``syntax_patterns``);
- ``empty_loop``: the same call repeated ``loop_repeats`` times in a row with an empty or error result;
- ``replay_error`` / ``replay_mismatch``: replayed in a fresh world with the recorded seed, the world
  fails, or a call's result differs from the recorded observation;
- ``replay_failed``: the replayed end state fails the task's checkers (``require_pass``).

Kept trajectories are written unchanged (plus ``metadata["synth"]``); the report counts each reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import (
    AgentsynthError,
    EpisodeResult,
    InvalidValue,
    ToolCall,
    Trajectory,
    from_json,
    validate_arguments,
)

from .core import Accepted, Item, Meter, Outcome, SynthContext

DEFAULT_SYNTAX = [r"syntax error", r"SyntaxError", r"parse error", r"malformed"]


@attrs.frozen
class ReplayFilterSpec:
    """Parameters of ``replay_filter``: ``input`` is a run directory or a JSONL file."""

    input: str
    only_passed: bool = False
    require_pass: bool = True
    loop_repeats: int = 3
    syntax_patterns: list[str] = attrs.field(factory=lambda: list(DEFAULT_SYNTAX))
    check_replay: bool = True

    def __attrs_post_init__(self) -> None:
        if self.loop_repeats < 2:
            raise InvalidValue(f"loop_repeats: must be at least 2, got {self.loop_repeats}")
        for i, pattern in enumerate(self.syntax_patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise InvalidValue(f"syntax_patterns[{i}]: not a regular expression: {exc}") from None


def read_results(source: str | Path) -> list[EpisodeResult]:
    """EpisodeResults from a run directory, or from a JSONL file of EpisodeResults / Trajectories."""
    path = Path(source)
    if path.is_dir():
        from agentsynth_kernel import RunStore

        store = RunStore(path, create=False)
        try:
            return list(store.results())
        finally:
            store.close()
    if not path.is_file():
        raise AgentsynthError(f"{path}: no such run directory or JSONL file")
    out = []
    with open(path, "rb") as fp:
        for lineno, line in enumerate(fp, 1):
            if not line.strip():
                continue
            try:
                if b'"trial"' in line and b'"status"' in line:
                    out.append(from_json(line, EpisodeResult))
                else:
                    traj = from_json(line, Trajectory)
                    out.append(EpisodeResult(traj.task_id, 0, int(traj.metadata.get("seed", 0) or 0), "unverified",
                                             trajectory=traj))
            except Exception as exc:
                raise AgentsynthError(f"{path}:{lineno}: not an EpisodeResult or Trajectory: {exc}") from None
    return out


class ReplayFilter:
    name = "replay_filter"
    makes_tasks = False

    def __init__(self, spec: ReplayFilterSpec, base_dir: Path | None = None) -> None:
        self.spec = spec
        path = Path(spec.input)
        if not path.is_absolute() and base_dir is not None and not path.exists():
            path = base_dir / path
        self.path = path
        self.syntax = [re.compile(p, re.IGNORECASE) for p in spec.syntax_patterns]

    def plan(self, ctx: SynthContext) -> list[Item]:
        items = []
        for r in read_results(self.path):
            if r.trajectory is None or (self.spec.only_passed and not r.passed):
                continue
            items.append(Item(f"{r.task_id}#{r.trial}#{r.seed}", r.seed, r))
        return items

    def static_reason(self, traj: Trajectory, tools: dict[str, Any]) -> tuple[str, str] | None:
        calls = [(i, s, s.action) for i, s in enumerate(traj.steps) if isinstance(s.action, ToolCall)]
        for i, _step, action in calls:
            if action.name not in tools:
                return "unknown_tool", f"step {i}: {action.name!r} is not a tool of this environment"
        for i, step, action in calls:
            if step.invalid:
                return "invalid_arguments", f"step {i}: recorded as an invalid call"
            problems = validate_arguments(tools[action.name].parameters, action.arguments)
            if problems:
                return "invalid_arguments", f"step {i}: {'; '.join(problems)}"
        for i, step, _ in calls:
            obs = step.observation
            if obs is not None and obs.error and any(p.search(obs.content) for p in self.syntax):
                return "syntax_error", f"step {i}: {obs.content[:200]}"
        run, last = 0, None
        for i, step, action in calls:
            obs = step.observation
            empty = obs is None or obs.error or not obs.content.strip()
            key = (action.name, repr(sorted(action.arguments.items())))
            run = run + 1 if empty and key == last else (1 if empty else 0)
            last = key if empty else None
            if run >= self.spec.loop_repeats:
                return "empty_loop", f"step {i}: {action.name} repeated {run} times with empty results"
        return None

    async def make(self, ctx: SynthContext, item: Item, meter: Meter) -> Outcome:
        result: EpisodeResult = item.payload
        out = Outcome()
        tasks = {t.id: t for t in ctx.pack.tasks}
        task = tasks.get(result.task_id)
        traj = result.trajectory
        assert traj is not None
        if task is None:
            return out.reject("unknown_task", f"task {result.task_id!r} is not in pack {ctx.pack.id!r}")
        _, world_tools = await ctx.world()
        tools = {t.name: t for t in world_tools}
        static = self.static_reason(traj, tools)
        if static is not None:
            return out.reject(*static)
        verdicts = list(result.verdicts)
        if self.spec.check_replay:
            replay = await ctx.replay(task, traj, seed=result.seed)
            if replay.status == "error":
                return out.reject("replay_error", replay.error)
            if replay.drift:
                i = replay.drift[0]
                return out.reject("replay_mismatch", f"{len(replay.drift)} step(s) differ on replay, first: step {i}")
            if self.spec.require_pass and replay.status != "passed":
                detail = "; ".join(f"{v.checker}: {v.detail}" for v in replay.verdicts if not v.passed)
                return out.reject("replay_failed", detail)
            verdicts = replay.verdicts
        traj.metadata["synth"] = {"decision": "kept", "why": ["valid calls", "replay reproduces every observation"
                                                              if self.spec.check_replay else "static checks only"]}
        out.accepted.append(Accepted(task, traj, verdicts, new_task=False, seed=result.seed, trial=result.trial,
                                     scores=dict(result.scores), usage=result.usage))
        return out
