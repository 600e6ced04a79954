"""Confidence routing: a learned verifier decides the confident items, the real judge the rest.

An item whose calibrated P(pass) is at least ``accept_above`` is accepted, one at most
``drop_below`` is dropped, and the borderline band in between goes to the judge. So does every
item the verifier finds out of its training distribution (:meth:`Verifier.novelty`), and every
confident pass that looks like no passed training example (or fail like no failed one): a
probability extrapolated from features the verifier never saw is not a confident one (``ood:
trust`` turns that off). What routing saves is judge calls; what it may cost is agreement, which
:func:`route_results` measures where a reference exists: the world's verdict of an episode, and,
with ``compare``, the judge's decision on every item (that spends the calls routing saves: it is
for choosing thresholds, e.g. in the benchmark).

The same as judges in a run spec: ``{type: learned, path: verifier.zip}`` (the verifier alone)
and ``{type: routed, verifier: verifier.zip, judge: {...}, accept_above: .9, drop_below: .1}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import (
    BudgetExceeded,
    ComponentSpec,
    InvalidValue,
    JudgeResult,
    Trajectory,
    Verdict,
    build,
    call,
    check_component,
    get_host,
)

from .base import METADATA_KEY, annotate
from .learned import Prediction, Verifier, VerifierError, load_verifier
from .reward import DEFAULT_WEIGHTS, RewardWeights, compute_reward

OOD_MODES = ("judge", "trust")


def check_thresholds(accept_above: float, drop_below: float) -> None:
    if not 0.0 <= drop_below < accept_above <= 1.0:
        raise VerifierError(f"thresholds: need 0 <= drop_below < accept_above <= 1, got drop_below {drop_below:g}, "
                            f"accept_above {accept_above:g}")


def decide(p: Prediction, accept_above: float, drop_below: float, ood: str = "judge") -> str:
    """``accept`` / ``drop`` / ``judge`` for one prediction."""
    if ood == "judge" and p.novelty:
        return "judge"
    if p.p_pass >= accept_above:
        return "judge" if ood == "judge" and p.unlike_passed else "accept"
    if p.p_pass <= drop_below:
        return "judge" if ood == "judge" and p.unlike_failed else "drop"
    return "judge"


def doubts(p: Prediction, accept_above: float, drop_below: float) -> list[str]:
    """Why a confident prediction was not trusted (out of distribution, or unlike its class)."""
    if p.p_pass >= accept_above:
        return p.novelty + p.unlike_passed
    if p.p_pass <= drop_below:
        return p.novelty + p.unlike_failed
    return p.novelty


def _share(hits: int, n: int) -> float | None:
    return round(hits / n, 4) if n else None


@attrs.define
class RouteReport:
    """Counts and agreement of one routing pass (``to_dict`` for ``--json``)."""

    n: int = 0
    accepted: int = 0
    dropped: int = 0
    judged: int = 0
    novel: int = 0  # sent to the judge because out of distribution
    judge_errors: int = 0
    judge_calls: int = 0
    compare: bool = False  # every item was judged too, to measure what routing loses
    compare_calls: int = 0  # the extra calls that took
    stopped: str = ""
    rows: list[dict[str, Any]] = attrs.field(factory=list)

    def to_dict(self) -> dict[str, Any]:
        decided = [r for r in self.rows if r["passed"] is not None]
        world = [r for r in decided if r.get("world") in ("passed", "failed")]
        auto = [r for r in world if r["route"] != "judge"]
        judged = [r for r in world if r["route"] == "judge"]

        def agree(rows: Sequence[dict[str, Any]], key: str = "passed") -> float | None:
            return _share(sum(1 for r in rows if r[key] == (r["world"] == "passed")), len(rows))

        out: dict[str, Any] = {
            "n": self.n, "accepted": self.accepted, "dropped": self.dropped, "judged": self.judged,
            "novel": self.novel, "judge_errors": self.judge_errors, "undecided": self.n - len(decided),
            "judge_calls": self.judge_calls, "judge_calls_saved": self.n - self.judge_calls,
            "saved_fraction": _share(self.n - self.judge_calls, self.n),
            "vs_world": {"n": len(world), "routed": agree(world), "auto": agree(auto), "auto_n": len(auto),
                         "judged": agree(judged), "judged_n": len(judged)},
        }
        full = [r for r in self.rows if r.get("judge_all") is not None]
        if self.compare:
            same = sum(1 for r in full if r["passed"] == r["judge_all"])
            full_world = [r for r in full if r.get("world") in ("passed", "failed")]
            routed_acc = agree([r for r in full_world if r["passed"] is not None])
            all_acc = agree(full_world, "judge_all")
            out["vs_judge_all"] = {
                "n": len(full), "agreement": _share(same, len(full)),
                "agreement_lost": None if not full else round(1 - same / len(full), 4),
                "judge_all_vs_world": all_acc, "routed_vs_world": routed_acc,
                "accuracy_lost_vs_world": (None if routed_acc is None or all_acc is None
                                           else round(all_acc - routed_acc, 4)),
                "compare_calls": self.compare_calls,
            }
        if self.stopped:
            out["stopped"] = self.stopped
        return out


async def route_results(
    items: Sequence[tuple[str, Any]],
    verifier: Verifier,
    judge: Any,
    *,
    accept_above: float = 0.9,
    drop_below: float = 0.1,
    ood: str = "judge",
    with_verdicts: bool = False,
    compare: bool = False,
    concurrency: int = 8,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> RouteReport:
    """Route ``(run_dir, EpisodeResult)`` items; ``on_row`` gets every row as it is decided."""
    check_thresholds(accept_above, drop_below)
    if judge is None:
        raise VerifierError("route: a judge is needed for the borderline items")
    if ood not in OOD_MODES:
        raise VerifierError(f"ood: expected one of {', '.join(OOD_MODES)}, got {ood!r}")
    items = [(run, r) for run, r in items if r.trajectory is not None]
    if not items:
        raise VerifierError("route: no stored trajectories to route")
    report = RouteReport(n=len(items), compare=compare)
    predictions = verifier.predict([r.trajectory for _, r in items])
    gate = asyncio.Semaphore(max(1, concurrency))

    def emit(row: dict[str, Any]) -> None:
        report.rows.append(row)
        if on_row is not None:
            on_row(row)

    async def judge_one(r: Any) -> tuple[bool | None, float | None, str]:
        async with gate:
            r.trajectory.metadata.pop(METADATA_KEY, None)
            try:
                res = await call(judge.score, r.trajectory, list(r.verdicts) if with_verdicts else [])
            except BudgetExceeded:
                raise
            except Exception as exc:  # one failed judgement leaves one item undecided
                return None, None, f"{type(exc).__name__}: {exc}"[:500]
        passed = bool(res.passed) if res.passed is not None else res.score >= 0.7
        return passed, round(float(res.score), 4), ""

    async def one(run: str, r: Any, p: Prediction) -> None:
        route = decide(p, accept_above, drop_below, ood)
        row: dict[str, Any] = {"run": run, "task_id": r.task_id, "trial": r.trial, "seed": r.seed,
                               "world": r.status, "p_pass": p.p_pass, "route": route, "passed": None,
                               "verifier": verifier.id}
        why = doubts(p, accept_above, drop_below) if ood == "judge" else []
        if why:
            row["novelty"] = why
        if route == "judge" or compare:
            if route == "judge":
                report.judge_calls += 1
            else:
                report.compare_calls += 1
            passed, score, error = await judge_one(r)
            if route == "judge":
                row.update(passed=passed, judge_score=score)
                if error:
                    row["error"] = error
                    report.judge_errors += 1
            elif not error:
                row["judge_all_score"] = score
            row["judge_all"] = passed if not error else None
        if route == "accept":
            row["passed"] = True
            report.accepted += 1
        elif route == "drop":
            row["passed"] = False
            report.dropped += 1
        else:
            report.judged += 1
            report.novel += bool(why)
        emit(row)

    async def run_all() -> None:
        await asyncio.gather(*(one(run, r, p) for (run, r), p in zip(items, predictions, strict=True)))

    try:
        await run_all()
    except BudgetExceeded as exc:
        report.stopped = f"stopped: {exc}"
    return report


# --- as judges in a run spec -----------------------------------------------------------------------

_CACHE: dict[tuple[str, int, int], Verifier] = {}


def cached_verifier(path: Path) -> Verifier:
    """One load per file version (judges are built per episode)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise VerifierError(f"{path}: no such verifier file")
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _CACHE:
        _CACHE[key] = load_verifier(path)
    return _CACHE[key]


