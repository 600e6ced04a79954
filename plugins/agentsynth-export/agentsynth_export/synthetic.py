"""A corpus with planted near duplicates of known Jaccard similarity, to measure dedup quality.

The test of dedup's recall and precision and ``bench/bench_dedup.py`` use it; so can a user who wants
to see what a threshold or ``num_perm`` does before running dedup on real data. The ground truth is
computed from the texts with plain Python sets (not with this plugin's hashing), so a bug in the
shingle hashing cannot hide in both the detector and the truth.
"""

from __future__ import annotations

import random

import attrs


@attrs.frozen
class PlantedCorpus:
    """``texts``; ``families[i]``: the family of record ``i`` (a record and the near duplicates
    planted from it, and from them); ``truth``: every record that has an earlier record with word
    n-gram Jaccard >= ``threshold``, mapped to that similarity (the highest such)."""

    texts: list[str]
    families: list[int]
    planted: dict[int, int]  # duplicate -> the record it was made from
    truth: dict[int, float]
    threshold: float
    ngram: int

    def similarities(self) -> dict[int, float]:
        """For every planted duplicate, its true similarity with the record it was made from."""
        return {i: jaccard(self.texts[i], self.texts[src], self.ngram) for i, src in self.planted.items()}


def shingle_set(text: str, n: int) -> set[str]:
    """Word n-grams of a whitespace-tokenised lowercase text (a shorter text is one shingle)."""
    words = text.lower().split()
    return {" ".join(words[j : j + n]) for j in range(max(1, len(words) - n + 1))}


def jaccard(a: str, b: str, n: int = 5) -> float:
    x, y = shingle_set(a, n), shingle_set(b, n)
    return len(x & y) / len(x | y)


def planted_corpus(n: int, *, seed: int = 0, dup_rate: float = 0.15, threshold: float = 0.8, ngram: int = 5,
                   vocab: int = 30_000, max_edits: int = 8) -> PlantedCorpus:
    """``n`` texts of 60-140 random words; about ``dup_rate`` of them are copies of a recent text
    (possibly itself a copy) with 1-``max_edits`` words substituted, inserted or deleted, which
    spreads the planted pairs' similarities from ~0.5 to ~0.97 around the usual thresholds.
    Unrelated texts share no n-gram in practice (30k-word vocabulary), and the truth is computed
    exactly over every earlier member of a record's family."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    texts: list[str] = []
    families: list[int] = []
    planted: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for i in range(n):
        if i > 50 and rng.random() < dup_rate:
            src = rng.randrange(max(0, i - 200), i)
            toks = texts[src].split()
            for _ in range(rng.randint(1, max_edits)):
                pos = rng.randrange(len(toks))
                kind = rng.random()
                if kind < 0.7:
                    toks[pos] = rng.choice(words)
                elif kind < 0.85 or len(toks) < 20:
                    toks.insert(pos, rng.choice(words))
                else:
                    del toks[pos]
            text = " ".join(toks)
            family = families[src]
            planted[i] = src
        else:
            text = " ".join(rng.choices(words, k=rng.randrange(60, 140)))
            family = i
        texts.append(text)
        families.append(family)
        members.setdefault(family, []).append(i)
    truth: dict[int, float] = {}
    for group in members.values():
        sets = [shingle_set(texts[i], ngram) for i in group]
        for k in range(1, len(group)):
            best = max(len(sets[k] & sets[j]) / len(sets[k] | sets[j]) for j in range(k))
            if best >= threshold:
                truth[group[k]] = best
    return PlantedCorpus(texts, families, planted, truth, threshold, ngram)


def score(corpus: PlantedCorpus, matches: dict[int, int]) -> dict[str, float | int]:
    """Precision and recall of a detector's ``{duplicate: the earlier record it matched}``.

    A flagged record is correct when its pair's true Jaccard is at least the threshold (so
    precision == 1.0 means no pair below the threshold was removed); recall is over ``truth``."""
    n = corpus.ngram
    below = [i for i, j in matches.items()
             if not (j < i and jaccard(corpus.texts[i], corpus.texts[j], n) >= corpus.threshold)]
    flagged = len(matches)
    found = len(set(matches) & set(corpus.truth))
    return {
        "flagged": flagged,
        "true_duplicates": len(corpus.truth),
        "found": found,
        "flagged_below_threshold": len(below),
        "precision": round((flagged - len(below)) / flagged, 4) if flagged else 1.0,
        "recall": round(found / len(corpus.truth), 4) if corpus.truth else 1.0,
    }
