"""Dataset metrics over the accepted records: how diverse the batch is, not only how big."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_WORD = re.compile(r"[a-z0-9]+")


def _ngrams(text: str, n: int) -> list[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def ngram_stats(texts: list[str], n: int = 3) -> dict[str, Any]:
    """``distinct``: unique n-grams / all n-grams over the batch; ``novelty``: the mean share of a record's
    n-grams that no earlier record had (1.0: every query new, 0.0: paraphrases of one)."""
    seen: set[tuple[str, ...]] = set()
    total = 0
    novelties = []
    for text in texts:
        grams = _ngrams(text, n)
        if not grams:
            continue
        new = sum(1 for g in set(grams) if g not in seen)
        novelties.append(new / len(set(grams)))
        seen.update(grams)
        total += len(grams)
    return {"n": n, "distinct": round(len(seen) / total, 4) if total else None,
            "novelty": round(sum(novelties) / len(novelties), 4) if novelties else None}


def dataset_metrics(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool-usage signatures, modes, domains, grounding, n-gram novelty of the queries, judge averages."""
    signatures = Counter("->".join(r["tools"]) or "(no tool)" for r in records)
    tool_sets = Counter(",".join(sorted(set(r["tools"]))) or "(no tool)" for r in records)
    calls = [len(r["tools"]) for r in records]
    judged = [r["judge"] for r in records if r.get("judge") and "score" in r["judge"]]
    dims: dict[str, list[float]] = {}
    for j in judged:
        for k, v in (j.get("dimensions") or {}).items():
            dims.setdefault(k, []).append(v)
    return {
        "records": len(records),
        "tool_signatures": {"distinct": len(signatures),
                            "distinct_ratio": round(len(signatures) / len(records), 4) if records else None,
                            "top": dict(signatures.most_common(5))},
        "tool_sets": {"distinct": len(tool_sets)},
        "tools_used": dict(sorted(Counter(t for r in records for t in r["tools"]).items())),
        "calls_per_record": round(sum(calls) / len(calls), 3) if calls else None,
        "modes": dict(sorted(Counter(r["mode"] for r in records).items())),
        "domains": dict(sorted(Counter(r["domain"] or "(none)" for r in records).items())),
        "grounding": dict(sorted(Counter(r["grounding"] for r in records).items())),
        "query_ngrams": {"2": ngram_stats([r["query"] for r in records], 2),
                         "3": ngram_stats([r["query"] for r in records], 3)},
        "judge": {"records": len(judged),
                  "mean_score": round(sum(j["score"] for j in judged) / len(judged), 4) if judged else None,
                  "dimensions": {k: round(sum(v) / len(v), 4) for k, v in sorted(dims.items())}},
    }
