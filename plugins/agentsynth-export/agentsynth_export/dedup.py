"""Dedup (exact + MinHash LSH near-duplicates) and decontamination, streaming in batches.

Exact: a 64-bit BLAKE2b hash of the normalized text (lowercase words). Near: MinHash
signatures over word n-gram shingles, banded LSH with (bands, rows) chosen for the
threshold (as datasketch does), and each candidate verified by the estimated Jaccard
similarity of the two signatures (within two standard errors of the threshold), which drops
most LSH candidates that are well below the threshold.

The work is vectorised over a batch of records with numpy (shingle hashing, the
``num_perm`` permutations and the per-record minimum), and the LSH buckets live in
sorted numpy arrays merged like an LSM tree, so memory per record is small and fixed:
``8 (exact) + 12 x bands (buckets) + 4 x num_perm (signature, for verification)`` bytes.
Records are kept in order: the first of a group of duplicates survives.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from agentsynth_kernel import AgentsynthError, EpisodeResult

from .common import CANARY_PREFIX, normalize, result_text, tokens

_MASK32 = np.uint64(0xFFFFFFFF)
_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2
_SHIFT32 = np.uint64(32)


_TOKEN_CACHE: dict[str, int] = {}


def _token_hashes(words: list[str]) -> np.ndarray:
    """Stable 64-bit hashes of words (BLAKE2b, memoised; lookups run in C via ``map``)."""
    cache = _TOKEN_CACHE
    missing = set(words).difference(cache.keys())
    if missing:
        if len(cache) + len(missing) > 2_000_000:
            cache.clear()
            missing = set(words)
        blake = hashlib.blake2b
        for w in missing:
            cache[w] = int.from_bytes(blake(w.encode(), digest_size=8).digest(), "little")
    return np.fromiter(map(cache.__getitem__, words), dtype=np.uint64, count=len(words))


def exact_hash(text: str) -> int:
    """64-bit hash of the normalized text."""
    return int.from_bytes(hashlib.blake2b(normalize(text).encode(), digest_size=8).digest(), "little")


# --- MinHash -------------------------------------------------------------------------------------------


class MinHasher:
    """MinHash signatures (``num_perm`` uint32 values) of word-``ngram`` shingle sets.

    Permutations are multiply-add-shift hashes ``((a*x + b) mod 2^64) >> 32`` of the 32-bit
    folded shingle hash, with odd random ``a`` and random ``b`` drawn from ``seed``.
    """

    def __init__(self, num_perm: int = 128, ngram: int = 5, seed: int = 1) -> None:
        if num_perm < 8 or ngram < 1:
            raise ValueError("num_perm must be >= 8 and ngram >= 1")
        self.num_perm = num_perm
        self.ngram = ngram
        rng = np.random.default_rng(seed)
        self._a = (rng.integers(0, 2**63, size=num_perm, dtype=np.uint64) << np.uint64(1)) | np.uint64(1)
        self._b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64)
        self._mix = (rng.integers(0, 2**63, size=max(ngram, 1), dtype=np.uint64) << np.uint64(1)) | np.uint64(1)

    def shingle_hashes(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """All word-n-gram hashes of a batch (uint64) and each text's start offset into them.

        Every text has at least one shingle: a text shorter than n words is one shingle of all
        its words, an empty text is the shingle of an empty-marker token.
        """
        n = self.ngram
        lengths = []
        flat: list[str] = []
        for text in texts:
            toks = tokens(text) or ["\x00"]
            lengths.append(len(toks))
            flat.extend(toks)
        th = _token_hashes(flat)
        lens = np.asarray(lengths, dtype=np.int64)
        starts = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        padded = np.concatenate([th, np.zeros(n, dtype=np.uint64)])
        total = len(th)
        comb = padded[:total] * self._mix[0]
        for k in range(1, n):
            comb += padded[k : k + total] * self._mix[k]
        # a shingle position is valid when the n-gram stays inside its text; short texts keep
        # position 0 with only their own words mixed in (the zero padding would cross texts)
        counts = np.maximum(lens - n + 1, 1)
        doc_of = np.repeat(np.arange(len(lens)), lens)
        pos = np.arange(total, dtype=np.int64) - starts[doc_of]
        valid = pos < counts[doc_of]
        short = np.nonzero(lens < n)[0]
        for d in short.tolist():
            st, ln = starts[d], lens[d]
            comb[st] = (th[st : st + ln] * self._mix[:ln]).sum(dtype=np.uint64)
        shingles = comb[valid]
        offsets = np.zeros(len(lens), dtype=np.int64)
        np.cumsum(counts[:-1], out=offsets[1:])
        return shingles, offsets

    def signatures(self, texts: Iterable[str], *, chunk_rows: int = 1024) -> np.ndarray:
        """A ``(len(texts), num_perm)`` uint32 array of signatures.

        The permutations are applied to ``chunk_rows`` shingles at a time into a reused
        buffer that stays in cache (a single large matrix is several times slower).
        """
        texts = list(texts)
        out = np.full((len(texts), self.num_perm), 0xFFFFFFFF, dtype=np.uint32)
        if not texts:
            return out
        shingles, offsets = self.shingle_hashes(texts)
        x = (shingles >> _SHIFT32) ^ (shingles & _MASK32)
        counts = np.diff(np.append(offsets, len(x)))
        doc_of = np.repeat(np.arange(len(texts)), counts)
        buf = np.empty((min(chunk_rows, len(x)), self.num_perm), dtype=np.uint64)
        a, b = self._a[None, :], self._b[None, :]
        for s in range(0, len(x), chunk_rows):
            e = min(s + chunk_rows, len(x))
            block = buf[: e - s]
            np.multiply(x[s:e, None], a, out=block)
            block += b
            block >>= _SHIFT32
            d0, d1 = int(doc_of[s]), int(doc_of[e - 1])
            local = np.concatenate([[0], offsets[d0 + 1 : d1 + 1] - s])
            red = np.minimum.reduceat(block, local, axis=0).astype(np.uint32)
            np.minimum(out[d0 : d1 + 1], red, out=out[d0 : d1 + 1])
        return out


@lru_cache(maxsize=64)
def optimal_bands(threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive + negative areas (datasketch's rule)."""
    best, best_err = (1, num_perm), float("inf")
    xs_lo = np.linspace(0.0, threshold, 201)
    xs_hi = np.linspace(threshold, 1.0, 201)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = _trapezoid(1 - (1 - xs_lo**r) ** b, xs_lo)
            fn = _trapezoid((1 - xs_hi**r) ** b, xs_hi)
            err = fp_weight * fp + fn_weight * fn
            if err < best_err:
                best, best_err = (b, r), err
    return best


