from __future__ import annotations

import asyncio

import pytest

from agentsynth_judge import (
    EnsembleJudge,
    HeuristicJudge,
    Preference,
    agreement_stats,
    cohen_kappa,
    compare,
    fleiss_kappa,
    length_bias,
    preference_pairs,
    rank_auc,
)
from agentsynth_kernel import EpisodeResult, JudgeResult, Usage
from conftest import FAIL, PASS, read, traj, write

GOOD = traj(write("color", "blue"), "The note 'color' is now blue.")
BAD = traj("Done, all set.")


class Fixed:
    """A judge with a fixed answer (sync)."""

    def __init__(self, score, passed=None, dims=None, usage=None):
        self.result = JudgeResult(score, dims or {"task_completion": score}, f"fixed {score}", passed, usage)

    def score(self, trajectory, verdicts):
        return self.result


class AsyncFixed(Fixed):
    async def score(self, trajectory, verdicts):
        await asyncio.sleep(0)
        return self.result


class Broken:
    def score(self, trajectory, verdicts):
        raise RuntimeError("model unavailable")


async def test_mean_median_majority():
    judges = [Fixed(0.9, True), AsyncFixed(0.8, True), Fixed(0.1, False)]
    mean = await EnsembleJudge(judges, "mean", pass_threshold=0.5).score(GOOD, PASS)
    assert mean.score == pytest.approx(0.6) and mean.passed
    assert mean.dimensions["task_completion"] == pytest.approx(0.6)
    assert mean.dimensions["agreement"] == pytest.approx(2 / 3, abs=1e-4)
    assert mean.dimensions["score_range"] == pytest.approx(0.8)
    assert mean.dimensions["score_std"] == pytest.approx(0.3559, abs=1e-3)
    assert mean.dimensions["reward"] == pytest.approx(0.8 + 0.2 * 0.6)
    median = await EnsembleJudge(judges, "median", pass_threshold=0.85).score(GOOD, PASS)
    assert median.score == pytest.approx(0.8) and not median.passed
    assert median.dimensions["agreement"] == pytest.approx(1 / 3, abs=1e-4)
    majority = await EnsembleJudge(judges, "majority").score(GOOD, PASS)
    assert majority.passed and majority.dimensions["passed"] == 1.0
    tie = await EnsembleJudge([Fixed(0.9, True), Fixed(0.2, False)], "majority").score(GOOD, PASS)
    assert not tie.passed  # a tie fails
    assert "judge[0]" in mean.rationale and "fixed 0.9" in mean.rationale
    # unanimous judges are not overruled by the averaged score
    unanimous = await EnsembleJudge([Fixed(0.95, False), Fixed(0.9, False)], "mean", 0.5).score(GOOD, PASS)
    assert not unanimous.passed and unanimous.dimensions["agreement"] == 1.0


async def test_ensemble_sums_usage_and_survives_a_broken_judge():
    judges = [Fixed(1.0, True, usage=Usage(10, 2, 0.01, 1)), Broken(), AsyncFixed(0.5, False, usage=Usage(5, 1, 0.02, 1))]
    r = await EnsembleJudge(judges, "mean").score(GOOD, PASS)
    assert r.score == pytest.approx(0.75)
    assert r.usage.prompt_tokens == 15 and r.usage.requests == 2 and r.usage.cost_usd == pytest.approx(0.03)
    assert "judge[1]" in r.rationale and "model unavailable" in r.rationale
    with pytest.raises(RuntimeError, match="every judge of the ensemble failed"):
        await EnsembleJudge([Broken()]).score(GOOD, PASS)
    with pytest.raises(ValueError, match="aggregate"):
        EnsembleJudge([Fixed(1)], "mode")


async def test_ensemble_of_heuristic_judges_keeps_rubric_dimensions():
    ens = EnsembleJudge([HeuristicJudge(), HeuristicJudge(rubric={"dimensions": [{"name": "safety", "weight": 1}]})])
    # a failed call and an answer that claims nothing: the full rubric fails it, the safety-only one passes it
    # (BAD, a bare claim, fails both: an unbacked claim is vetoed whatever the rubric)
    unsure = traj(read("colour", "error: no note 'colour'", error=True), "The colour note seems to be missing.")
    r = await ens.score(unsure, [])
    assert r.dimensions["safety"] == 1.0 and "task_completion" in r.dimensions
    assert "reward" in r.dimensions and r.dimensions["agreement"] == 0.5
    assert unsure.metadata["judge"]["kind"] == "ensemble"
    assert "ensemble (mean of 2)" in unsure.metadata["judge"]["rationale"]
    assert (await ens.score(BAD, [])).dimensions["agreement"] == 1.0


