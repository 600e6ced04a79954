"""The terminal reward of an episode, for RL and for ranking data.

``reward = w_outcome * outcome + w_verification * verification + w_judge * judge``

- ``outcome``: 1 if there is at least one verdict and every checker passed, else 0;
- ``verification``: the fraction of checkers that passed (partial credit);
- ``judge``: the judge's overall rubric score in [0, 1].

Defaults 0.6 / 0.2 / 0.2. Weights are normalised to sum to 1, so the reward is in
[0, 1]. Without a judge score the judge weight is dropped and the rest renormalised.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from agentsynth_kernel import InvalidValue, Verdict


def _non_negative(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if value < 0:
        raise InvalidValue(f"reward.{attribute.name}: must be >= 0, got {value:g}")


@attrs.frozen
class RewardWeights:
    """How much outcome, verification and the judge count (``reward:`` in a judge spec)."""

    outcome: float = attrs.field(default=0.6, validator=_non_negative)
    verification: float = attrs.field(default=0.2, validator=_non_negative)
    judge: float = attrs.field(default=0.2, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        if self.outcome + self.verification + self.judge <= 0:
            raise InvalidValue("reward: the weights must not all be zero")


DEFAULT_WEIGHTS = RewardWeights()


@attrs.frozen
class Reward:
    """A reward with its parts, so a trainer can see why an episode got what it got."""

    reward: float
    outcome: float
    verification: float
    judge: float | None


def compute_reward(
    verdicts: Sequence[Verdict], judge_score: float | None = None, weights: RewardWeights = DEFAULT_WEIGHTS
) -> Reward:
    """The terminal reward from the checkers' verdicts and (optionally) a judge score."""
    n = len(verdicts)
    passed = sum(1 for v in verdicts if v.passed)
    outcome = 1.0 if n and passed == n else 0.0
    verification = passed / n if n else 0.0
    parts = [(weights.outcome, outcome), (weights.verification, verification)]
    if judge_score is not None:
        judge_score = max(0.0, min(1.0, float(judge_score)))
        parts.append((weights.judge, judge_score))
    total = sum(w for w, _ in parts)
    value = sum(w * x for w, x in parts) / total if total > 0 else outcome
    return Reward(round(value, 6), outcome, verification, judge_score)
