"""Pairwise preferences (A vs B) with swap-consistency, and preference pairs for DPO.

A *pairwise* judge has ``compare_once(first, second) -> Preference`` (the LLM judge
does): it sees two trajectories of the same task and says which is better. LLM judges
favour whatever comes first (or second), so :func:`compare` asks twice, once in each
order, and only reports a winner when both orders agree (``consistent``); otherwise the
result is a tie. With ``swap=False`` the order is shuffled with a seeded RNG instead.
Every result also says which trajectory was ``longer``, and :func:`length_bias` measures
how often a judge picks the longer one (verbosity bias) over many comparisons.

Any pointwise judge (``score``) also works: both trajectories are scored and the higher
score wins (a deterministic judge is swap-consistent by construction).

:func:`preference_pairs` turns a run's episodes into (chosen, rejected) pairs: a passed
episode is preferred over a failed one of the same task (the world decides); among
episodes with the same outcome the judge decides, and only swap-consistent preferences
above ``min_margin`` are kept.
"""

from __future__ import annotations

import hashlib
import inspect
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

import attrs

from agentsynth_kernel import (
    EpisodeResult,
    ToolCall,
    Trajectory,
    Usage,
    Verdict,
    call,
    to_builtins,
    to_openai_messages,
)


@attrs.frozen
class Preference:
    """One presentation's answer: which of the two *as shown* is better."""

    choice: str  # "first", "second" or "tie"
    rationale: str = ""
    confidence: float | None = None
    usage: Usage | None = None


@attrs.frozen
class PairwiseResult:
    """The preference between A and B after position-bias control."""

    winner: str  # "a", "b" or "tie"
    consistent: bool
    margin: float = 0.0  # score(a) - score(b) for pointwise judges; +-1/0 votes for pairwise ones
    rationale: str = ""
    rounds: list[dict[str, Any]] = attrs.field(factory=list)
    usage: Usage | None = None
    longer: str = ""  # "a", "b" or "" (same length): to measure verbosity bias (see length_bias)


def _to_ab(choice: str, a_first: bool) -> str:
    if choice == "tie":
        return "tie"
    return ("a" if choice == "first" else "b") if a_first else ("b" if choice == "first" else "a")


async def compare(
    judge: Any,
    a: Trajectory,
    b: Trajectory,
    *,
    verdicts_a: Sequence[Verdict] = (),
    verdicts_b: Sequence[Verdict] = (),
    swap: bool = True,
    rng: random.Random | None = None,
    tie_margin: float = 0.02,
) -> PairwiseResult:
    """Which of two trajectories of the same task is better, controlling for position bias."""
    once = getattr(judge, "compare_once", None)
    if once is None:
        ra = await call(judge.score, a, list(verdicts_a))
        rb = await call(judge.score, b, list(verdicts_b))
        margin = float(ra.score) - float(rb.score)
        winner = "tie" if abs(margin) <= tie_margin else ("a" if margin > 0 else "b")
        usage = _sum_usage([ra.usage, rb.usage])
        rounds = [{"a_score": ra.score, "b_score": rb.score}]
        return PairwiseResult(winner, True, round(margin, 4), f"a {ra.score:.2f} vs b {rb.score:.2f}", rounds, usage,
                              _longer(a, b))
    orders = [True, False] if swap else [(rng or random.Random(_pair_seed(a, b))).random() < 0.5]
    rounds = []
    votes: list[str] = []
    usages = []
    for a_first in orders:
        first, second = (a, b) if a_first else (b, a)
        pref = once(first, second)
        if inspect.isawaitable(pref):
            pref = await pref
        vote = _to_ab(pref.choice, a_first)
        votes.append(vote)
        usages.append(pref.usage)
        rounds.append({"order": "ab" if a_first else "ba", "choice": pref.choice, "winner": vote,
                       "rationale": pref.rationale})
    consistent = len(set(votes)) == 1
    winner = votes[0] if consistent else "tie"
    margin = sum(1.0 if v == "a" else -1.0 if v == "b" else 0.0 for v in votes) / len(votes)
    rationale = rounds[0]["rationale"] if consistent else "inconsistent under swapping: " + ", ".join(votes)
    return PairwiseResult(winner, consistent, margin, rationale, rounds, _sum_usage(usages), _longer(a, b))