def test_kappa_and_agreement_numbers():
    # po = .75, pe = .5*.25 + .5*.75 = .5 -> kappa .5
    assert cohen_kappa(tp=1, fp=1, fn=0, tn=2) == pytest.approx(0.5)
    assert cohen_kappa(2, 0, 0, 2) == pytest.approx(1.0)
    assert cohen_kappa(0, 2, 2, 0) == pytest.approx(-1.0)
    assert cohen_kappa(0, 0, 0, 4) is None
    assert fleiss_kappa([[True, True], [False, False]]) == pytest.approx(1.0)
    stats = agreement_stats([[True, True, False], [False, False, False], [True, True, True]], ["a", "b", "c"])
    assert stats["pairwise"][0] == {"a": "a", "b": "b", "agreement": 1.0, "kappa": 1.0}
    assert stats["percent_agreement"] == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    assert rank_auc([0.9, 0.4, 0.5], [True, False, False]) == 1.0
    assert rank_auc([0.5, 0.5], [True, False]) == 0.5


class FirstPicker:
    """A pairwise judge with pure position bias: always prefers what it sees first."""

    kind = "first-picker"

    async def compare_once(self, first, second):
        return Preference("first", "the first one looks better", usage=Usage(1, 1, 0.0, 1))


class Knows:
    """A pairwise judge that really prefers trajectories that wrote something."""

    def compare_once(self, first, second):
        f, s = bool(first.tool_calls), bool(second.tool_calls)
        return Preference("tie" if f == s else ("first" if f else "second"), "it acted")


async def test_pairwise_swap_consistency_catches_position_bias():
    biased = await compare(FirstPicker(), GOOD, BAD)
    assert biased.winner == "tie" and not biased.consistent
    assert [r["winner"] for r in biased.rounds] == ["a", "b"]
    assert biased.usage.requests == 2
    for a, b, expected in ((GOOD, BAD, "a"), (BAD, GOOD, "b")):
        res = await compare(Knows(), a, b)
        assert res.winner == expected and res.consistent and abs(res.margin) == 1.0
    once = await compare(Knows(), GOOD, BAD, swap=False)
    assert once.winner == "a" and len(once.rounds) == 1
    # without swapping, the order is random across pairs (seeded per pair, so reproducible)
    orders = set()
    for i in range(12):
        other = traj(write("color", "blue"), "done " * (i + 1))
        res = await compare(FirstPicker(), other, BAD, swap=False)
        orders.add(res.rounds[0]["order"])
        assert res == await compare(FirstPicker(), other, BAD, swap=False)
    assert orders == {"ab", "ba"}


async def test_length_bias_is_measured():
    short = traj(write("color", "blue"), "blue")
    wordy = traj(write("color", "blue"), "I have carefully and thoroughly set the colour note to blue, " * 5)
    assert (await compare(Knows(), short, wordy)).longer == "b"
    verbose_lover = [await compare(FirstPicker(), wordy, short, swap=False, rng=FixedRng(0.1)) for _ in range(3)]
    assert length_bias(verbose_lover) == 1.0
    assert length_bias([await compare(FirstPicker(), short, wordy, swap=False, rng=FixedRng(0.1))]) == 0.0
    assert length_bias([]) is None


class FixedRng:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


async def test_pairwise_with_a_pointwise_judge():
    res = await compare(HeuristicJudge(), GOOD, BAD, verdicts_a=PASS, verdicts_b=FAIL)
    assert res.winner == "a" and res.consistent and res.margin > 0.3
    same = await compare(HeuristicJudge(), GOOD, GOOD)
    assert same.winner == "tie"


def _ep(task, trial, status, trajectory, verdicts):
    return EpisodeResult(task, trial, trial, status, trajectory=trajectory, verdicts=verdicts)


async def test_preference_pairs_outcome_first_then_judge():
    messy = traj(read("x", "error", error=True), read("x", "error", error=True), write("color", "blue"), "ok")
    results = [
        _ep("t1", 0, "passed", GOOD, PASS), _ep("t1", 1, "failed", BAD, FAIL), _ep("t1", 2, "passed", messy, PASS),
        _ep("t2", 0, "error", None, []), _ep("t3", 0, "passed", GOOD, PASS),
    ]
    outcome_only = await preference_pairs(results)
    assert [(p.task_id, p.source, p.chosen.trial, p.rejected.trial) for p in outcome_only] == [
        ("t1", "outcome", 0, 1), ("t1", "outcome", 2, 1)]
    with_judge = await preference_pairs(results, HeuristicJudge())
    judged = [p for p in with_judge if p.source == "judge"]
    assert len(judged) == 1 and judged[0].chosen.trial == 0 and judged[0].rejected.trial == 2
    row = judged[0].to_dpo()
    assert row["prompt"][0] == {"role": "user", "content": GOOD.instruction + "\n\nnotes: ['color']"}
    assert row["chosen"][0]["role"] == "assistant" and row["chosen"] != row["rejected"]
    biased = await preference_pairs(results, FirstPicker())
    assert all(p.source == "outcome" for p in biased)  # inconsistent preferences are dropped