class SortedIndex:
    """A set of uint64 keys -> smallest int64 id, as sorted arrays merged LSM-style (log levels)."""

    def __init__(self) -> None:
        self.levels: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(len(k) for k, _ in self.levels)

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.levels)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """For each key the smallest id stored with it, or -1."""
        found = np.full(len(keys), -1, dtype=np.int64)
        for lk, lv in self.levels:
            pos = np.searchsorted(lk, keys)
            pos[pos >= len(lk)] = 0
            hit = lk[pos] == keys
            ids = np.where(hit, lv[pos], -1)
            better = hit & ((found < 0) | (ids < found))
            found[better] = ids[better]
        return found

    def add(self, keys: np.ndarray, ids: np.ndarray) -> None:
        if len(keys) == 0:
            return
        self.levels.append(_unique_min(keys, ids))
        while len(self.levels) > 1 and len(self.levels[-2][0]) <= 2 * len(self.levels[-1][0]):
            k2, v2 = self.levels.pop()
            k1, v1 = self.levels.pop()
            self.levels.append(_unique_min(np.concatenate([k1, k2]), np.concatenate([v1, v2])))


def _unique_min(keys: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((ids, keys))
    k, v = keys[order], ids[order]
    first = np.ones(len(k), dtype=bool)
    first[1:] = k[1:] != k[:-1]
    return k[first], v[first]


def _first_in_batch(keys: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """For each position, the smallest id in the batch with the same key."""
    uniq, inverse = np.unique(keys, return_inverse=True)
    first = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inverse, ids)
    return first[inverse]


class LSHDeduper:
    """Streaming near-duplicate detector: feed signature batches, get "is a duplicate" flags.

    A record is a duplicate when one of its LSH bands collides with an earlier record's and
    (when ``verify``) the two signatures' estimated Jaccard similarity is at least the threshold
    less two standard errors of the estimate (``cutoff``).
    """

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, *, verify: bool = True,
                 bands: int | None = None, seed: int = 7) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self.num_perm = num_perm
        self.verify = verify
        # a candidate is kept as a duplicate when its estimated Jaccard is within two standard
        # errors of the threshold: the estimate of a pair exactly at the threshold has a standard
        # error of sqrt(t(1-t)/num_perm), and rejecting on the raw estimate would lose about half
        # of the pairs just above it (LSH alone, as datasketch, keeps every candidate)
        self.cutoff = threshold - 2.0 * math.sqrt(threshold * (1.0 - threshold) / num_perm)
        if bands is None:
            self.bands, self.rows = optimal_bands(threshold, num_perm)
        else:
            self.bands, self.rows = bands, num_perm // bands
        rng = np.random.default_rng(seed)
        self._band_mix = (rng.integers(0, 2**63, size=(self.rows,), dtype=np.uint64) << np.uint64(1)) | np.uint64(1)
        self._band_salt = rng.integers(0, 2**63, size=(self.bands,), dtype=np.uint64)
        self.index = SortedIndex()
        self._sigs = np.empty((0, num_perm), dtype=np.uint32)
        self.count = 0

    def band_keys(self, sigs: np.ndarray) -> np.ndarray:
        used = sigs[:, : self.bands * self.rows].astype(np.uint64).reshape(len(sigs), self.bands, self.rows)
        return (used * self._band_mix).sum(axis=2, dtype=np.uint64) ^ self._band_salt

    def _store(self, sigs: np.ndarray) -> None:
        need = self.count + len(sigs)
        if need > len(self._sigs):
            grown = np.empty((max(need, 2 * len(self._sigs), 1024), self.num_perm), dtype=np.uint32)
            grown[: self.count] = self._sigs[: self.count]
            self._sigs = grown
        self._sigs[self.count : need] = sigs

    def add_batch(self, sigs: np.ndarray, *, skip: np.ndarray | None = None) -> np.ndarray:
        """Flags (bool array): which rows duplicate an earlier row. ``skip`` rows are ignored."""
        n = len(sigs)
        ids = np.arange(self.count, self.count + n, dtype=np.int64)
        keys = self.band_keys(sigs)  # (n, bands)
        flat_keys = keys.reshape(-1)
        flat_ids = np.repeat(ids, self.bands)
        if skip is not None and skip.any():
            live = ~np.repeat(skip, self.bands)
        else:
            live = np.ones(len(flat_keys), dtype=bool)
        cand = self.index.lookup(flat_keys)
        within = np.full(len(flat_keys), -1, dtype=np.int64)
        if live.any():
            within[live] = _first_in_batch(flat_keys[live], flat_ids[live])
        within[within >= flat_ids] = -1
        cand = np.where((cand < 0) | ((within >= 0) & (within < cand)), within, cand).reshape(n, self.bands)
        if self.verify:
            self._store(sigs)
            has = cand >= 0
            est = np.zeros(cand.shape, dtype=np.float64)
            if has.any():
                rows, cols = np.nonzero(has)
                other = self._sigs[cand[rows, cols]]
                est[rows, cols] = (other == sigs[rows]).mean(axis=1)
            dup = (est >= self.cutoff).any(axis=1)
        else:
            dup = (cand >= 0).any(axis=1)
        if skip is not None:
            dup &= ~skip
        self.index.add(flat_keys[live], flat_ids[live])
        self.count += n
        return dup


