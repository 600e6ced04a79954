"""Estimators for benchmark reports: pass@k, pass^k, Wilson intervals, paired comparison."""

from __future__ import annotations

import math
from collections.abc import Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): P(at least one of k samples passes), from n trials with c passes."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k (tau-bench): P(all of k samples pass) = C(c, k) / C(n, k)."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return math.comb(c, k) / math.comb(n, k)


def wilson_interval(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a proportion (95 % by default); (0, 1) when n == 0."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def paired_sign_test(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Exact two-sided sign test on paired per-task scores (ties dropped).

    Returns the mean difference (b - a), wins of each side, and the p-value.
    """
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    wins_b = sum(1 for d in diffs if d > 0)
    wins_a = sum(1 for d in diffs if d < 0)
    n = wins_a + wins_b
    if n == 0:
        p = 1.0
    else:
        tail = sum(math.comb(n, i) for i in range(0, min(wins_a, wins_b) + 1)) / 2**n
        p = min(1.0, 2 * tail)
    return {"mean_diff": mean(diffs), "wins_a": wins_a, "wins_b": wins_b, "ties": len(diffs) - n, "p_value": p}


def verifiable_gate(weak_correct: int, strong_correct: int | None, attempts: int, *, weak_correct_max: float = 1,
                    strong_correct_min: float = 3) -> tuple[bool, str, str]:
    """Autosynth's *verifiable* acceptance of a generated task, shared by every generator that has
    weak and strong solvers and a verifier (a domain's ``verify``, a pack's checkers).

    ``weak_correct`` / ``strong_correct`` attempts of ``attempts`` each were correct; the thresholds
    are counted of 4 attempts and scaled to ``attempts`` (defaults: weak at most 1 of 4, strong at
    least 3 of 4). ``strong_correct`` None checks the weak gate alone (``short_circuit_strong``).
    Returns ``(accepted, reason, rationale)``; reason is ``weak_too_strong`` (too easy) or
    ``strong_too_weak`` (too hard, or a broken verifier), empty when accepted.
    """
    weak_cap, strong_need = weak_correct_max * attempts / 4, strong_correct_min * attempts / 4
    if weak_correct > weak_cap:
        return False, "weak_too_strong", f"weak solved {weak_correct} of {attempts} (at most {weak_cap:g} allowed)"
    if strong_correct is None:
        return True, "", f"weak solved {weak_correct} of {attempts}"
    if strong_correct < strong_need:
        return False, "strong_too_weak", (f"strong solved {strong_correct} of {attempts} "
                                          f"(at least {strong_need:g} needed)")
    return True, "", (f"verifiable: weak solved {weak_correct} of {attempts} (<= {weak_cap:g}), strong "
                      f"{strong_correct} of {attempts} (>= {strong_need:g})")
