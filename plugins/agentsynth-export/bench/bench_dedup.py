"""Near-duplicate dedup: agentsynth-export's verified MinHash LSH against datasketch, same data, same run.

The corpus (``agentsynth_export.synthetic.planted_corpus``) has planted near duplicates whose true word
5-gram Jaccard similarity spreads from ~0.5 to ~0.97; the truth is computed with Python sets from the
texts. Each method runs in its own child process (so peak RSS is its own) on the same texts:

- ``agentsynth``: ``MinHasher.sketch`` + ``LSHDeduper`` at default settings (bands/rows for recall,
  candidates verified by the exact Jaccard of their shingle sets, a 16 MB shingle window, the rest spilled);
- ``agentsynth_spill``: the same with a 4 MB window (memory stays bounded however long the stream);
- ``datasketch``: ``MinHash.update_batch`` + ``MinHashLSH`` at the same threshold and ``num_perm``
  (its bands/rows), every record queried then inserted, a record flagged when the query returns
  anything (datasketch does not verify);
- ``datasketch_verified``: the same, each candidate checked with the exact Jaccard of Python shingle
  sets (what agentsynth-ai does).

Precision: a flagged record counts as correct only when the pair it was flagged for (for datasketch:
any of its candidates) has a true Jaccard >= threshold. CPU seconds are the child's ``process_time``
over the dedup alone (texts already loaded). The machine load (``os.getloadavg()``) is recorded.

Usage: python plugins/agentsynth-export/bench/bench_dedup.py [--n 100000] [--quick] [--out FILE]
(needs ``datasketch`` installed next to the plugin).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
METHODS = ("agentsynth", "agentsynth_spill", "datasketch", "datasketch_verified")


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(method: str, texts_file: str, threshold: float, num_perm: int, ngram: int) -> dict:
    """Run one method over the texts; return CPU, wall, RSS and the flagged pairs."""
    import numpy as np
    from datasketch import MinHash, MinHashLSH

    from agentsynth_export.common import tokens
    from agentsynth_export.dedup import LSHDeduper, MinHasher

    texts = json.loads(Path(texts_file).read_text())
    rss_before = _status_mb("VmRSS")  # after the imports and the texts: what remains is the method's
    t, c = time.perf_counter(), time.process_time()
    pairs: dict[int, list[int]] = {}
    extra: dict = {}
    if method.startswith("agentsynth"):
        hasher = MinHasher(num_perm, ngram)
        # default settings; _spill: a 4 MB shingle window, the rest in the spill file
        lsh = LSHDeduper(threshold, num_perm, **({"memory_bytes": 4 << 20} if method == "agentsynth_spill" else {}))
        for s in range(0, len(texts), 2048):
            sigs, shingles, offsets = hasher.sketch(texts[s : s + 2048])
            flags = lsh.add_batch(sigs, shingles, offsets)
            for k in np.flatnonzero(flags).tolist():
                pairs[s + k] = [int(lsh.last_matches[k])]
        extra = {"bands_rows": [lsh.bands, lsh.rows], "candidates": lsh.candidates, "exact_checks": lsh.checks,
                 "index_mb": round(lsh.index_nbytes / 2**20, 1), "shingle_memory_mb": round(lsh.shingles.nbytes / 2**20, 1),
                 "spilled_mb": round(lsh.shingles.spilled_bytes / 2**20, 1)}
        lsh.close()
    else:
        verified = method == "datasketch_verified"
        index = MinHashLSH(threshold=threshold, num_perm=num_perm)
        sets: list[set[bytes]] = []
        for i, text in enumerate(texts):
            toks = tokens(text)
            shingles = [" ".join(toks[j : j + ngram]).encode() for j in range(max(1, len(toks) - ngram + 1))]
            m = MinHash(num_perm=num_perm)
            m.update_batch(shingles)
            found = index.query(m)
            if verified:
                mine = set(shingles)
                sets.append(mine)
                found = [j for j in found if len(mine & sets[j]) / len(mine | sets[j]) >= threshold][:1]
            if found:
                pairs[i] = sorted(found)
            index.insert(i, m)
        extra = {"bands_rows": [index.b, index.r]}
    cpu, wall = time.process_time() - c, time.perf_counter() - t
    return {"method": method, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "rss_before_mb": round(rss_before, 1),
            "peak_rss_mb": round(_status_mb("VmHWM"), 1), "peak_rss_over_start_mb": round(_status_mb("VmHWM") - rss_before, 1),
            **extra, "pairs": pairs}


def run(n: int, threshold: float, num_perm: int, ngram: int, seed: int, methods: tuple[str, ...]) -> dict:
    from agentsynth_export.synthetic import jaccard, planted_corpus

    load_start = os.getloadavg()
    t = time.perf_counter()
    corpus = planted_corpus(n, seed=seed, threshold=threshold, ngram=ngram)
    gen_s = time.perf_counter() - t
    sims = corpus.similarities()
    out: dict = {
        "benchmark": "minhash_dedup_verified", "records": n, "seed": seed, "threshold": threshold, "num_perm": num_perm,
        "ngram": ngram, "planted_near_duplicates": len(corpus.planted),
        "planted_at_or_above_threshold": sum(v >= threshold for v in sims.values()),
        "planted_in_band_below": sum(threshold - 0.1 <= v < threshold for v in sims.values()),
        "true_duplicates": len(corpus.truth), "corpus_seconds": round(gen_s, 2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(corpus.texts))
        results = {}
        for method in methods:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", method, "--texts", str(texts_file), "--threshold", str(threshold),
                 "--num-perm", str(num_perm), "--ngram", str(ngram)],
                capture_output=True, text=True, check=False,
            )
            if proc.returncode != 0:
                results[method] = {"error": proc.stderr.strip().splitlines()[-1:] or ["failed"]}
                continue
            res = json.loads(proc.stdout)
            pairs = {int(k): v for k, v in res.pop("pairs").items()}
            correct = sum(1 for i, cands in pairs.items()
                          if any(j < i and jaccard(corpus.texts[i], corpus.texts[j], ngram) >= threshold for j in cands))
            found = len(set(pairs) & set(corpus.truth))
            res.update({
                "flagged": len(pairs), "flagged_below_threshold": len(pairs) - correct,
                "precision": round(correct / len(pairs), 4) if pairs else 1.0,
                "recall": round(found / len(corpus.truth), 4) if corpus.truth else 1.0,
            })
            results[method] = res
            print(method, json.dumps(res), file=sys.stderr)
    out["methods"] = results
    ours, ds = results.get("agentsynth", {}), results.get("datasketch", {})
    if "cpu_s" in ours and "cpu_s" in ds:
        out["speedup_cpu_vs_datasketch"] = round(ds["cpu_s"] / ours["cpu_s"], 2)
        if "cpu_s" in results.get("datasketch_verified", {}):
            out["speedup_cpu_vs_datasketch_verified"] = round(results["datasketch_verified"]["cpu_s"] / ours["cpu_s"], 2)
        out["target"] = "recall >= 0.95, precision == 1.0, speedup_cpu_vs_datasketch >= 2"
        out["met"] = ours["recall"] >= 0.95 and ours["precision"] == 1.0 and out["speedup_cpu_vs_datasketch"] >= 2.0
    out["machine"] = {"cpus": os.cpu_count(), "loadavg_start": [round(x, 2) for x in load_start],
                      "loadavg_end": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="10k records")
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--num-perm", type=int, default=128)
    parser.add_argument("--ngram", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--out", type=Path, default=HERE / "results" / "dedup.json")
    parser.add_argument("--child")
    parser.add_argument("--texts")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.texts, args.threshold, args.num_perm, args.ngram)))
        return
    n = 10_000 if args.quick else args.n
    methods = tuple(m for m in args.methods.split(",") if m)
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"--methods: unknown {unknown}, expected some of {list(METHODS)}")
    out = run(n, args.threshold, args.num_perm, args.ngram, args.seed, methods)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "methods"}, indent=2))


if __name__ == "__main__":
    main()
