"""`pack contamination` corpus scan: throughput and memory against a plain-Python n-gram scan, same file, same run.

A JSONL corpus of chat records (random words, with the instructions of a few of the pack's tasks planted) is
scanned by ``contamination_report`` (numpy n-gram hashes looked up among the tasks') and by the obvious
baseline (each record's 13-grams as strings, looked up in a dict of the tasks' n-grams, as
``Decontaminator`` does). Each runs in its own child process, twice, alternated (the faster run is kept); CPU seconds, MB/s
and peak RSS are recorded with the machine load. Both must find the same contaminated tasks.

Usage: python plugins/agentsynth-export/bench/bench_contamination.py [--mb 50] [--pack core] [--out FILE]
(needs agentsynth-sql for the ``core`` pack).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def make_corpus(path: Path, mb: int, planted: list[str], seed: int = 0) -> int:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]
    target, size, n = mb << 20, 0, 0
    with path.open("w", encoding="utf-8") as f:
        while size < target:
            text = " ".join(rng.choices(vocab, k=rng.randrange(50, 400)))
            if planted and rng.random() < 0.005:
                text += " " + rng.choice(planted)
            line = json.dumps({"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]})
            f.write(line + "\n")
            size += len(line) + 1
            n += 1
    return n


def child(method: str, pack_ref: str, corpus: str, n: int) -> dict:
    from agentsynth_export.common import tokens
    from agentsynth_export.contamination import contamination_report, corpus_records
    from agentsynth_kernel import load_pack

    pack = load_pack(pack_ref)
    rss = _status_mb("VmRSS")
    t, c = time.perf_counter(), time.process_time()
    if method == "agentsynth":
        report, _ = contamination_report(pack, [Path(corpus)], n=n)
        flagged = sorted(report["contaminated"])
    else:  # the plain-Python baseline: string n-grams in a dict
        grams: dict[str, set[str]] = {}
        sizes: dict[str, int] = {}
        for task in pack.tasks:
            toks = tokens(task.instruction)
            own = {" ".join(toks[i : i + n]) for i in range(len(toks) - n + 1)}
            sizes[task.id] = len(own)
            for g in own:
                grams.setdefault(g, set()).add(task.id)
        seen: dict[str, set[str]] = {}
        for record, _ in corpus_records(Path(corpus)):
            toks = tokens(record)
            for i in range(len(toks) - n + 1):
                hit = grams.get(" ".join(toks[i : i + n]))
                if hit:
                    for tid in hit:
                        seen.setdefault(tid, set()).add(" ".join(toks[i : i + n]))
        flagged = sorted(tid for tid, s in seen.items() if len(s) >= 0.5 * sizes[tid])
    cpu, wall = time.process_time() - c, time.perf_counter() - t
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "peak_rss_over_start_mb": round(_status_mb("VmHWM") - rss, 1),
            "flagged": flagged}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--pack", default="core")
    parser.add_argument("--n", type=int, default=13)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "contamination.json")
    parser.add_argument("--child")
    parser.add_argument("--corpus")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.pack, args.corpus, args.n)))
        return
    from agentsynth_kernel import load_pack

    load_start = os.getloadavg()
    pack = load_pack(args.pack)
    planted = [t.instruction for t in pack.tasks if len(t.instruction.split()) >= args.n][:3]
    out: dict = {"benchmark": "pack_contamination_scan", "pack": pack.id, "n": args.n, "corpus_mb": args.mb,
                 "planted_tasks": len(planted)}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        out["corpus_records"] = make_corpus(corpus, args.mb, planted)
        size_mb = corpus.stat().st_size / 2**20
        runs: dict[str, list[dict]] = {"agentsynth": [], "python_baseline": []}
        for _ in range(2):  # alternated, the faster of two kept: a shared machine's load moves between runs
            for method in runs:
                proc = subprocess.run([sys.executable, __file__, "--child", method, "--pack", args.pack, "--corpus",
                                       str(corpus), "--n", str(args.n)], capture_output=True, text=True, check=True)
                runs[method].append(json.loads(proc.stdout))
        for method, results in runs.items():
            res = min(results, key=lambda r: r["cpu_s"])
            res["cpu_s_runs"] = [r["cpu_s"] for r in results]
            res["mb_per_cpu_s"] = round(size_mb / res["cpu_s"], 1) if res["cpu_s"] else None
            out[method] = res
            print(method, json.dumps(res), file=sys.stderr)
    ours, base = out["agentsynth"], out["python_baseline"]
    out["speedup_cpu"] = round(base["cpu_s"] / ours["cpu_s"], 2)
    out["same_flagged"] = set(base["flagged"]) <= set(ours["flagged"])  # ours also reads the oracle's answers
    out["machine"] = {"cpus": os.cpu_count(), "loadavg_start": [round(x, 2) for x in load_start],
                      "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
