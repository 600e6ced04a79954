"""What every rubric judge shares: the rubric, the reward, and turning scores into a JudgeResult."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentsynth_kernel import InvalidValue, JudgeResult, SpecError, Trajectory, Usage, Verdict, to_builtins

from .reward import DEFAULT_WEIGHTS, RewardWeights, compute_reward
from .rubric import Rubric, load_rubric


class RubricJudge:
    """Base class: scores per rubric dimension in [0, 1] -> weighted score, pass/fail and reward.

    The JudgeResult's ``dimensions`` hold every rubric dimension, plus ``reward``
    (the terminal reward, unless ``reward`` is None) and ``passed`` (1.0 / 0.0), so
    the run store keeps them per episode as ``judge.<dimension>`` scores.
    """

    kind = "rubric"

    def __init__(
        self,
        rubric: Rubric | Mapping[str, Any] | str | Path | None = None,
        reward: RewardWeights | None = DEFAULT_WEIGHTS,
        base_dir: Path | None = None,
    ) -> None:
        self.rubric = load_rubric(rubric, base_dir=base_dir)
        self.reward_weights = reward

    def finish(
        self,
        scores: Mapping[str, float],
        notes: Mapping[str, str],
        verdicts: Sequence[Verdict],
        *,
        summary: str = "",
        usage: Usage | None = None,
        extra: Mapping[str, float] | None = None,
        overall: float | None = None,
        veto: str = "",
    ) -> JudgeResult:
        dims = {name: round(max(0.0, min(1.0, float(scores[name]))), 4) for name in self.rubric.names}
        score = round(self.rubric.combine(dims) if overall is None else max(0.0, min(1.0, overall)), 4)
        passed = score >= self.rubric.pass_threshold and not veto
        dimensions: dict[str, float] = dict(dims)
        dimensions.update(extra or {})
        if self.reward_weights is not None:
            dimensions["reward"] = compute_reward(verdicts, score, self.reward_weights).reward
        dimensions["passed"] = 1.0 if passed else 0.0
        lines = [summary] if summary else []
        if veto and score >= self.rubric.pass_threshold:
            lines.append(f"fails despite the score: {veto}")
        lines += [f"{name} {dims[name]:.2f}: {notes.get(name, '')}".rstrip(": ") for name in self.rubric.names]
        return JudgeResult(score=score, dimensions=dimensions, rationale="\n".join(lines), passed=passed, usage=usage)


METADATA_KEY = "judge"


def annotate(trajectory: Trajectory, judge: Any, result: JudgeResult, **extra: Any) -> JudgeResult:
    """Record the judgement in ``trajectory.metadata["judge"]`` (kind, model, score, pass, rationale,
    usage), so the rationale reaches the run store and exports with the trajectory: the engine
    itself stores only the scores. Returns ``result``."""
    record: dict[str, Any] = {"kind": getattr(judge, "kind", type(judge).__name__), "score": result.score,
                              "passed": result.passed, "rationale": result.rationale}
    model = getattr(judge, "model", None)
    if model:
        record["model"] = model
    if result.usage is not None:
        record["usage"] = to_builtins(result.usage)
    record.update(extra)
    trajectory.metadata[METADATA_KEY] = record
    return result


def rubric_param(value: Any) -> Any:
    """Validate an inline rubric (or a rubric file reachable from here) while a spec is being loaded,
    so a bad rubric is a spec error before the run starts, not an error in every episode."""
    if value is None or isinstance(value, Rubric):
        return value
    if isinstance(value, Mapping) or (isinstance(value, str) and (value == "default" or Path(value).is_file())):
        try:
            load_rubric(value)
        except SpecError as exc:
            where = "" if isinstance(value, Mapping) else f"{exc.source}: "
            raise InvalidValue(where + "; ".join(exc.messages)) from None
        return value
    if not isinstance(value, str):
        raise InvalidValue(f"rubric: expected a file name or a mapping, got {type(value).__name__}")
    return value  # a relative path resolved later against the pack's directory


def score_sync(judge: Any, trajectory: Trajectory, verdicts: Sequence[Verdict] = ()) -> JudgeResult:
    """Call ``judge.score`` from plain (non-async) code, whether the judge is sync or async."""
    result = judge.score(trajectory, list(verdicts))
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


async def _await(awaitable: Any) -> Any:
    return await awaitable
