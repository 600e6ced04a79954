"""Peak memory and time of SQL episodes played by hostile agents (the sql plugin's exploits).

Each episode runs in its own fresh subprocess, so its peak RSS (``ru_maxrss``) is its own: the
process first loads the pack and plays one oracle episode (the baseline), then the hostile
episode. Agents: random-blob growth until the database is full, millions of tiny rows, huge
results (big blobs, cartesian joins, endless recursive CTEs, a big sort), runaway views the
checker's query goes through. Writes $AGENTSYNTH_BENCH_OUT/hostile.json (default
benchmarks/results/).

    python benchmarks/bench_hostile.py [--timeout 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HOSTILE = ("sql.blob_growth", "sql.small_row_growth", "sql.huge_results", "sql.big_sort",
           "sql.runaway_temp_view", "sql.runaway_main_view", "sql.temp_view_shadow")
TASKS = ("mark-shipped", "refund-and-restock")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def _big_sort(state, pack):
    """Sort 300 MB of blobs: a few VM steps per row, so the step budget alone does not bound it."""
    sort = ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT {n}) "
            "SELECT randomblob({size}) AS b FROM r ORDER BY b")
    return [{"tool": "sql_query", "arguments": {"sql": sort.format(n=20, size=15_000_000)}},
            {"tool": "sql_query", "arguments": {"sql": sort.format(n=300, size=990_000)}},
            {"answer": "Done."}]


def child(exploit_name: str, task_id: str, timeout: float) -> dict:
    from agentsynth_kernel import get_host
    from agentsynth_kernel.episode import EpisodeConfig, run_episode
    from agentsynth_kernel.spec import ComponentSpec, load_pack
    from agentsynth_kernel.testing.adversarial import Exploit, exploits_for

    host = get_host()
    pack = load_pack("core")
    task = next(t for t in pack.tasks if t.id == task_id)
    exploits = {e.name: e for e in exploits_for(pack, host)}
    exploits["sql.big_sort"] = Exploit("sql.big_sort", "sort huge blobs", _big_sort)
    warm = asyncio.run(run_episode(host, pack, task, 0, 0, EpisodeConfig(ComponentSpec("oracle"), timeout=timeout)))
    assert warm.status == "passed", warm.error
    baseline = _rss_mb()
    exploit = exploits[exploit_name]
    script = lambda state: exploit.actions(state, pack)  # noqa: E731
    config = EpisodeConfig(ComponentSpec("scripted", {"actions": script}), timeout=timeout)
    started = time.perf_counter()
    result = asyncio.run(run_episode(host, pack, task, 0, 0, config))
    detail = result.error or "; ".join(v.detail for v in result.verdicts if not v.passed)
    return {"exploit": exploit_name, "task": task_id, "status": result.status, "error_kind": result.error_kind,
            "seconds": round(time.perf_counter() - started, 2), "baseline_rss_mb": round(baseline, 1),
            "peak_rss_mb": round(_rss_mb(), 1), "episode_rss_mb": round(_rss_mb() - baseline, 1),
            "detail": detail[:300]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.timeout)))
        return
    load_before = os.getloadavg()[0]
    episodes = []
    for name in HOSTILE:
        for task in TASKS:
            started = time.perf_counter()
            proc = subprocess.run([sys.executable, __file__, "--timeout", str(args.timeout), "--child", name, task],
                                  capture_output=True, text=True, timeout=args.timeout * 3 + 60)
            if proc.returncode != 0:
                episodes.append({"exploit": name, "task": task, "status": "crashed",
                                 "seconds": round(time.perf_counter() - started, 2), "detail": proc.stderr[-300:]})
            else:
                episodes.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(episodes[-1]), flush=True)
    ok = [e for e in episodes if e["status"] != "crashed"]
    out = {
        "benchmark": "hostile",
        "pack": "core",
        "episodes": episodes,
        "none_passed": all(e["status"] != "passed" for e in episodes),
        "max_episode_rss_mb": max((e["episode_rss_mb"] for e in ok), default=None),
        "max_peak_rss_mb": max((e["peak_rss_mb"] for e in ok), default=None),
        "max_seconds": max(e["seconds"] for e in episodes),
        "timeout_s": args.timeout,
        "documented_bound_mb": 600,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "load_average_1m": round(load_before, 2),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "note": "One fresh process per episode; baseline = RSS after loading the pack and one oracle episode, "
                "episode_rss_mb = peak RSS during the hostile episode minus that baseline. Before the limits "
                "(max_db_bytes, observation caps, the checks' budget) blob growth peaked at 2.4 GB and 54 s, and a "
                "runaway view in the checker's path outlived the episode timeout (killed after 60 s with timeout 5).",
    }
    out["within_bound"] = out["max_episode_rss_mb"] is not None and out["max_episode_rss_mb"] <= out["documented_bound_mb"]
    target = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results")) / "hostile.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "episodes"}, indent=2))


if __name__ == "__main__":
    main()