def _veto(verdicts: Sequence[Verdict]) -> str:
    failed = [v.checker for v in verdicts if not v.passed]
    return f"checker(s) {', '.join(failed)} failed on the world's end state" if failed else ""


class LearnedJudge:
    """``{type: learned, path: verifier.zip}``: the verifier's P(pass) as the score (no LLM, no rubric)."""

    kind = "learned"

    def __init__(self, verifier: Verifier, threshold: float = 0.5, veto: bool = True,
                 reward: RewardWeights | None = DEFAULT_WEIGHTS) -> None:
        self.verifier, self.threshold, self.veto, self.reward_weights = verifier, threshold, veto, reward

    def score(self, trajectory: Trajectory, verdicts: list[Verdict]) -> JudgeResult:
        (p,) = self.verifier.predict([trajectory])
        veto = _veto(verdicts) if self.veto else ""
        passed = p.p_pass >= self.threshold and not veto
        lines = [f"learned verifier {self.verifier.id}: P(pass) {p.p_pass:.3f}"]
        lines += [f"out of distribution: {why}" for why in p.novelty]
        if veto and p.p_pass >= self.threshold:
            lines.append(f"fails despite the score: {veto}")
        dims = {"p_pass": p.p_pass, "novel": float(bool(p.novelty)), "passed": float(passed)}
        if self.reward_weights is not None:
            dims["reward"] = compute_reward(verdicts, p.p_pass, self.reward_weights).reward
        result = JudgeResult(score=round(p.p_pass, 4), dimensions=dims, rationale="\n".join(lines), passed=passed)
        return annotate(trajectory, self, result, verifier=self.verifier.id)