def _longer(a: Trajectory, b: Trajectory) -> str:
    la, lb = length(a), length(b)
    return "" if la == lb else ("a" if la > lb else "b")


def _pair_seed(a: Trajectory, b: Trajectory) -> int:
    """A stable per-pair seed, so an unswapped comparison's order is random across pairs but reproducible."""
    material = "\0".join([a.task_id, str(len(a.steps)), a.final_answer or "", str(len(b.steps)), b.final_answer or ""])
    return int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "big")


def length(trajectory: Trajectory) -> int:
    """Characters the agent produced (answer, thoughts, call arguments): what verbosity bias reacts to."""
    total = len(trajectory.final_answer or "")
    for step in trajectory.steps:
        total += len(step.thought)
        if isinstance(step.action, ToolCall):
            total += len(str(step.action.arguments))
    return total


def length_bias(results: Iterable[PairwiseResult]) -> float | None:
    """Among decisive comparisons of trajectories of different length, the share won by the longer one.
    About 0.5 is unbiased (if length is unrelated to quality); near 1.0 the judge favours verbosity."""
    decided = [r for r in results if r.winner in ("a", "b") and r.longer in ("a", "b")]
    if not decided:
        return None
    return sum(r.winner == r.longer for r in decided) / len(decided)


def _sum_usage(usages: Iterable[Usage | None]) -> Usage | None:
    total: Usage | None = None
    for u in usages:
        if u is not None:
            total = u if total is None else total + u
    return total


@attrs.frozen
class PreferencePair:
    """A chosen and a rejected episode of the same task, and why."""

    task_id: str
    chosen: EpisodeResult
    rejected: EpisodeResult
    source: str  # "outcome" (the world decided) or "judge"
    margin: float = 1.0
    consistent: bool = True
    rationale: str = ""

    def to_dpo(self) -> dict[str, Any]:
        """A TRL-style DPO row: shared prompt messages, then the chosen / rejected continuations."""
        assert self.chosen.trajectory is not None and self.rejected.trajectory is not None
        chosen = to_openai_messages(self.chosen.trajectory)
        rejected = to_openai_messages(self.rejected.trajectory)
        shared = 0
        while shared < min(len(chosen), len(rejected)) and chosen[shared]["role"] in ("system", "user") \
                and chosen[shared] == rejected[shared]:
            shared += 1
        return {
            "task_id": self.task_id,
            "prompt": chosen[:shared],
            "chosen": chosen[shared:],
            "rejected": rejected[shared:],
            "source": self.source,
            "margin": self.margin,
            "chosen_key": list(self.chosen.key),
            "rejected_key": list(self.rejected.key),
            "chosen_scores": to_builtins(self.chosen.scores),
            "rejected_scores": to_builtins(self.rejected.scores),
        }


async def preference_pairs(
    results: Iterable[EpisodeResult],
    judge: Any = None,
    *,
    swap: bool = True,
    min_margin: float = 0.0,
    max_pairs_per_task: int = 4,
    seed: int = 0,
) -> list[PreferencePair]:
    """(chosen, rejected) pairs per task: passed over failed first, then judge-decided ones."""
    by_task: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        if r.status in ("passed", "failed") and r.trajectory is not None:
            by_task[r.task_id].append(r)
    rng = random.Random(seed)
    pairs: list[PreferencePair] = []
    for task_id, episodes in by_task.items():
        made: list[PreferencePair] = []
        winners = [r for r in episodes if r.passed]
        losers = [r for r in episodes if not r.passed]
        for w in winners:
            for lo in losers:
                made.append(PreferencePair(task_id, w, lo, "outcome", 1.0, True, "passed vs failed"))
        if judge is not None:
            for group in (winners, losers):
                for x, y in combinations(group, 2):
                    if len(made) >= max_pairs_per_task:
                        break
                    assert x.trajectory is not None and y.trajectory is not None
                    res = await compare(judge, x.trajectory, y.trajectory, verdicts_a=x.verdicts,
                                        verdicts_b=y.verdicts, swap=swap, rng=rng)
                    if res.winner == "tie" or not res.consistent or abs(res.margin) <= min_margin:
                        continue
                    chosen, rejected = (x, y) if res.winner == "a" else (y, x)
                    made.append(PreferencePair(task_id, chosen, rejected, "judge", abs(res.margin), True,
                                               res.rationale))
        pairs += made[:max_pairs_per_task]
    return pairs
