from __future__ import annotations

import json
import random

import numpy as np
import pytest

from agentsynth_export.common import CANARY_PREFIX, tokens
from agentsynth_export.dedup import (
    BucketIndex,
    Decontaminator,
    Deduplicator,
    LSHDeduper,
    MinHasher,
    ShingleStore,
    SortedIndex,
    candidate_probability,
    optimal_bands,
    recall_bands,
)
from agentsynth_export.synthetic import planted_corpus, score
from agentsynth_kernel import RunStore
from conftest import agentsynth, make_result, write_run

WORDS = [f"w{i}" for i in range(5000)]


def doc(rng: random.Random, n: int = 60) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def jaccard(a: str, b: str, n: int = 5) -> float:
    def sh(t):
        toks = tokens(t)
        return {tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)}

    x, y = sh(a), sh(b)
    return len(x & y) / len(x | y)


def test_minhash_estimates_jaccard():
    rng = random.Random(0)
    hasher = MinHasher(num_perm=256, ngram=5)
    base = doc(rng, 200)
    words = base.split()
    for changes in (0, 5, 20, 60):
        other = words[:]
        for i in rng.sample(range(len(words)), changes):
            other[i] = "zz" + str(i)
        b = " ".join(other)
        sigs = hasher.signatures([base, b])
        est = float((sigs[0] == sigs[1]).mean())
        assert est == pytest.approx(jaccard(base, b), abs=0.08)
    # signatures do not depend on the batch a text is in
    a = hasher.signatures([base])
    c = hasher.signatures([doc(rng), base, doc(rng)], chunk_rows=50)  # documents span chunk boundaries
    assert (a[0] == c[1]).all()


def test_optimal_bands_fit_the_threshold():
    for threshold in (0.5, 0.8, 0.9):
        b, r = optimal_bands(threshold, 128)
        assert b * r <= 128
        assert abs((1 / b) ** (1 / r) - threshold) < 0.12


def test_recall_bands_reach_the_recall_at_the_threshold():
    for threshold in (0.5, 0.7, 0.8, 0.9):
        b, r = recall_bands(threshold, 128)
        assert b * r <= 128
        assert candidate_probability(threshold, b, r) >= 0.97
        # the S-curve rises: pairs above the threshold are found at least as often
        assert candidate_probability(min(1.0, threshold + 0.05), b, r) >= candidate_probability(threshold, b, r)
    # datasketch's rule at 0.8 leaves most pairs at the threshold unfound: the recall gap of issue #21
    b, r = optimal_bands(0.8, 128)
    assert candidate_probability(0.8, b, r) < 0.6


def _dedup_corpus(corpus, **kwargs):
    hasher = MinHasher(128, 5)
    lsh = LSHDeduper(corpus.threshold, 128, **kwargs)
    matches: dict[int, int] = {}
    for s in range(0, len(corpus.texts), 1000):
        sigs, shingles, offsets = hasher.sketch(corpus.texts[s : s + 1000])
        flags = lsh.add_batch(sigs, shingles, offsets)
        for k in np.flatnonzero(flags).tolist():
            matches[s + k] = int(lsh.last_matches[k])
    lsh.close()
    return matches, lsh


@pytest.fixture(scope="module")
def corpus():
    return planted_corpus(5000, seed=3)


def test_verified_lsh_recall_and_no_pair_below_the_threshold(corpus):
    sims = corpus.similarities()
    # the corpus is a real test: many planted pairs just below and just above the threshold
    assert sum(0.7 <= v < 0.8 for v in sims.values()) >= 80
    assert sum(0.8 <= v < 0.9 for v in sims.values()) >= 80
    assert len(corpus.truth) >= 150
    matches, lsh = _dedup_corpus(corpus)
    result = score(corpus, matches)  # truth and pairs re-checked with Python sets of the texts
    assert result["recall"] >= 0.95, result
    assert result["precision"] == 1.0 and result["flagged_below_threshold"] == 0, result
    assert lsh.checks > len(matches)  # candidates below the threshold were looked at and kept
    # the same detector without verification removes pairs below the threshold
    unverified, _ = _dedup_corpus(corpus, verify=False, bands=lsh.bands)
    assert score(corpus, unverified)["flagged_below_threshold"] > 0
    # and datasketch's bands (r=13) miss a large share of the true pairs, even verified
    b, _ = optimal_bands(0.8, 128)
    narrow, _ = _dedup_corpus(corpus, bands=b)
    assert score(corpus, narrow)["recall"] < 0.9


