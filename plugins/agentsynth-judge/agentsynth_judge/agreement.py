"""Agreement statistics: confusion matrices, Cohen's kappa, Fleiss' kappa, rank AUC."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import attrs


@attrs.frozen
class Confusion:
    """Judge pass/fail (predicted) against the world's verdict (truth)."""

    tp: int = 0  # judge pass, world pass
    fp: int = 0  # judge pass, world fail
    fn: int = 0  # judge fail, world pass
    tn: int = 0  # judge fail, world fail

    @classmethod
    def of(cls, pairs: Sequence[tuple[bool, bool]]) -> Confusion:
        """From ``(judge_passed, world_passed)`` pairs."""
        tp = sum(1 for j, w in pairs if j and w)
        fp = sum(1 for j, w in pairs if j and not w)
        fn = sum(1 for j, w in pairs if not j and w)
        return cls(tp, fp, fn, len(pairs) - tp - fp - fn)

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.n if self.n else 0.0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def kappa(self) -> float | None:
        return cohen_kappa(self.tp, self.fp, self.fn, self.tn)

    def matrix(self) -> dict[str, dict[str, int]]:
        """``{judge: {world: count}}`` with keys ``pass`` / ``fail``."""
        return {"pass": {"pass": self.tp, "fail": self.fp}, "fail": {"pass": self.fn, "fail": self.tn}}


def cohen_kappa(tp: int, fp: int, fn: int, tn: int) -> float | None:
    """Cohen's kappa of two binary raters; ``None`` when undefined (both always say the same class)."""
    n = tp + fp + fn + tn
    if n == 0:
        return None
    po = (tp + tn) / n
    judge_yes, world_yes = (tp + fp) / n, (tp + fn) / n
    pe = judge_yes * world_yes + (1 - judge_yes) * (1 - world_yes)
    if math.isclose(pe, 1.0):
        return None
    return (po - pe) / (1 - pe)


def fleiss_kappa(votes: Sequence[Sequence[bool]]) -> float | None:
    """Fleiss' kappa for binary votes: one row per item, one column per rater (same count per row)."""
    rows = [list(r) for r in votes if len(r) >= 2]
    if not rows or len({len(r) for r in rows}) != 1:
        return None
    m = len(rows[0])
    p_items = []
    yes_total = 0
    for row in rows:
        yes = sum(row)
        no = m - yes
        yes_total += yes
        p_items.append((yes * (yes - 1) + no * (no - 1)) / (m * (m - 1)))
    p_bar = sum(p_items) / len(rows)
    p_yes = yes_total / (len(rows) * m)
    pe = p_yes**2 + (1 - p_yes) ** 2
    if math.isclose(pe, 1.0):
        return None
    return (p_bar - pe) / (1 - pe)


def rank_auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Probability that a random world-passed episode outscores a random failed one (ties count half)."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def agreement_stats(votes: Sequence[Sequence[bool]], names: Sequence[str] | None = None) -> dict[str, Any]:
    """How much several judges agree over many items (rows = items, columns = judges):
    mean pairwise percent agreement, Fleiss' kappa, and Cohen's kappa for every pair of judges."""
    rows = [list(r) for r in votes]
    if not rows:
        return {"items": 0, "percent_agreement": None, "fleiss_kappa": None, "pairwise": []}
    m = len(rows[0])
    names = list(names) if names is not None else [f"judge[{i}]" for i in range(m)]
    pairwise = []
    agree_total = 0.0
    for i, j in combinations(range(m), 2):
        pairs = [(r[i], r[j]) for r in rows]
        c = Confusion.of(pairs)
        pairwise.append({"a": names[i], "b": names[j], "agreement": c.accuracy, "kappa": c.kappa})
        agree_total += c.accuracy
    return {
        "items": len(rows),
        "judges": m,
        "percent_agreement": agree_total / len(pairwise) if pairwise else 1.0,
        "fleiss_kappa": fleiss_kappa(rows),
        "pairwise": pairwise,
    }
