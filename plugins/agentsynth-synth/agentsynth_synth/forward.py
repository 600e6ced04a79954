"""``forward``: several teacher policies roll out every task in the real world; verified rollouts are kept.

For each task (one item), every teacher plays ``rollouts`` episodes. A rollout is kept when

1. the task's world-state checkers pass (``failed_checkers`` / ``error`` otherwise);
2. its end state agrees with the majority of passing rollouts (``no_consensus``), compared by a
   fingerprint of the world (see :class:`~agentsynth_synth.checkers.Fingerprint`);
3. its judge score, when a ``judge`` is given, is at least ``min_judge`` (``judge_below_threshold``;
   ``judge_error`` when the judge failed on it);
4. ``select: best`` keeps only the best rollout per task (judge score, then fewest steps;
   ``not_selected`` for the others); ``select: all`` keeps every rollout that got this far.

Why each rollout was kept or rejected is recorded (``trajectory.metadata["synth"]["decision"]``
for kept ones, the item's ``synth_item`` event for the others).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import attrs

from agentsynth_kernel import ComponentSpec, Task

from .core import Accepted, Item, Meter, Outcome, SynthContext, derive_seed, why_failed


@attrs.frozen
class ForwardSpec:
    """Parameters of the ``forward`` generator."""

    teachers: list[dict[str, Any]]
    rollouts: int = 1
    judge: dict[str, Any] | None = None
    min_judge: float = 0.0
    consensus: bool = True
    select: str = "all"
    split: str = "all"
    only: list[str] = attrs.field(factory=list)
    probes: list[dict[str, Any]] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        from agentsynth_kernel import InvalidValue

        if not self.teachers:
            raise InvalidValue("teachers: give at least one policy, e.g. [{type: llm, model: ...}]")
        for i, t in enumerate(self.teachers):
            if not isinstance(t, dict) or not isinstance(t.get("type"), str):
                raise InvalidValue(f"teachers[{i}]: expected a policy spec with 'type:'")
        if self.select not in ("all", "best"):
            raise InvalidValue(f"select: expected all or best, got {self.select!r}")
        if self.rollouts < 1:
            raise InvalidValue(f"rollouts: must be at least 1, got {self.rollouts}")


def _cspec(data: dict[str, Any]) -> ComponentSpec:
    return ComponentSpec(data["type"], {k: v for k, v in data.items() if k != "type"})


class Forward:
    name = "forward"
    makes_tasks = False

    def __init__(self, spec: ForwardSpec) -> None:
        self.spec = spec

    def plan(self, ctx: SynthContext) -> list[Item]:
        s = self.spec
        tasks = [t for t in ctx.pack.tasks if s.split == "all" or t.split == s.split]
        if s.only:
            tasks = [t for t in tasks if t.id in set(s.only)]
        return [Item(t.id, derive_seed(ctx.seed, "forward", t.id), t) for t in tasks]

    async def make(self, ctx: SynthContext, item: Item, meter: Meter) -> Outcome:
        s = self.spec
        task: Task = item.payload
        fingerprinted = s.consensus and len(s.teachers) * s.rollouts > 1
        extra = [ComponentSpec("synth_fingerprint", {"probes": s.probes} if s.probes else {})] if fingerprinted else []
        probe = attrs.evolve(task, checkers=[*task.checkers, *extra])
        judge = _cspec(s.judge) if s.judge else None
        plays = [(ti, r) for ti in range(len(s.teachers)) for r in range(s.rollouts)]

        async def play(ti: int, r: int) -> Any:
            k = ti * s.rollouts + r
            return await ctx.episode(probe, _cspec(s.teachers[ti]), seed=derive_seed(item.seed, ti, r), trial=k,
                                     meter=meter, judge=judge)

        results = await asyncio.gather(*(play(ti, r) for ti, r in plays))
        outcome = Outcome()
        passing = []
        for (ti, r), result in zip(plays, results, strict=True):
            teacher = s.teachers[ti]
            label = {"teacher": ti, "rollout": r, "policy": teacher.get("model", teacher["type"])}
            if result.status == "error":
                outcome.reject(f"error:{result.error_kind}", why_failed(result), **label)
            elif not result.passed:
                outcome.reject("failed_checkers", why_failed(result), **label)
            else:
                passing.append((label, result))
        fingerprint = {id(res): next((v.data for v in res.verdicts if v.checker == "synth_fingerprint"), None)
                       for _, res in passing}
        majority = None
        if s.consensus and len(passing) > 1:
            counts = Counter(fingerprint[id(res)] for _, res in passing if fingerprint[id(res)] is not None)
            if counts:
                top = counts.most_common()
                if len(top) == 1 or top[0][1] > top[1][1]:
                    majority = top[0][0]
                else:  # a tie: no majority, keep the end state of the first teacher's first pass
                    majority = fingerprint[id(passing[0][1])]
        kept = []
        for label, res in passing:
            fp = fingerprint[id(res)]
            if majority is not None and fp is not None and fp != majority:
                outcome.reject("no_consensus", f"end state {fp} differs from the majority {majority}", **label)
                continue
            score = res.scores.get("judge")
            judge_error = getattr(res, "judge_error", "")
            if judge is not None and judge_error:
                outcome.reject("judge_error", judge_error, **label)
                continue
            if judge is not None and (score is None or score < s.min_judge):
                outcome.reject("judge_below_threshold", f"judge score {score} < {s.min_judge}", **label)
                continue
            kept.append((label, res))
        if s.select == "best" and len(kept) > 1:
            kept.sort(key=lambda lr: (-(lr[1].scores.get("judge") or 0.0), len(lr[1].trajectory.steps), lr[1].trial))
            for label, _ in kept[1:]:
                outcome.reject("not_selected", "select: best kept a better rollout", **label)
            kept = kept[:1]
        for label, res in kept:
            res.verdicts = [v for v in res.verdicts if v.checker != "synth_fingerprint"]
            why = ["checkers passed"]
            if majority is not None:
                agree = sum(1 for _, other in passing if fingerprint[id(other)] == majority)
                why.append(f"end state agrees with {agree}/{len(passing)} passing rollouts")
            if judge is not None:
                why.append(f"judge {res.scores.get('judge'):.3f} >= {s.min_judge}")
            traj = res.trajectory
            traj.metadata["synth"] = {"decision": "kept", "why": why, **label, "fingerprint": fingerprint[id(res)]}
            outcome.accepted.append(Accepted(task, traj, res.verdicts, new_task=False, seed=res.seed, trial=res.trial,
                                             scores=res.scores, usage=res.usage))
        return outcome