def test_shingles_spill_to_disk_with_the_same_result(corpus, tmp_path):
    texts = corpus.texts[:2000]
    small = type(corpus)(texts, corpus.families[:2000], {}, {}, corpus.threshold, corpus.ngram)
    in_memory, _ = _dedup_corpus(small)
    spilled, lsh = _dedup_corpus(small, memory_bytes=64 << 10, spill_dir=tmp_path)
    assert spilled == in_memory and len(spilled) > 20
    assert lsh.shingles.spilled_bytes > 100_000 and lsh.shingles.nbytes < 200_000
    assert list(tmp_path.iterdir()) == []  # the spill file is anonymous and closed


def test_shingle_store_round_trip_across_the_window(tmp_path):
    store = ShingleStore(memory_bytes=800, spill_dir=tmp_path)
    rng = np.random.default_rng(0)
    records = [rng.integers(0, 2**63, size=int(rng.integers(1, 60)), dtype=np.uint64) for _ in range(200)]
    for s in range(0, 200, 7):
        chunk = records[s : s + 7]
        offsets = np.cumsum([0] + [len(r) for r in chunk[:-1]])
        store.append(np.concatenate(chunk), offsets)
    assert store.spilled > 0
    for i, rec in enumerate(records):
        assert (store.get(i) == rec).all()
    store.close()


def test_bucket_index_returns_the_earliest_ids_per_key():
    idx = BucketIndex(cap=3)
    rng = np.random.default_rng(1)
    truth: dict[int, list[int]] = {}
    next_id = 0
    for _ in range(30):
        keys = rng.integers(0, 200, size=40).astype(np.uint64)
        ids = np.arange(next_id, next_id + 40)
        next_id += 40
        for k, i in zip(keys.tolist(), ids.tolist(), strict=True):
            truth.setdefault(k, []).append(i)
        idx.add(keys, ids)
    q = np.arange(0, 250, dtype=np.uint64)
    pos, found = idx.lookup(q)
    got: dict[int, set[int]] = {}
    for p, i in zip(pos.tolist(), found.tolist(), strict=True):
        got.setdefault(p, set()).add(i)
    for k in range(250):
        want = truth.get(k, [])
        assert want[:3] == sorted(got.get(k, set()))[:3]  # the earliest three are always there
        assert len(got.get(k, set())) <= 3 * len(idx.levels)


def test_sorted_index_keeps_smallest_id_across_levels():
    idx = SortedIndex()
    rng = np.random.default_rng(0)
    truth: dict[int, int] = {}
    next_id = 0
    for _ in range(40):
        keys = rng.integers(0, 500, size=30).astype(np.uint64)
        ids = np.arange(next_id, next_id + 30)
        next_id += 30
        for k, i in zip(keys.tolist(), ids.tolist(), strict=True):
            truth.setdefault(k, i)
        idx.add(keys, ids)
    assert len(idx.levels) < 10
    q = np.arange(0, 600, dtype=np.uint64)
    assert idx.lookup(q).tolist() == [truth.get(k, -1) for k in range(600)]


def test_near_duplicates_found_within_and_across_batches():
    rng = random.Random(1)
    originals = [doc(rng) for _ in range(300)]
    near = []
    for text in originals[:100]:
        words = text.split()
        words[rng.randrange(len(words))] = "changed"
        near.append(" ".join(words))
    texts = originals + near
    order = list(range(len(texts)))
    hasher = MinHasher()
    lsh = LSHDeduper(0.7)
    flags = np.concatenate([lsh.add_batch(hasher.signatures([texts[i] for i in order[s : s + 64]]))
                            for s in range(0, len(order), 64)])
    assert flags[:300].sum() == 0  # distinct random documents are kept
    assert flags[300:].sum() >= 97  # one changed word in 60 is a near duplicate


def test_deduplicator_on_episode_results_exact_near_and_threshold():
    rng = random.Random(2)
    texts = [doc(rng, 40) for _ in range(20)]
    results = [make_result(f"t{i}", 0, True, instruction=t) for i, t in enumerate(texts)]
    results.append(make_result("t0", 1, True, instruction=texts[0].upper() + "  !!"))  # exact after normalization
    words = texts[1].split()
    words[5] = "different"
    results.append(make_result("t1", 1, True, instruction=" ".join(words)))  # near
    d = Deduplicator(batch_size=8)
    kept = list(d.filter(results))
    assert len(kept) == 20 and [r.key for r in kept] == [r.key for r in results[:20]]
    assert d.report()["exact"] == 1 and d.report()["near"] == 1
    strict = Deduplicator(threshold=0.99)
    assert len(list(strict.filter(results))) == 21  # only the exact one at a 0.99 threshold
    assert Deduplicator(near=False).report()["seen"] == 0