class RoutedJudge:
    """``{type: routed, verifier: ..., judge: {...}}``: the verifier decides confident items, ``judge`` the rest."""

    kind = "routed"

    def __init__(self, verifier: Verifier, judge: Any, accept_above: float = 0.9, drop_below: float = 0.1,
                 ood: str = "judge", veto: bool = True) -> None:
        check_thresholds(accept_above, drop_below)
        self.verifier, self.judge = verifier, judge
        self.accept_above, self.drop_below, self.ood, self.veto = accept_above, drop_below, ood, veto

    async def score(self, trajectory: Trajectory, verdicts: list[Verdict]) -> JudgeResult:
        (p,) = self.verifier.predict([trajectory])
        route = decide(p, self.accept_above, self.drop_below, self.ood)
        if route == "judge":
            res = await call(self.judge.score, trajectory, verdicts)
            inner = trajectory.metadata.get(METADATA_KEY)
            dims = {**res.dimensions, "p_pass": p.p_pass, "routed": 0.0}
            why = doubts(p, self.accept_above, self.drop_below)
            result = JudgeResult(res.score, dims, f"routed to the judge (P(pass) {p.p_pass:.3f}"
                                 + (f"; not trusted: {why[0]}" if why else "") + ")\n" + res.rationale,
                                 res.passed, res.usage)
            return annotate(trajectory, self, result, verifier=self.verifier.id, route=route, inner=inner)
        veto = _veto(verdicts) if self.veto else ""
        passed = route == "accept" and not veto
        text = f"auto-{'accepted' if route == 'accept' else 'dropped'} by verifier {self.verifier.id}: P(pass) {p.p_pass:.3f}"
        if veto and route == "accept":
            text += f"\nfails despite the verifier: {veto}"
        dims = {"p_pass": p.p_pass, "routed": 1.0, "passed": float(passed)}
        weights = getattr(self.judge, "reward_weights", DEFAULT_WEIGHTS)
        if weights is not None:  # the same terminal reward as the items the judge scores
            dims["reward"] = compute_reward(verdicts, p.p_pass, weights).reward
        result = JudgeResult(round(p.p_pass, 4), dims, text, passed)
        return annotate(trajectory, self, result, verifier=self.verifier.id, route=route)


def _unit(instance: Any, attribute: Any, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise InvalidValue(f"{attribute.name}: must be between 0 and 1, got {value:g}")


def _ood_validator(instance: Any, attribute: Any, value: str) -> None:
    if value not in OOD_MODES:
        raise InvalidValue(f"ood: expected one of {', '.join(OOD_MODES)}, got {value!r}")


def _judge_validator(instance: Any, attribute: Any, value: ComponentSpec) -> None:
    problems = check_component("judge", value, "judge", get_host())
    if problems:
        raise InvalidValue("; ".join(problems))


def _resolve(path: str, base_dir: Path | None) -> Path:
    p = Path(path)
    if not p.is_absolute() and base_dir is not None and (base_dir / p).is_file():
        return base_dir / p
    return p


@attrs.frozen
class LearnedSpec:
    """``judge: {type: learned, path: verifier.zip}`` parameters."""

    path: str
    threshold: float = attrs.field(default=0.5, validator=_unit)
    veto: bool = True
    reward: RewardWeights | None = attrs.field(factory=RewardWeights)


@attrs.frozen
class RoutedSpec:
    """``judge: {type: routed, verifier: verifier.zip, judge: {...}}`` parameters."""

    verifier: str
    judge: ComponentSpec = attrs.field(validator=_judge_validator)
    accept_above: float = attrs.field(default=0.9, validator=_unit)
    drop_below: float = attrs.field(default=0.1, validator=_unit)
    ood: str = attrs.field(default="judge", validator=_ood_validator)
    veto: bool = True

    def __attrs_post_init__(self) -> None:
        if not self.drop_below < self.accept_above:
            raise InvalidValue(f"drop_below ({self.drop_below:g}) must be below accept_above ({self.accept_above:g})")


def make_learned(spec: LearnedSpec, base_dir: Path | None = None) -> LearnedJudge:
    return LearnedJudge(cached_verifier(_resolve(spec.path, base_dir)), spec.threshold, spec.veto, spec.reward)


def make_routed(spec: RoutedSpec, base_dir: Path | None = None, task: Any = None, pack: Any = None,
                run: Any = None) -> RoutedJudge:
    inner = build("judge", spec.judge, base_dir=base_dir, task=task, pack=pack, run=run)
    return RoutedJudge(cached_verifier(_resolve(spec.verifier, base_dir)), inner, spec.accept_above, spec.drop_below,
                       spec.ood, spec.veto)