class ExactDeduper:
    """Streaming exact-duplicate detector over 64-bit hashes."""

    def __init__(self) -> None:
        self.index = SortedIndex()
        self.count = 0

    def add_batch(self, hashes: np.ndarray) -> np.ndarray:
        ids = np.arange(self.count, self.count + len(hashes), dtype=np.int64)
        earlier = self.index.lookup(hashes) >= 0
        within = _first_in_batch(hashes, ids) < ids
        self.index.add(hashes, ids)
        self.count += len(hashes)
        return earlier | within


# --- decontamination -----------------------------------------------------------------------------------


class Decontaminator:
    """Flags records whose text overlaps a benchmark's task texts, or that carry a canary.

    A record is contaminated by task T when at least ``threshold`` of T's word ``ngram``-grams
    occur in the record's text (a task shorter than ``ngram`` words must occur verbatim).
    """

    def __init__(self, tasks: Iterable[tuple[str, str]], *, ngram: int = 8, threshold: float = 0.5,
                 canaries: Iterable[str] = (CANARY_PREFIX,), scope: str = "trajectory") -> None:
        self.ngram = ngram
        self.threshold = threshold
        self.scope = scope
        self.canaries = [c for c in canaries if c]
        self.grams: dict[str, list[int]] = {}
        self.sizes: list[int] = []
        self.short: list[tuple[str, int]] = []
        self.task_ids: list[str] = []
        for task_id, text in tasks:
            idx = len(self.task_ids)
            self.task_ids.append(task_id)
            toks = tokens(text)
            if not toks:
                self.sizes.append(0)
                continue
            if len(toks) < ngram:
                self.short.append((" " + " ".join(toks) + " ", idx))
                self.sizes.append(0)
                continue
            grams = {" ".join(toks[i : i + ngram]) for i in range(len(toks) - ngram + 1)}
            self.sizes.append(len(grams))
            for g in grams:
                self.grams.setdefault(g, []).append(idx)
        self.hits: Counter[str] = Counter()

    @classmethod
    def from_pack(cls, ref: str | Path, **kwargs: Any) -> Decontaminator:
        """Decontaminate against every task of a pack (a registered name or a path)."""
        from agentsynth_kernel import load_pack

        pack = load_pack(ref, validate=False)
        return cls(((t.id, t.instruction) for t in pack.tasks), **kwargs)

    def check_text(self, text: str) -> str | None:
        """A reason (``task:<id>`` or ``canary``) if contaminated, else ``None``."""
        for canary in self.canaries:
            if canary in text:
                return "canary"
        toks = tokens(text)
        if self.short:
            padded = " " + " ".join(toks) + " "
            for needle, idx in self.short:
                if needle in padded:
                    return f"task:{self.task_ids[idx]}"
        if self.grams and len(toks) >= self.ngram:
            counts: Counter[int] = Counter()
            n = self.ngram
            seen: set[str] = set()
            for i in range(len(toks) - n + 1):
                g = " ".join(toks[i : i + n])
                if g in seen:
                    continue
                seen.add(g)
                for idx in self.grams.get(g, ()):
                    counts[idx] += 1
            for idx, c in counts.most_common():
                if c >= self.threshold * self.sizes[idx]:
                    return f"task:{self.task_ids[idx]}"
                break
        return None

    def check(self, result: EpisodeResult) -> str | None:
        reason = self.check_text(result_text(result, scope=self.scope))
        if reason is not None:
            self.hits[reason] += 1
        return reason