def test_decontamination_by_ngram_overlap_and_canary():
    decon = Decontaminator(
        [("bench/q1", "Find the three customers with the highest total order value in March"),
         ("bench/short", "reverse the list")],
        ngram=5, threshold=0.5,
    )
    assert decon.check_text("Please find the three customers with the highest total order value in March 2024.") == "task:bench/q1"
    assert decon.check_text("Find the customers in March") is None
    assert decon.check_text("then reverse the list twice") == "task:bench/short"
    assert decon.check_text("reverse the listing") is None
    assert decon.check_text(f"leaked {CANARY_PREFIX}1234") == "canary"
    clean = make_result("ok", 0, True, instruction="Add two numbers")
    dirty = make_result("bad", 0, True, instruction="Find the three customers with the highest total order value in March")
    d = Deduplicator(exact=False, near=False, decontaminator=decon, scope="instruction")
    assert [r.task_id for r in d.filter([clean, dirty])] == ["ok"]
    assert d.report()["contamination"] == {"task:bench/q1": 1}


def test_dedup_command_writes_a_new_run(tmp_path):
    pack = tmp_path / "bench"
    pack.mkdir()
    (pack / "pack.yaml").write_text(
        "id: bench\nenvironment: {type: whatever}\ntasks:\n"
        "  - id: leak\n    instruction: Count the rows of the orders table whose status is shipped\n"
    )
    rs = [make_result("a", 0, True), make_result("a", 1, True), make_result("b", 0, True),
          make_result("c", 0, True, instruction="Count the rows of the orders table whose status is shipped"),
          make_result("d", 0, False, instruction="Delete every key starting with tmp_ and report how many were removed")]
    rs[2] = make_result("b", 0, True, instruction=rs[0].trajectory.instruction.replace("(a)", "(b)"))
    run = write_run(tmp_path / "run", rs)
    proc = agentsynth("dedup", str(run), "--decontaminate", str(pack), "--threshold", "0.65", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["seen"], report["exact"], report["near"], report["contaminated"], report["kept"]) == (5, 1, 1, 1, 2)
    out = tmp_path / "run-dedup"
    store = RunStore(out)
    assert [r.task_id for r in store.results()] == ["a", "d"]
    assert store.get_meta("dedup")["kept"] == 2 and store.get_meta("run_id") == "r123"
    store.close()
    proc = agentsynth("dedup", str(run), "--dry-run", "--no-near", "--threshold", "0.9")
    assert proc.returncode == 0 and "kept 4, exact duplicates 1, near duplicates 0" in proc.stdout
    proc = agentsynth("dedup", str(run))  # the default output exists and is full
    assert proc.returncode == 2 and "already holds 2 episodes" in proc.stderr
    proc = agentsynth("dedup", str(run), "-o", str(tmp_path / "o2"), "--decontaminate", "no-such-pack")
    assert proc.returncode == 2 and "no such pack" in proc.stderr and "Traceback" not in proc.stderr


def test_a_flood_of_similar_boilerplate_stays_linear_and_removes_nothing_below_the_threshold():
    """Hostile input: thousands of records that share most of their bands with each other, all below
    the threshold. Checks per record are capped (bucket cap, max_checks), and nothing is removed."""
    from agentsynth_export.synthetic import PlantedCorpus, jaccard

    rng = random.Random(5)
    base = [f"b{i}" for i in range(120)]
    texts = []
    for _ in range(1500):
        words = base[:]
        for pos in rng.sample(range(len(words)), 5):  # 5 of 120 words: J with another copy ~0.6-0.7
            words[pos] = f"u{rng.randrange(10**9)}"
        texts.append(" ".join(words))
    assert max(jaccard(texts[0], t) for t in texts[1:50]) < 0.8
    matches, lsh = _dedup_corpus(PlantedCorpus(texts, list(range(len(texts))), {}, {}, 0.8, 5))
    assert lsh.candidates > 10 * len(texts)  # they do collide, massively
    assert lsh.checks <= lsh.max_checks * len(texts)
    bad = [(i, j) for i, j in matches.items() if jaccard(texts[i], texts[j]) < 0.8]
    assert bad == []
