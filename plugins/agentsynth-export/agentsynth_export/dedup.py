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
import operator
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from agentsynth_kernel import AgentsynthError, EpisodeResult

from .common import CANARY_PREFIX, normalize, result_text, tokens

_MASK32 = np.uint64(0xFFFFFFFF)
_trapezoid: Any = getattr(np, "trapezoid", None) or getattr(np, "trapz")  # noqa: B009 - numpy < 2
_SHIFT32 = np.uint64(32)


_TOKEN_CACHE: dict[str, int] = {}


def _token_hashes(words: list[str]) -> np.ndarray:
    """Stable 64-bit hashes of words (BLAKE2b, memoised; lookups run in C via ``itemgetter``)."""
    cache = _TOKEN_CACHE
    if len(words) < 2:  # itemgetter of one key returns the value, not a tuple
        _remember(words, cache)
        return np.fromiter(map(cache.__getitem__, words), dtype=np.uint64, count=len(words))
    get = operator.itemgetter(*words)
    try:  # every word seen before: one C call, no set of the batch's words
        return np.array(get(cache), dtype=np.uint64)
    except KeyError:
        _remember(words, cache)
        return np.array(get(cache), dtype=np.uint64)


def _remember(words: list[str], cache: dict[str, int]) -> None:
    unique = set(words)
    # not set.difference(cache.keys()): that walks the whole cache (up to 2M words) on every call
    missing = [w for w in unique if w not in cache]
    if not missing:
        return
    if len(cache) + len(missing) > 2_000_000:
        cache.clear()
        missing = list(unique)
    blake = hashlib.blake2b
    for w in missing:
        cache[w] = int.from_bytes(blake(w.encode(), digest_size=8).digest(), "little")


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
        """A ``(len(texts), num_perm)`` uint32 array of signatures."""
        return self.sketch(texts, chunk_rows=chunk_rows)[0]

    def sketch(self, texts: Iterable[str], *, chunk_rows: int = 1024) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Signatures, and the shingle hashes with each text's offset (for exact verification).

        The permutations are applied to ``chunk_rows`` shingles at a time into a reused
        buffer that stays in cache (a single large matrix is several times slower).
        """
        texts = list(texts)
        out = np.full((len(texts), self.num_perm), 0xFFFFFFFF, dtype=np.uint32)
        if not texts:
            return out, np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
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
        return out, shingles, offsets


@lru_cache(maxsize=64)
def optimal_bands(threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimising the weighted false positive + negative areas (datasketch's rule).

    Right for LSH used alone, where every candidate is removed unchecked; with exact verification
    a missed pair is lost for good while a false candidate only costs a check, so
    :func:`recall_bands` is the default.
    """
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


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """The LSH S-curve: the chance that a pair of this Jaccard similarity shares at least one band."""
    return float(1.0 - (1.0 - similarity**rows) ** bands)


@lru_cache(maxsize=64)
def recall_bands(threshold: float, num_perm: int, recall: float = 0.97) -> tuple[int, int]:
    """(bands, rows) for verified LSH: a pair exactly at ``threshold`` becomes a candidate with
    probability >= ``recall`` (pairs above it more often: the S-curve rises), and among the
    choices that reach it, the fewest candidates below the threshold (the area under the
    S-curve on ``[0, threshold]``), which are the checks exact verification pays for.
    Falls back to the highest probability at the threshold when no choice reaches ``recall``."""
    xs = np.linspace(0.0, threshold, 201)
    best: tuple[int, int] | None = None
    best_area = float("inf")
    fallback, fallback_p = (num_perm, 1), -1.0
    for r in range(1, num_perm + 1):
        b = num_perm // r  # for a given row count, more bands only raise the curve
        p = candidate_probability(threshold, b, r)
        if p > fallback_p:
            fallback, fallback_p = (b, r), p
        if p < recall:
            continue
        area = float(_trapezoid(1 - (1 - xs**r) ** b, xs))
        if area < best_area:
            best, best_area = (b, r), area
    return best or fallback


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


