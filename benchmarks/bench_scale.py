"""Long runs stay flat: peak memory and CPU per episode of ``agentsynth bench`` on the core pack,
from 1k episodes up (issue #21).

Each size runs ``agentsynth bench --pack core --policy oracle --trials T`` (22 tasks x T trials) in
a fresh process with a run directory, and samples the process every few seconds: resident memory
(VmRSS, VmHWM), CPU seconds (user + system, from /proc), and the episodes stored so far (rows in
the run store, read while it runs). The baseline is the smallest size, measured in the same run:
``cpu_per_episode_ratio`` is a size's CPU per episode over the smallest size's.

    python benchmarks/bench_scale.py                  # 1k, 10k, 100k -> results/scale.json
    AGENTSYNTH_BENCH_SCALE=1000,1000000 AGENTSYNTH_BENCH_LIVE=/tmp/scale.jsonl python benchmarks/bench_scale.py
                                                      # -> results/scale_1000_1000000.json

Each set of sizes has a results file of its own (the default set ``scale.json``, any other
``scale_<sizes>.json``), so the default run of ``nox -s bench`` never overwrites a 1M-episode
measurement (about 40 minutes) with its own smaller sizes; the baseline stays in the same run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASKS = 22  # the core pack
SAMPLE_EVERY = 5.0
LIVE = os.environ.get("AGENTSYNTH_BENCH_LIVE", "")  # append every sample to this JSONL file too


def _proc(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    kb = lambda key: int(fields[key].split()[0]) if key in fields else 0  # noqa: E731
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {"rss_mb": kb("VmRSS") / 1024, "hwm_mb": kb("VmHWM") / 1024,
            "cpu_s": (int(stat[11]) + int(stat[12])) / ticks}


def _stored(run_dir: Path) -> int:
    """Episodes in the run store so far (read-only, beside the writer: the store is in WAL mode)."""
    path = run_dir / "run.sqlite"  # agentsynth_kernel.store.STORE_FILE
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM episodes").fetchone()[0])
    except sqlite3.Error:
        return -1


def run_size(episodes: int, agentsynth: str) -> dict[str, object]:
    trials = max(1, round(episodes / TASKS))
    with tempfile.TemporaryDirectory(prefix="agentsynth-scale-") as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [agentsynth, "bench", "--pack", "core", "--policy", "oracle", "--trials", str(trials), "-q",
               "--run-dir", str(run_dir), "--json", str(Path(tmp) / "report.json")]
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        samples = []
        last: dict[str, float] = {}
        time.sleep(0.5)  # past exec: /proc shows the interpreter, not the forked parent
        while proc.poll() is None:
            try:
                last = _proc(proc.pid)
            except (FileNotFoundError, ProcessLookupError, IndexError):
                break
            samples.append({"t_s": round(time.perf_counter() - started, 1), "episodes": _stored(run_dir), **last})
            if LIVE:  # a long size can be watched (or stopped) while it runs
                with open(LIVE, "a") as fp:
                    fp.write(json.dumps({"size": episodes, **samples[-1]}) + "\n")
            time.sleep(SAMPLE_EVERY)
        _, err = proc.communicate()
        wall = time.perf_counter() - started
        report = json.loads((Path(tmp) / "report.json").read_text()) if (Path(tmp) / "report.json").exists() else {}
    n = trials * TASKS
    children = _children_rusage()
    return {
        "episodes": n, "trials": trials, "returncode": proc.returncode, "stderr_tail": err[-500:],
        "wall_s": round(wall, 1), "cpu_s": round(children["cpu_s"], 2),
        "cpu_per_episode_ms": round(1000 * children["cpu_s"] / n, 4),
        # VmHWM is the process's own high-water mark: its last sample is the peak up to a few seconds
        # before exit (the children's ru_maxrss is a maximum over every child, not this one)
        "peak_rss_mb": round(max(s["hwm_mb"] for s in samples), 1) if samples else None,  # None: ended unsampled
        "passed": (report.get("counts") or {}).get("passed"),
        "samples": samples[-200:],
    }


_seen = {"cpu_s": 0.0}


def _children_rusage() -> dict[str, float]:
    """CPU of the last finished child: the cumulative children's rusage, minus what came before."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = ru.ru_utime + ru.ru_stime
    cpu, _seen["cpu_s"] = total - _seen["cpu_s"], total
    return {"cpu_s": cpu}


DEFAULT_SIZES = [1000, 10_000, 100_000]


def results_name(sizes: list[int]) -> str:
    """``scale.json`` for the default sizes, ``scale_<sizes>.json`` for any other set."""
    return "scale.json" if sizes == DEFAULT_SIZES else "scale_" + "_".join(map(str, sizes)) + ".json"


def parse_sizes(raw: str) -> list[int]:
    try:
        sizes = [int(s) for s in raw.split(",")]
    except ValueError:
        raise SystemExit(f"AGENTSYNTH_BENCH_SCALE: expected episode counts separated by commas, got {raw!r}") from None
    if not sizes or min(sizes) < 1:
        raise SystemExit(f"AGENTSYNTH_BENCH_SCALE: every size must be at least 1, got {raw!r}")
    return sizes


def main() -> None:
    raw = os.environ.get("AGENTSYNTH_BENCH_SCALE")
    sizes = parse_sizes(raw) if raw else DEFAULT_SIZES
    agentsynth = str(Path(sys.executable).with_name("agentsynth"))
    load_before = os.getloadavg()
    results = []
    for size in sizes:
        results.append(run_size(size, agentsynth))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "samples"}), flush=True)
    base = results[0]["cpu_per_episode_ms"]
    for r in results:
        r["cpu_per_episode_ratio"] = round(r["cpu_per_episode_ms"] / base, 3) if base else None  # type: ignore[operator]
    out = {
        "benchmark": "scale", "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
        "note": "peak_rss_mb: the run's VmHWM at its last sample (every 5 s); cpu from the children's rusage",
        "targets": {"peak_rss_mb_at_1M": 150, "cpu_per_episode_ratio": "flat (about 1.0)"},
        "results": results,
    }
    target = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results")) / results_name(sizes)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
