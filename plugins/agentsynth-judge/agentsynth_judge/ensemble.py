"""The ``ensemble`` judge: several judges (e.g. different models) aggregated, with agreement stats.

Aggregation (``aggregate:``):

- ``mean`` / ``median``: the overall score and every dimension are the mean / median of
  the judges'; the ensemble passes when that score reaches ``pass_threshold`` (default:
  the first judge's rubric threshold), unless the judges are unanimous, in which case
  their common verdict stands;
- ``majority``: the ensemble passes when more than half of the judges pass (a tie fails);
  the score is the mean score and dimensions are medians.

Agreement is stored with the scores: ``agreement`` (the fraction of judges whose
pass/fail matches the ensemble's) and ``score_std`` / ``score_range`` of the judges'
overall scores. Each judge's score and vote are kept in ``trajectory.metadata["judge"]["judges"]``
(``agentsynth judge calibrate`` reads them to report per-judge accuracy and inter-judge
agreement). A judge that raises is left out (and named in the rationale); if all of them
fail, the ensemble raises.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import (
    ComponentSpec,
    InvalidValue,
    JudgeResult,
    Trajectory,
    Usage,
    Verdict,
    build,
    call,
    check_component,
    did_you_mean,
    get_host,
)

from .base import annotate
from .reward import DEFAULT_WEIGHTS, RewardWeights, compute_reward

AGGREGATES = ("mean", "median", "majority")
_META = ("reward", "passed", "agreement", "score_std", "score_range")


def _label(judge: Any, index: int) -> str:
    info = getattr(judge, "__agentsynth_info__", None)
    name = info["name"] if isinstance(info, dict) else getattr(judge, "kind", type(judge).__name__)
    model = getattr(judge, "model", None)
    return f"judge[{index}] {name}" + (f" ({model})" if model else "")


class EnsembleJudge:
    """Aggregates several judges' results; ``score`` is async (sub-judges may be LLM judges)."""

    kind = "ensemble"

    def __init__(
        self,
        judges: Sequence[Any],
        aggregate: str = "mean",
        pass_threshold: float | None = None,
        reward: RewardWeights | None = DEFAULT_WEIGHTS,
        labels: Sequence[str] | None = None,
    ) -> None:
        if not judges:
            raise ValueError("an ensemble needs at least one judge")
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate: expected one of {', '.join(AGGREGATES)}, got {aggregate!r}")
        self.judges = list(judges)
        self.aggregate = aggregate
        if pass_threshold is None:
            rubric = getattr(self.judges[0], "rubric", None)
            pass_threshold = rubric.pass_threshold if rubric is not None else 0.7
        self.pass_threshold = float(pass_threshold)
        self.reward_weights = reward
        self.labels = list(labels) if labels else [_label(j, i) for i, j in enumerate(self.judges)]

    async def score(self, trajectory: Trajectory, verdicts: list[Verdict]) -> JudgeResult:
        outcomes = await asyncio.gather(
            *(call(j.score, trajectory, verdicts) for j in self.judges), return_exceptions=True
        )
        results: list[tuple[str, JudgeResult]] = []
        failures: list[str] = []
        for label, outcome in zip(self.labels, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, asyncio.CancelledError | KeyboardInterrupt):
                    raise outcome
                failures.append(f"{label} failed: {type(outcome).__name__}: {outcome}")
            else:
                results.append((label, outcome))
        if not results:
            raise RuntimeError("every judge of the ensemble failed: " + "; ".join(failures))
        members = [{"judge": label, "score": r.score, "passed": self._passed(r)} for label, r in results]
        members += [{"judge": label, "error": True} for label, o in zip(self.labels, outcomes, strict=True)
                    if isinstance(o, BaseException)]
        return annotate(trajectory, self, self.combine(results, verdicts, failures), judges=members)

    def combine(
        self, results: Sequence[tuple[str, JudgeResult]], verdicts: Sequence[Verdict], failures: Sequence[str] = ()
    ) -> JudgeResult:
        """Aggregate already computed results (also usable on stored scores)."""
        scores = [float(r.score) for _, r in results]
        votes = [self._passed(r) for _, r in results]
        if self.aggregate == "median":
            score = statistics.median(scores)
        else:
            score = statistics.fmean(scores)
        if self.aggregate == "majority":
            passed = sum(votes) * 2 > len(votes)
        elif all(votes) or not any(votes):
            passed = votes[0]  # unanimous judges are not overruled by an averaged score
        else:
            passed = score >= self.pass_threshold
        center = statistics.fmean if self.aggregate == "mean" else statistics.median
        names: list[str] = []
        for _, r in results:
            names += [k for k in r.dimensions if k not in _META and k not in names]
        dimensions: dict[str, float] = {}
        for name in names:
            values = [float(r.dimensions[name]) for _, r in results if name in r.dimensions]
            dimensions[name] = round(center(values), 4)
        dimensions["agreement"] = round(sum(v == passed for v in votes) / len(votes), 4)
        dimensions["score_std"] = round(statistics.pstdev(scores), 4)
        dimensions["score_range"] = round(max(scores) - min(scores), 4)
        if self.reward_weights is not None:
            dimensions["reward"] = compute_reward(verdicts, score, self.reward_weights).reward
        dimensions["passed"] = 1.0 if passed else 0.0
        usage: Usage | None = None
        for _, r in results:
            if r.usage is not None:
                usage = r.usage if usage is None else usage + r.usage
        lines = [
            f"ensemble ({self.aggregate} of {len(results)}): {score:.2f} {'pass' if passed else 'fail'}, "
            f"agreement {dimensions['agreement']:.2f}"
        ]
        for label, r in results:
            first = (r.rationale or "").strip().splitlines()[:1]
            lines.append(f"{label}: {r.score:.2f} {'pass' if self._passed(r) else 'fail'}"
                         + (f" - {first[0]}" if first else ""))
        lines += list(failures)
        return JudgeResult(round(score, 4), dimensions, "\n".join(lines), passed, usage)

    def _passed(self, result: JudgeResult) -> bool:
        if result.passed is not None:
            return bool(result.passed)
        return result.score >= self.pass_threshold