class BucketIndex:
    """LSH buckets: uint64 band key -> the earliest ``cap`` ids stored with it (sorted arrays
    merged LSM-style). Keeping several ids per bucket matters once candidates are verified: the
    earliest record of a bucket may be below the threshold while a later one is above it (a
    near duplicate of a near duplicate). ``cap`` bounds the checks per bucket and the memory of a
    bucket that a boilerplate band fills."""

    def __init__(self, cap: int = 8) -> None:
        if cap < 1:
            raise ValueError("cap must be >= 1")
        self.cap = cap
        self.levels: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(len(k) for k, _ in self.levels)

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.levels)

    def add(self, keys: np.ndarray, ids: np.ndarray) -> None:
        if len(keys) == 0:
            return
        self.levels.append(self._capped(keys, ids))
        while len(self.levels) > 1 and len(self.levels[-2][0]) <= 2 * len(self.levels[-1][0]):
            k2, v2 = self.levels.pop()
            k1, v1 = self.levels.pop()
            self.levels.append(self._capped(np.concatenate([k1, k2]), np.concatenate([v1, v2])))

    def _capped(self, keys: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.lexsort((ids, keys))
        k, v = keys[order], ids[order]
        if len(k) > 1:
            start = np.ones(len(k), dtype=bool)
            start[1:] = k[1:] != k[:-1]
            group_start = np.maximum.accumulate(np.where(start, np.arange(len(k)), 0))
            keep = np.arange(len(k)) - group_start < self.cap
            if not keep.all():
                k, v = k[keep], v[keep]
        return k, v

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (query position, stored id) pair whose keys are equal."""
        positions: list[np.ndarray] = []
        found: list[np.ndarray] = []
        for lk, lv in self.levels:
            lo = np.searchsorted(lk, keys)
            lo_c = np.minimum(lo, len(lk) - 1)
            q = np.nonzero(lk[lo_c] == keys)[0]
            if len(q) == 0:
                continue
            hi = np.searchsorted(lk, keys[q], side="right")
            counts = hi - lo[q]
            total = int(counts.sum())
            within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
            positions.append(np.repeat(q, counts))
            found.append(lv[np.repeat(lo[q], counts) + within])
        if not positions:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        return np.concatenate(positions), np.concatenate(found).astype(np.int64, copy=False)


class ShingleStore:
    """Every record's shingle hashes (uint64), kept for exact verification of LSH candidates.

    In memory up to ``memory_bytes``, then spilled to an anonymous temporary file in ``spill_dir``
    (deleted when closed or when the process exits), so the memory of a long stream stays
    bounded: 8 bytes per record for its offsets, plus the in-memory window. Reads of spilled
    records are positioned reads of only the candidate's bytes.
    """

    def __init__(self, memory_bytes: int = 16 << 20, spill_dir: str | Path | None = None) -> None:
        self.memory_elems = max(1, memory_bytes // 8)
        self.spill_dir = spill_dir
        self._bounds = np.zeros(1025, dtype=np.int64)  # record i: elements bounds[i] .. bounds[i+1]
        self.count = 0
        self._buf = np.empty(0, dtype=np.uint64)
        self._used = 0  # elements in the memory window (the records after the spilled ones)
        self.spilled = 0  # elements in the file
        self._file: Any = None

    @property
    def nbytes(self) -> int:
        """Memory held (offsets + window), not the spilled bytes on disk."""
        return int(self._bounds.nbytes + self._buf.nbytes)

    @property
    def spilled_bytes(self) -> int:
        return self.spilled * 8

    def append(self, shingles: np.ndarray, offsets: np.ndarray) -> None:
        """Records given as one flat array and each record's start offset into it."""
        n = len(offsets)
        if self.count + n + 1 > len(self._bounds):
            grown = np.zeros(max(2 * len(self._bounds), self.count + n + 1), dtype=np.int64)
            grown[: self.count + 1] = self._bounds[: self.count + 1]
            self._bounds = grown
        base = self._bounds[self.count]
        ends = np.append(offsets[1:], len(shingles)) if n else offsets
        self._bounds[self.count + 1 : self.count + n + 1] = base + ends
        self.count += n
        size = len(shingles)
        if self._used + size > self.memory_elems:
            self._spill(self._buf[: self._used])
            self._used = 0
        if size > self.memory_elems:
            self._spill(shingles)
            return
        if self._used + size > len(self._buf):
            grown_buf = np.empty(min(self.memory_elems, max(2 * len(self._buf), self._used + size, 4096)),
                                 dtype=np.uint64)
            grown_buf[: self._used] = self._buf[: self._used]
            self._buf = grown_buf
        self._buf[self._used : self._used + size] = shingles
        self._used += size

    def _spill(self, data: np.ndarray) -> None:
        if len(data) == 0:
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="agentsynth-shingles-", dir=self.spill_dir, buffering=0)
        view = np.ascontiguousarray(data, dtype=np.uint64).view(np.uint8).data
        fd = self._file.fileno()
        written = 0
        while written < len(view):
            written += os.pwrite(fd, view[written:], self.spilled * 8 + written)
        self.spilled += len(data)

    def get(self, i: int) -> np.ndarray:
        start, end = int(self._bounds[i]), int(self._bounds[i + 1])
        if start >= self.spilled:
            return self._buf[start - self.spilled : end - self.spilled]
        data = os.pread(self._file.fileno(), (end - start) * 8, start * 8)
        return np.frombuffer(data, dtype=np.uint64)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two shingle-hash multisets taken as sets."""
    ua, ub = np.unique(a), np.unique(b)
    inter = len(np.intersect1d(ua, ub, assume_unique=True))
    return inter / (len(ua) + len(ub) - inter)


class LSHDeduper:
    """Streaming near-duplicate detector: feed batches, get "is a duplicate" flags.

    A record is a candidate duplicate of an earlier one when one of their LSH bands collides;
    with ``verify`` (the default) and the records' shingles given, a candidate counts only when
    the exact Jaccard similarity of the two shingle sets is at least the threshold, so no pair
    below it is ever removed, and the bands are chosen for recall (:func:`recall_bands`).
    ``last_matches`` holds, for the last batch, the earlier record each duplicate matched (-1 when
    none), so a caller can show or re-check the pair. Without shingles (signatures only) a
    candidate is kept when the signatures' estimated similarity is within two standard errors of
    the threshold; ``verify=False`` keeps every candidate (LSH alone, as datasketch).
    """

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, *, verify: bool = True,
                 bands: int | None = None, seed: int = 7, recall: float = 0.97, bucket_cap: int = 8,
                 max_checks: int = 32, memory_bytes: int = 16 << 20, spill_dir: str | Path | None = None) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self.num_perm = num_perm
        self.verify = verify
        # the estimate of a pair exactly at the threshold has a standard error of sqrt(t(1-t)/num_perm)
        self.cutoff = threshold - 2.0 * math.sqrt(threshold * (1.0 - threshold) / num_perm)
        if bands is not None:
            self.bands, self.rows = bands, num_perm // bands
        elif verify:
            self.bands, self.rows = recall_bands(threshold, num_perm, recall)
        else:
            self.bands, self.rows = optimal_bands(threshold, num_perm)
        self.max_checks = max_checks
        rng = np.random.default_rng(seed)
        self._band_mix = (rng.integers(0, 2**63, size=(self.rows,), dtype=np.uint64) << np.uint64(1)) | np.uint64(1)
        # one index per band: a band's keys never meet another's, and the LSM merges of a small
        # index need a fraction of the transient memory of one big one
        self.indexes = [BucketIndex(bucket_cap) for _ in range(self.bands)]
        self._id_dtype = np.int32  # 2**31 records; 12 bytes per bucket entry
        self.shingles = ShingleStore(memory_bytes, spill_dir)
        self._sigs = np.empty((0, num_perm), dtype=np.uint32)  # only for signature-only verification
        self.count = 0
        self.candidates = 0  # candidate pairs looked at
        self.checks = 0  # exact Jaccard computations
        self.last_matches = np.empty(0, dtype=np.int64)

    def band_keys(self, sigs: np.ndarray) -> np.ndarray:
        used = sigs[:, : self.bands * self.rows].astype(np.uint64).reshape(len(sigs), self.bands, self.rows)
        keys: np.ndarray = (used * self._band_mix).sum(axis=2, dtype=np.uint64)
        return keys

    def _store_sigs(self, sigs: np.ndarray) -> None:
        need = self.count + len(sigs)
        if need > len(self._sigs):
            grown = np.empty((max(need, 2 * len(self._sigs), 1024), self.num_perm), dtype=np.uint32)
            grown[: self.count] = self._sigs[: self.count]
            self._sigs = grown
        self._sigs[self.count : need] = sigs

    def add_batch(self, sigs: np.ndarray, shingles: np.ndarray | None = None, offsets: np.ndarray | None = None, *,
                  skip: np.ndarray | None = None) -> np.ndarray:
        """Flags (bool array): which rows duplicate an earlier row (of this batch or an earlier one).

        ``shingles``/``offsets`` are the batch's shingle hashes as :meth:`MinHasher.sketch` returns
        them; ``skip`` rows (already dropped for another reason) are neither flagged nor indexed.
        """
        n = len(sigs)
        ids = np.arange(self.count, self.count + n, dtype=np.int64)
        live_rows = np.ones(n, dtype=bool) if skip is None else ~skip
        exact = self.verify and shingles is not None and offsets is not None
        if exact:
            assert shingles is not None and offsets is not None
            if skip is not None and skip.any():  # dropped rows keep their id but store no shingles
                counts = np.diff(np.append(offsets, len(shingles)))
                keep = np.repeat(live_rows, counts)
                new_counts = np.where(live_rows, counts, 0)
                offsets = np.zeros(n, dtype=np.int64)
                np.cumsum(new_counts[:-1], out=offsets[1:])
                shingles = shingles[keep]
            self.shingles.append(shingles, offsets)
        elif self.verify:
            self._store_sigs(sigs)
        keys = self.band_keys(sigs)  # (n, bands)
        live_ids = ids[live_rows].astype(self._id_dtype)
        found_rows: list[np.ndarray] = []
        found_ids: list[np.ndarray] = []
        for band, index in enumerate(self.indexes):
            column = keys[:, band]
            # indexed first, so that a lookup also finds the earlier rows of this batch
            index.add(column[live_rows], live_ids)
            pos, cand = index.lookup(column)
            earlier = (cand < ids[pos]) & live_rows[pos]
            found_rows.append(pos[earlier])
            found_ids.append(cand[earlier])
        rows = np.concatenate(found_rows)
        cand = np.concatenate(found_ids)
        matches = np.full(n, -1, dtype=np.int64)
        if len(rows):
            # one (row, candidate) pair per candidate, most shared bands first: likelier to pass
            code = (rows.astype(np.int64) << 40) | cand
            pairs, shared = np.unique(code, return_counts=True)
            prow, pcand = pairs >> 40, pairs & ((1 << 40) - 1)
            order = np.lexsort((pcand, -shared, prow))
            prow, pcand = prow[order], pcand[order]
            self.candidates += len(prow)
            if not self.verify:
                first = np.ones(len(prow), dtype=bool)
                first[1:] = prow[1:] != prow[:-1]
                matches[prow[first]] = pcand[first]
            elif exact:
                self._verify_exact(prow, pcand, ids, matches)
            else:
                est = (self._sigs[pcand] == sigs[prow]).mean(axis=1)
                ok = est >= self.cutoff
                for r, c in zip(prow[ok][::-1].tolist(), pcand[ok][::-1].tolist(), strict=True):
                    matches[r] = c  # reversed: the first passing candidate of a row wins
        self.count += n
        self.last_matches = matches
        return matches >= 0

    def _verify_exact(self, prow: np.ndarray, pcand: np.ndarray, ids: np.ndarray, matches: np.ndarray) -> None:
        threshold = self.threshold
        bounds = np.flatnonzero(np.diff(prow)) + 1
        starts = np.concatenate([[0], bounds]).tolist()
        ends = np.concatenate([bounds, [len(prow)]]).tolist()
        get = self.shingles.get
        for s, e in zip(starts, ends, strict=True):
            row = int(prow[s])
            mine = np.unique(get(int(ids[row])))
            for c in pcand[s : min(e, s + self.max_checks)].tolist():
                other = np.unique(get(c))
                self.checks += 1
                inter = len(np.intersect1d(mine, other, assume_unique=True))
                if inter / (len(mine) + len(other) - inter) >= threshold:
                    matches[row] = c
                    break

    @property
    def nbytes(self) -> int:
        """Memory held by the index and the shingle window (the spilled shingles are on disk)."""
        return self.index_nbytes + self.shingles.nbytes + self._sigs.nbytes

    @property
    def index_nbytes(self) -> int:
        return sum(index.nbytes for index in self.indexes)

    def close(self) -> None:
        self.shingles.close()


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
        try:
            for result in results:
                batch.append(result)
                if len(batch) >= self.batch_size:
                    yield from self._batch(batch)
                    batch = []
            if batch:
                yield from self._batch(batch)
        finally:
            if self.near is not None:
                self.near.close()  # the spilled shingles (a temporary file) go

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
            sigs, shingles, offsets = self.hasher.sketch(texts)
            dup = self.near.add_batch(sigs, shingles, offsets, skip=drop)
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
                          "bands": self.near.bands, "rows": self.near.rows,
                          "verified": "exact" if self.near.verify else "none",
                          "candidates": self.near.candidates, "checks": self.near.checks}
        if self.decontaminator is not None:
            out["contamination"] = dict(self.decontaminator.hits)
        return out
