"""The ``judged`` checker: a judge's score as a pass/fail check.

A rule that only a reader can check — "the simulated user stayed in role and gave only what its
instructions hold" (a multi-turn task's ``user.checks``), "the refusal was polite and said why" —
is a judge with a rubric plus a threshold::

    user:
      checks:
        - type: judged
          min_score: 0.7
          judge: {type: llm, model: openai/gpt-4o-mini, rubric: user-rules.yaml}

It scores the trajectory it is given (on ``user.checks``, the user's side of the talk) with no
verdicts (nothing to veto with), and passes when the score reaches ``min_score``. It reads what
was said, not the world: next to a world-state checker, never instead of one.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import ComponentSpec, InvalidValue, Trajectory, Verdict, build, call


def _score_range(_: Any, __: Any, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value <= 1.0):
        raise InvalidValue(f"min_score: expected a number in [0, 1], got {value!r}")


@attrs.frozen
class JudgedSpec:
    """``{type: judged, judge: {...}, min_score: 0.7}`` parameters."""

    judge: ComponentSpec
    min_score: float = attrs.field(default=0.7, validator=_score_range)


class JudgedChecker:
    """Passes when ``judge`` scores the trajectory at least ``min_score``."""

    def __init__(self, spec: JudgedSpec, run: Any = None, base_dir: Path | None = None) -> None:
        self.spec, self.run, self.base_dir = spec, run, base_dir
        self._judge: Any = None

    async def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        if self._judge is None:
            self._judge = build("judge", self.spec.judge, run=self.run, base_dir=self.base_dir)
        result = await call(self._judge.score, trajectory, [])
        score = float(result.score)
        ok = score >= self.spec.min_score
        why = (result.rationale or "").strip().replace("\n", " ")
        detail = f"judge {self.spec.judge.type!r} scored {score:.2f} (min_score {self.spec.min_score:g})"
        return Verdict("judged", ok, score, f"{detail}: {why[:300]}" if why else detail,
                       data={"dimensions": dict(result.dimensions or {})})


def make_judged(spec: JudgedSpec, run: Any = None, base_dir: Path | None = None) -> JudgedChecker:
    return JudgedChecker(spec, run, base_dir)