# --- the streaming filter --------------------------------------------------------------------------------


class Deduplicator:
    """Drop exact and near duplicates (and contaminated records) from a stream of EpisodeResults."""

    def __init__(self, *, exact: bool = True, near: bool = True, threshold: float = 0.8, num_perm: int = 128,
                 ngram: int = 5, scope: str = "trajectory", verify: bool = True, batch_size: int = 512,
                 decontaminator: Decontaminator | None = None, seed: int = 1) -> None:
        if scope not in ("trajectory", "instruction"):
            raise AgentsynthError(f"dedup: scope: expected trajectory or instruction, got {scope!r}")
        if not 0.0 < threshold <= 1.0:
            raise AgentsynthError(f"dedup: threshold: must be in (0, 1], got {threshold}")
        self.scope = scope
        self.batch_size = batch_size
        self.exact = ExactDeduper() if exact else None
        self.hasher = MinHasher(num_perm, ngram, seed) if near else None
        self.near = LSHDeduper(threshold, num_perm, verify=verify) if near else None
        self.decontaminator = decontaminator
        self.counts: Counter[str] = Counter()

    def filter(self, results: Iterable[EpisodeResult]) -> Iterator[EpisodeResult]:
        batch: list[EpisodeResult] = []
        for result in results:
            batch.append(result)
            if len(batch) >= self.batch_size:
                yield from self._batch(batch)
                batch = []
        if batch:
            yield from self._batch(batch)

    def _batch(self, batch: list[EpisodeResult]) -> Iterator[EpisodeResult]:
        self.counts["seen"] += len(batch)
        texts = [result_text(r, scope=self.scope) for r in batch]
        drop = np.zeros(len(batch), dtype=bool)
        if self.decontaminator is not None:
            for i, r in enumerate(batch):
                if self.decontaminator.check(r) is not None:
                    drop[i] = True
                    self.counts["contaminated"] += 1
        if self.exact is not None:
            hashes = np.fromiter((exact_hash(t) for t in texts), dtype=np.uint64, count=len(texts))
            dup = self.exact.add_batch(hashes) & ~drop
            self.counts["exact"] += int(dup.sum())
            drop |= dup
        if self.near is not None and self.hasher is not None:
            sigs = self.hasher.signatures(texts)
            dup = self.near.add_batch(sigs, skip=drop)
            self.counts["near"] += int(dup.sum())
            drop |= dup
        for r, d in zip(batch, drop, strict=True):
            if not d:
                self.counts["kept"] += 1
                yield r

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: self.counts.get(k, 0) for k in ("seen", "exact", "near", "contaminated", "kept")}
        if self.near is not None:
            out["lsh"] = {"threshold": self.near.threshold, "num_perm": self.near.num_perm,
                          "bands": self.near.bands, "rows": self.near.rows}
        if self.decontaminator is not None:
            out["contamination"] = dict(self.decontaminator.hits)
        return out
