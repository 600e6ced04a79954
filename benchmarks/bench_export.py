"""agentsynth-export performance: JSONL export speed, MinHash dedup vs datasketch, streaming memory.

Writes ``$AGENTSYNTH_BENCH_OUT/export.json`` (default ``benchmarks/results/export.json``).

1. JSONL export of N trajectories through ``JsonlExporter`` vs the raw baseline: msgspec
   ``encode_into`` + ``write`` of the same records (target: within 2x of the baseline).
2. MinHash near-duplicate dedup of N texts with planted near duplicates vs datasketch
   (``MinHash.update_batch`` + ``MinHashLSH`` query/insert, same threshold and num_perm), end to end
   from text; recall and false positives of both on the planted ground truth (target: >= its speed
   at equal recall).
3. Peak RSS of a child process streaming M generated records through the jsonl and openai
   exporters (target: < 200 MB).

Usage: python benchmarks/bench_export.py [--export N] [--dedup N] [--stream M] [--quick] [--only jsonl,dedup,stream]
(``--only`` runs some parts; the others keep their figures from the existing results file)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

from agentsynth_kernel.records import (
    Answer,
    EpisodeResult,
    Observation,
    Step,
    ToolCall,
    ToolSpec,
    Trajectory,
    Usage,
    Verdict,
)

TOOLS = [ToolSpec("sql_query", "Run a read-only SQL query", {"type": "object", "properties": {"sql": {"type": "string"}}}),
         ToolSpec("sql_execute", "Run a write statement", {"type": "object", "properties": {"sql": {"type": "string"}}})]
PROV = {"run_id": "bench", "pack": "bench", "pack_hash": "sha256:0", "policy": {"type": "oracle"},
        "versions": {"agentsynth": "0.1.0", "agentsynth-export": "0.1.0"}}


def make_record(i: int) -> EpisodeResult:
    """A realistic episode: 3 turns of tool calls (one parallel pair) with results, then an answer."""
    steps = [
        Step(ToolCall("sql_query", {"sql": f"SELECT count(*) FROM orders WHERE customer_id = {i}"}, f"c{i}a"),
             Observation(f"[[{i % 97}]]", data=[[i % 97]]), turn=0, duration_s=0.01, thought="count the orders first"),
        Step(ToolCall("sql_query", {"sql": f"SELECT name FROM customers WHERE id = {i}"}, f"c{i}b"),
             Observation(f"[['customer {i}']]"), turn=0, duration_s=0.01),
        Step(ToolCall("sql_execute", {"sql": f"UPDATE customers SET vip = 1 WHERE id = {i}"}, f"c{i}c"),
             Observation("1 row affected"), turn=1, duration_s=0.02),
        Step(Answer(f"Customer {i} has {i % 97} orders and is now a VIP."), None, turn=2),
    ]
    traj = Trajectory(task_id=f"task-{i % 500}", instruction=f"Mark customer {i} as VIP if they have orders, and report the count.",
                      steps=steps, tools=TOOLS, initial_observation="tables: orders, customers",
                      system_prompt="You are a careful database agent.")
    return EpisodeResult(task_id=f"task-{i % 500}", trial=i // 500, seed=i, status="passed" if i % 3 else "failed",
                         trajectory=traj, verdicts=[Verdict("sql", i % 3 != 0, float(i % 3 != 0))], duration_s=0.3,
                         usage=Usage(1200, 80, 0.0012, 3), split="test" if i % 2 else "train", provenance=PROV)


def cycle(pool: list[EpisodeResult], n: int) -> Iterator[EpisodeResult]:
    for i in range(n):
        yield pool[i % len(pool)]


# --- 1. jsonl export vs raw msgspec ---------------------------------------------------------------------


def planted(record: EpisodeResult, i: int) -> EpisodeResult:
    """The record with a key-shaped secret in its first observation (the scrub must mask it)."""
    steps = list(record.trajectory.steps)
    steps[0] = Step(steps[0].action, Observation(f"env: OPENAI_API_KEY=sk-bench-{i:06d}-9fQ2xL7vN4mR8tK1"), turn=0)
    return msgspec.structs.replace(record, trajectory=msgspec.structs.replace(record.trajectory, steps=steps))


def with_login_tool(record: EpisodeResult) -> EpisodeResult:
    """The record with a tool whose schema has a ``password`` property (a name, not a secret: the
    screen must tell it from a secret-named key of the data without the exact path)."""
    login = ToolSpec("login", "Log in", {"type": "object", "properties": {"password": {"type": "string"}}})
    return msgspec.structs.replace(record, trajectory=msgspec.structs.replace(
        record.trajectory, tools=[*record.trajectory.tools, login]))


def with_password(record: EpisodeResult, i: int) -> EpisodeResult:
    """The record with a value under a secret-named key in its metadata: the screen stops every such
    record, the exact path masks it (a rebuilt copy): what the exact path costs a record."""
    return msgspec.structs.replace(record, trajectory=msgspec.structs.replace(
        record.trajectory, metadata={**record.trajectory.metadata, "password": f"hunter2-{i}"}))


def other_formats(pool: list[EpisodeResult], n: int, tmp: Path) -> dict:
    """CPU us per record of the other line formats, with the scrub's screen and with every record sent
    through the exact path (as before the screen): what the screen saves them."""
    from agentsynth_export import scrub
    from agentsynth_export.exporters import EXPORTERS

    out: dict[str, dict[str, float]] = {}
    screen_clean = scrub.Screen.clean
    for fmt in ("openai", "sharegpt"):
        out[fmt] = {}
        for label, clean in (("screen", screen_clean), ("exact_path_only", lambda self, data, result=None: False)):
            scrub.Screen.clean = clean  # type: ignore[method-assign]
            try:
                best = float("inf")
                for _ in range(3):
                    c = time.process_time()
                    EXPORTERS[fmt][0](filter="all", include_test=True).export(cycle(pool, n), tmp / f"o.{fmt}")
                    best = min(best, time.process_time() - c)
            finally:
                scrub.Screen.clean = screen_clean  # type: ignore[method-assign]
            out[fmt][label] = round(best / n * 1e6, 2)
        (tmp / f"o.{fmt}").unlink()
    return out


def bench_jsonl(n: int, tmp: Path) -> dict:
    from agentsynth_export.exporters import JsonlExporter

    pool = [make_record(i) for i in range(2000)]
    # 1 record in 100 carries a secret
    pool_planted = [planted(r, i) if i % 100 == 7 else r for i, r in enumerate(pool)]
    pool_login = [with_login_tool(r) for r in pool]
    pool_exact = [with_password(r, i) for i, r in enumerate(pool)]
    enc = msgspec.json.Encoder()
    logging.getLogger("agentsynth_export").setLevel(logging.ERROR)  # the include_test warning, once per export
    screened: dict[str, list[int]] = {}

    def raw(path: Path) -> int:
        buf = bytearray()
        count = 0
        with open(path, "wb") as fp:
            for r in cycle(pool, n):
                enc.encode_into(r, buf)
                buf.extend(b"\n")
                fp.write(buf)
                count += 1
        return count

    # half the records are of test-split tasks, which a training export leaves out unless include_test:
    # the baseline writes every record, so the exporter must too (and the test split is what carries a canary)
    def ours(name: str, path: Path, canary: str, records: list[EpisodeResult], count: int) -> int:
        exporter = JsonlExporter(canary=canary, include_test=True)
        written = exporter.export(cycle(records, count), path)
        screened[name] = [exporter.scrubber.screened, exporter.scrubber.exact_records]
        return written

    # best of 3, interleaved; CPU time (process_time) decides the ratio because wall time on a
    # shared, overloaded 2-core machine mostly measures the neighbours
    n_exact = max(1, n // 10)
    runs = {
        "raw": (lambda: raw(tmp / "raw.jsonl"), n),
        "exporter": (lambda: ours("exporter", tmp / "a.jsonl", "never", pool, n), n),
        "exporter_canary": (lambda: ours("exporter_canary", tmp / "b.jsonl", "auto", pool, n), n),
        "exporter_1pct_secrets": (lambda: ours("exporter_1pct_secrets", tmp / "c.jsonl", "auto", pool_planted, n), n),
        "exporter_login_tool": (lambda: ours("exporter_login_tool", tmp / "e.jsonl", "auto", pool_login, n), n),
        "exporter_exact_path": (lambda: ours("exporter_exact_path", tmp / "d.jsonl", "auto", pool_exact, n_exact),
                                n_exact),
    }
    cpu: dict[str, float] = {name: float("inf") for name in runs}
    wall = dict(cpu)
    for _ in range(3):
        for name, (fn, count) in runs.items():
            w, c = time.perf_counter(), time.process_time()
            written = fn()
            if written != count:
                raise SystemExit(f"bench_export: {name} wrote {written} of {count} records")
            cpu[name] = min(cpu[name], time.process_time() - c)
            wall[name] = min(wall[name], time.perf_counter() - w)
    size = (tmp / "a.jsonl").stat().st_size
    leaked = b"sk-bench-" in (tmp / "c.jsonl").read_bytes() or b"hunter2-" in (tmp / "d.jsonl").read_bytes()
    for f in ("raw.jsonl", "a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl", "e.jsonl"):
        (tmp / f).unlink()
    if leaked:
        raise SystemExit("bench_export: a planted secret reached the export")
    per_record = {name: round(cpu[name] / runs[name][1] * 1e6, 2) for name in runs}
    other = other_formats(pool, n_exact, tmp)
    return {
        "records": n, "bytes": size,
        "cpu_s": {k: round(v, 3) for k, v in cpu.items()}, "wall_s": {k: round(v, 3) for k, v in wall.items()},
        "cpu_us_per_record": per_record,
        "ratio": round(cpu["exporter"] / cpu["raw"], 2),
        "ratio_with_canary": round(cpu["exporter_canary"] / cpu["raw"], 2),
        "ratio_1pct_secrets": round(cpu["exporter_1pct_secrets"] / cpu["raw"], 2),
        "ratio_login_tool": round(cpu["exporter_login_tool"] / cpu["raw"], 2),
        "ratio_exact_path_per_record": round(per_record["exporter_exact_path"] / per_record["raw"], 2),
        "ratio_wall_with_canary": round(wall["exporter_canary"] / wall["raw"], 2),
        "records_per_s_cpu": round(n / cpu["exporter"]),
        "screened_and_exact_path_records": screened,
        "other_formats_cpu_us_per_record": other,
        "target": "ratio_with_canary (CPU time) <= 2.0", "met": cpu["exporter_canary"] / cpu["raw"] <= 2.0,
        "before": {"ratio_with_canary": 17.18, "cpu_us_per_record": 90.6,
                   "note": "the exporter before the screen (commit 5d1a281): the exact path on every record"},
        "note": ("every record is written (include_test: half are of test-split tasks, which carry the canary). The "
                 "exporter passes every record through the secret scrub (agentsynth_export.scrub): a screen of its JSON "
                 "encoding (which the jsonl exporter then writes), the exact path for the records the screen stops; "
                 "the raw baseline only encodes. exporter_1pct_secrets: 1 record in 100 carries a key-shaped secret "
                 "(masked; checked). exporter_login_tool: every record has a tool schema with a 'password' property "
                 "(a name: kept, and the screen passes it). exporter_exact_path: every record has a value under a "
                 "secret-named key (masked; checked), on n/10 records: what the exact path costs a record"),
    }


# --- 2. MinHash dedup vs datasketch -------------------------------------------------------------------------


def dedup_corpus(n: int, seed: int = 0) -> tuple[list[str], dict[int, int]]:
    """``n`` texts of 60-140 words; ~10% are near duplicates (1-3 words changed) of a recent text.

    Returns the texts and ``{duplicate index: source index}``.
    """
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(30000)]
    texts: list[str] = []
    dups: dict[int, int] = {}
    for i in range(n):
        if i > 100 and rng.random() < 0.10:
            src = rng.randrange(i - 100, i)
            words = texts[src].split()
            for _ in range(rng.choice((1, 2, 3))):
                words[rng.randrange(len(words))] = rng.choice(vocab)
            texts.append(" ".join(words))
            dups[i] = src
        else:
            texts.append(" ".join(rng.choice(vocab) for _ in range(rng.randrange(60, 140))))
    return texts, dups


def true_jaccard(a: str, b: str, n: int) -> float:
    def shingles(t: str) -> set[str]:
        w = t.split()
        return {" ".join(w[j : j + n]) for j in range(max(1, len(w) - n + 1))}

    x, y = shingles(a), shingles(b)
    return len(x & y) / len(x | y)


def bench_dedup(n: int, threshold: float = 0.8, num_perm: int = 128, ngram: int = 5) -> dict:
    import numpy as np
    from datasketch import MinHash, MinHashLSH

    from agentsynth_export.common import tokens
    from agentsynth_export.dedup import LSHDeduper, MinHasher

    texts, dups = dedup_corpus(n)
    similar = {i for i, src in dups.items() if true_jaccard(texts[i], texts[src], ngram) >= threshold}

    t, c = time.perf_counter(), time.process_time()
    hasher = MinHasher(num_perm, ngram)
    lsh = LSHDeduper(threshold, num_perm)
    flag_list, matches = [], {}
    for s in range(0, n, 2048):
        flag_list.append(lsh.add_batch(*hasher.sketch(texts[s : s + 2048])))
        matches.update((s + k, int(lsh.last_matches[k])) for k in np.flatnonzero(flag_list[-1]).tolist())
    flags = np.concatenate(flag_list)
    lsh.close()
    ours_s, ours_cpu = time.perf_counter() - t, time.process_time() - c
    ours_flagged = set(np.nonzero(flags)[0].tolist())

    t, c = time.perf_counter(), time.process_time()
    index = MinHashLSH(threshold=threshold, num_perm=num_perm)
    ds_flagged: set[int] = set()
    for i, text in enumerate(texts):
        toks = tokens(text)
        shingles = [" ".join(toks[j : j + ngram]).encode() for j in range(max(1, len(toks) - ngram + 1))]
        m = MinHash(num_perm=num_perm)
        m.update_batch(shingles)
        if index.query(m):
            ds_flagged.add(i)
        else:
            index.insert(i, m)
    ds_s, ds_cpu = time.perf_counter() - t, time.process_time() - c

    def quality(flagged: set[int]) -> dict:
        return {
            "recall": round(len(flagged & similar) / max(1, len(similar)), 4),
            "recall_all_planted": round(len(flagged & set(dups)) / max(1, len(dups)), 4),
            "flagged_below_threshold": len((flagged & set(dups)) - similar),
            "false_positives": len(flagged - set(dups)),
            "flagged": len(flagged),
        }

    ours_q, ds_q = quality(ours_flagged), quality(ds_flagged)
    # the pair each record was removed for (a near duplicate of a near duplicate may match another record
    # than its planted source): none may be below the threshold
    ours_q["removed_for_a_pair_below_threshold"] = sum(
        true_jaccard(texts[i], texts[j], ngram) < threshold for i, j in matches.items())
    return {
        "records": n, "planted_near_duplicates": len(dups), "planted_with_jaccard_at_least_threshold": len(similar),
        "threshold": threshold, "num_perm": num_perm, "ngram": ngram,
        "bands_rows": [lsh.bands, lsh.rows], "datasketch_bands_rows": [index.b, index.r],
        "agentsynth_cpu_s": round(ours_cpu, 3), "datasketch_cpu_s": round(ds_cpu, 3),
        "agentsynth_wall_s": round(ours_s, 3), "datasketch_wall_s": round(ds_s, 3),
        "speedup": round(ds_cpu / ours_cpu, 2), "speedup_wall": round(ds_s / ours_s, 2),
        "agentsynth": ours_q, "datasketch": ds_q,
        "note": ("recall = flagged among planted near duplicates whose true 5-gram Jaccard with their source is "
                 ">= threshold; agentsynth verifies LSH candidates by the exact Jaccard of their shingle sets (bands chosen for "
                 "recall), datasketch's query returns unverified candidates (so it also flags more pairs below the threshold). datasketch uses its default "
                 "sha1 hashing with update_batch; both are timed end to end from text."),
        "target": "speedup >= 2, recall >= 0.95, no pair below the threshold flagged (issue #21)",
        "met": ds_cpu / ours_cpu >= 2.0 and ours_q["recall"] >= 0.95 and ours_q["removed_for_a_pair_below_threshold"] == 0,
    }


# --- 3. peak RSS streaming --------------------------------------------------------------------------------


def vm_hwm_mb() -> float:
    """Peak RSS of this process image (VmHWM; unlike ru_maxrss it is not inherited across fork+exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_stream(n: int, fmt: str) -> None:
    """Child process: stream n generated records through one exporter to /dev/null; print RSS (MB)."""
    from agentsynth_export.exporters import EXPORTERS

    template = make_record(1)
    before = vm_hwm_mb()

    def gen() -> Iterator[EpisodeResult]:
        for i in range(n):
            yield msgspec.structs.replace(template, task_id=f"task-{i}", trial=i % 7, seed=i, status="passed")

    cls = EXPORTERS[fmt][0]
    t = time.perf_counter()
    # the template is of a test-split task, left out of a training export unless include_test
    written = cls(filter="all", include_test=True).export(gen(), Path(os.devnull))
    elapsed = time.perf_counter() - t
    peak = vm_hwm_mb()
    print(json.dumps({"format": fmt, "records": written, "rss_after_imports_mb": round(before, 1),
                      "peak_rss_mb": round(peak, 1), "seconds": round(elapsed, 2)}))


def bench_stream(n: int, n_openai: int) -> dict:
    out = {}
    for fmt, count in (("jsonl", n), ("openai", n_openai)):
        proc = subprocess.run([sys.executable, __file__, "--child-stream", str(count), "--child-format", fmt],
                              capture_output=True, text=True, check=True)
        out[fmt] = json.loads(proc.stdout.strip().splitlines()[-1])
    peak = max(v["peak_rss_mb"] for v in out.values())
    return {"records": n, **out, "target": "peak_rss_mb < 200", "met": peak < 200}


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--export", type=int, default=100_000)
    # full target sizes; the openai stream (an extra beside the 1M-record jsonl target) runs 200k
    # records to keep the script's own CPU time near a minute; pass --stream-openai to scale up.
    parser.add_argument("--dedup", type=int, default=100_000)
    parser.add_argument("--stream", type=int, default=1_000_000)
    parser.add_argument("--stream-openai", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="10x smaller everything")
    parser.add_argument("--only", default="jsonl,dedup,stream",
                        help="comma-separated parts to run (jsonl, dedup, stream); the others keep their last figures")
    parser.add_argument("--child-stream", type=int)
    parser.add_argument("--child-format", default="jsonl")
    args = parser.parse_args()
    if args.child_stream:
        child_stream(args.child_stream, args.child_format)
        return
    if args.quick:
        args.export, args.dedup, args.stream = args.export // 10, args.dedup // 10, args.stream // 10
        args.stream_openai //= 10
    started = time.perf_counter()
    load_before = os.getloadavg()
    only = {p.strip() for p in args.only.split(",") if p.strip()}
    unknown = only - {"jsonl", "dedup", "stream"}
    if unknown:
        raise SystemExit(f"bench_export: --only: unknown part(s) {', '.join(sorted(unknown))} (jsonl, dedup, stream)")
    out_dir = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results"))
    previous: dict = {}
    if only != {"jsonl", "dedup", "stream"} and (out_dir / "export.json").is_file():
        previous = json.loads((out_dir / "export.json").read_text())
    jsonl = dedup = stream = None
    if "jsonl" in only:
        with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
            jsonl = bench_jsonl(args.export, Path(tmp))
        print("jsonl", json.dumps(jsonl), file=sys.stderr)
    if "dedup" in only:
        dedup = bench_dedup(args.dedup)
        print("dedup", json.dumps(dedup), file=sys.stderr)
    if "stream" in only:
        stream = bench_stream(args.stream, args.stream_openai)
        print("stream", json.dumps(stream), file=sys.stderr)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(),
               "load_avg_1m": round(os.getloadavg()[0], 2),
               "load_before": [round(x, 2) for x in load_before],
               "load_after": [round(x, 2) for x in os.getloadavg()], "note": "2 shared cores; timings are noisy"}

    def part(name: str, fresh: dict | None) -> dict:
        """A part run now (with this run's machine load), or the last figures of one not run."""
        if fresh is not None:
            return {**fresh, "machine": machine}
        kept = dict(previous.get(name) or {"not_run": True})
        kept.setdefault("machine", previous.get("machine"))
        kept["from_an_earlier_run"] = True
        return kept
    result = {
        "benchmark": "export",
        "parts_run": sorted(only),
        "machine": machine,
        "sizes": {"export": args.export, "dedup": args.dedup, "stream_jsonl": args.stream,
                  "stream_openai": args.stream_openai,
                  "scaled_down": args.export < 100_000 or args.dedup < 100_000 or args.stream < 1_000_000,
                  "note": ("the targets' sizes (100k export, 100k dedup, 1M streamed jsonl records) are run in full "
                           "(about a minute of CPU); only the extra openai-format stream is scaled down, to 200k "
                           "records. Wall time depends on the machine's load; see total_cpu_s.")},
        "jsonl_export": part("jsonl_export", jsonl), "minhash_dedup": part("minhash_dedup", dedup),
        "streaming_memory": part("streaming_memory", stream),
        "total_s": round(time.perf_counter() - started, 1),
        "total_cpu_s": round(time.process_time() + _children_cpu(), 1),
        "timing_note": ("total_s is wall time on a machine shared by ~8 people (load_avg_1m above); total_cpu_s "
                        "is the script's own CPU time (parent + children), i.e. roughly its wall time alone on 2 cores"),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "export.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