# --- spec ------------------------------------------------------------------------------------------


def _aggregate_validator(instance: Any, attribute: Any, value: str) -> None:
    if value not in AGGREGATES:
        raise InvalidValue(f"aggregate: expected one of {', '.join(AGGREGATES)}, got {value!r}{did_you_mean(value, AGGREGATES)}")


def _judges_validator(instance: Any, attribute: Any, value: list[ComponentSpec]) -> None:
    if not value:
        raise InvalidValue("judges: an ensemble needs at least one judge")
    host = get_host()
    problems: list[str] = []
    for i, cspec in enumerate(value):
        problems += check_component("judge", cspec, f"judges[{i}]", host)
    if problems:
        raise InvalidValue("; ".join(problems))


def _threshold_validator(instance: Any, attribute: Any, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise InvalidValue(f"pass_threshold: must be between 0 and 1, got {value:g}")


@attrs.frozen
class EnsembleSpec:
    """``judge: {type: ensemble, judges: [...], aggregate: mean}`` parameters."""

    judges: list[ComponentSpec] = attrs.field(validator=_judges_validator)
    aggregate: str = attrs.field(default="mean", validator=_aggregate_validator)
    pass_threshold: float | None = attrs.field(default=None, validator=_threshold_validator)
    reward: RewardWeights | None = attrs.field(factory=RewardWeights)


def make_ensemble(
    spec: EnsembleSpec, base_dir: Path | None = None, task: Any = None, pack: Any = None, run: Any = None
) -> EnsembleJudge:
    context: Mapping[str, Any] = {"base_dir": base_dir, "task": task, "pack": pack, "run": run}
    judges = [build("judge", cspec, **context) for cspec in spec.judges]
    return EnsembleJudge(judges, spec.aggregate, spec.pass_threshold, spec.reward)
