"""Calibration: how far to trust a judge, measured against the world-state verdicts of a run.

Every passed/failed episode of a run directory is a labelled example: the checkers
read the world's end state, so ``status == "passed"`` is the truth. The judge scores
each stored trajectory *blind* (without the verdicts, which would give the answer
away) and we compare its pass/fail with the truth: accuracy, Cohen's kappa, the
confusion matrix, precision / recall and the rank AUC of its scores.

``stored=True`` instead uses the scores the run's own judge stored per episode
(``judge.passed``, or ``judge`` >= threshold); those were computed *with* the verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import STORE_FILE, AgentsynthError, EpisodeResult, RunStore, call

from .agreement import Confusion, agreement_stats, rank_auc
from .base import METADATA_KEY


@attrs.define
class EpisodeJudgement:
    task_id: str
    trial: int
    world_passed: bool
    judge_passed: bool
    judge_score: float


@attrs.define
class Calibration:
    """Agreement of a judge's pass/fail with the world's verdicts over a run."""

    confusion: Confusion
    judge: str
    skipped: int = 0  # episodes with status "error" (no world verdict) or no trajectory
    auc: float | None = None
    mean_score_passed: float | None = None
    mean_score_failed: float | None = None
    episodes: list[EpisodeJudgement] = attrs.field(factory=list)
    members: list[dict[str, Any]] = attrs.field(factory=list)  # ensembles: each judge against the world
    agreement: dict[str, Any] | None = None  # ensembles: how much the judges agree with each other

    @property
    def n(self) -> int:
        return self.confusion.n

    @property
    def accuracy(self) -> float:
        return self.confusion.accuracy

    @property
    def kappa(self) -> float | None:
        return self.confusion.kappa

    def to_dict(self, *, episodes: bool = False) -> dict[str, Any]:
        c = self.confusion
        out: dict[str, Any] = {
            "judge": self.judge,
            "n": c.n,
            "skipped": self.skipped,
            "accuracy": _round(c.accuracy),
            "kappa": _round(c.kappa),
            "precision": _round(c.precision),
            "recall": _round(c.recall),
            "auc": _round(self.auc),
            "judge_pass_rate": _round((c.tp + c.fp) / c.n if c.n else None),
            "world_pass_rate": _round((c.tp + c.fn) / c.n if c.n else None),
            "mean_score_world_passed": _round(self.mean_score_passed),
            "mean_score_world_failed": _round(self.mean_score_failed),
            "confusion": {"tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn},
            "confusion_matrix": c.matrix(),
        }
        if self.members:
            out["judges"] = self.members
            out["agreement"] = self.agreement
        if episodes:
            out["episodes"] = [attrs.asdict(e) for e in self.episodes]
        return out


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize(
    judgements: Sequence[EpisodeJudgement],
    *,
    judge: str,
    skipped: int = 0,
    members: Sequence[Sequence[dict[str, Any]]] = (),
) -> Calibration:
    """Judge vs world over ``judgements``; ``members`` (one list per judgement, for ensembles) adds
    per-judge accuracy / kappa and inter-judge agreement."""
    confusion = Confusion.of([(j.judge_passed, j.world_passed) for j in judgements])
    scores = [j.judge_score for j in judgements]
    labels = [j.world_passed for j in judgements]
    cal = Calibration(
        confusion, judge, skipped, rank_auc(scores, labels),
        _mean([j.judge_score for j in judgements if j.world_passed]),
        _mean([j.judge_score for j in judgements if not j.world_passed]),
        list(judgements),
    )
    names = [m["judge"] for m in members[0]] if members else []
    complete = [
        (j, {m["judge"]: m for m in ms}) for j, ms in zip(judgements, members, strict=True)
        if all(name in {m["judge"] for m in ms if not m.get("error")} for name in names)
    ] if members else []
    if complete:
        votes = [[row[name]["passed"] for name in names] for _, row in complete]
        for i, name in enumerate(names):
            c = Confusion.of([(v[i], j.world_passed) for (j, _), v in zip(complete, votes, strict=True)])
            cal.members.append({"judge": name, "n": c.n, "accuracy": _round(c.accuracy), "kappa": _round(c.kappa)})
        cal.agreement = agreement_stats(votes, names)
    return cal


async def calibrate_results(
    results: Iterable[EpisodeResult],
    judge: Any = None,
    *,
    judge_name: str = "",
    with_verdicts: bool = False,
    stored: bool = False,
    threshold: float | None = None,
) -> Calibration:
    """Calibrate ``judge`` (or the stored judge scores) on episodes with known outcomes."""
    judgements: list[EpisodeJudgement] = []
    members: list[list[dict[str, Any]]] = []
    skipped = 0
    for r in results:
        if r.status not in ("passed", "failed") or r.trajectory is None:
            skipped += 1
            continue
        if stored:
            if "judge" not in r.scores:
                skipped += 1
                continue
            score = float(r.scores["judge"])
            if threshold is not None:
                passed = score >= threshold
            elif "judge.passed" in r.scores:
                passed = r.scores["judge.passed"] >= 0.5
            else:
                passed = score >= 0.7
        else:
            r.trajectory.metadata.pop(METADATA_KEY, None)  # only this judge's own notes count below
            res = await call(judge.score, r.trajectory, list(r.verdicts) if with_verdicts else [])
            score = float(res.score)
            if threshold is not None:
                passed = score >= threshold
            elif res.passed is not None:
                passed = bool(res.passed)
            else:
                passed = score >= 0.7
        judgements.append(EpisodeJudgement(r.task_id, r.trial, r.passed, passed, round(score, 4)))
        note = r.trajectory.metadata.get(METADATA_KEY)
        members.append(list(note.get("judges") or []) if isinstance(note, dict) else [])
    name = judge_name or ("stored" if stored else getattr(judge, "kind", type(judge).__name__))
    has_members = bool(members) and all(members)
    return summarize(judgements, judge=name, skipped=skipped, members=members if has_members else ())


def read_run(run_dir: Path) -> tuple[list[EpisodeResult], dict[str, Any]]:
    """The stored episodes and the run spec of a run directory."""
    run_dir = Path(run_dir)
    if not (run_dir / STORE_FILE).is_file():
        raise AgentsynthError(f"{run_dir}: not a run directory (no {STORE_FILE})")
    store = RunStore(run_dir)
    try:
        results = list(store.results())
        spec = store.get_meta("spec") or {}
    finally:
        store.close()
    return results, spec
