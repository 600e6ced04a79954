"""CPU of the collateral check on a big table: the row log against whole-table scans.

A 100,000-row table, one row updated by the agent, the check of ``allowed_changes`` (the diff and the
rules). With SQLite's pre-update hook the check proves this update allowed without reading a row (or, where
it cannot, reads the changed row only); without it (the fallback, and the code before the row log) it
reads the whole table. Both in the same run, best of ``--trials``; the
machine load is recorded.

    python plugins/agentsynth-sql/bench/bench_big_table.py [--rows 100000] [--trials 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel import ToolCall  # noqa: E402
from agentsynth_sql import env as env_module  # noqa: E402
from agentsynth_sql.env import SqlEnvironment, SqlEnvSpec  # noqa: E402


def check_cpu(spec: SqlEnvSpec, trials: int) -> float:
    best = float("inf")
    for _ in range(trials):
        env = SqlEnvironment(spec)
        env.start(0)
        env.run(ToolCall("sql_execute", {"sql": "UPDATE t SET qty = 0 WHERE id = 5"}))
        cpu = time.process_time()
        unexpected = env.unexpected_changes()
        best = min(best, time.process_time() - cpu)
        assert unexpected == [] and len(env.changes()) == 1
        env.shutdown()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results_big_table.json")
    args = parser.parse_args()
    seed = (f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {args.rows}) "
            "INSERT INTO t SELECT i, 'name ' || i, i FROM n;")
    spec = SqlEnvSpec(schema="CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER);", seed=seed,
                      allowed_changes={"t": {"update": ["qty"], "where": "id = 5"}}, check_budget=10**9)
    load_before = os.getloadavg()[0]
    logged = check_cpu(spec, args.trials)
    watch = env_module.watch_rows
    env_module.watch_rows = lambda conn, limit: None  # the fallback: whole-table scans
    try:
        scanned = check_cpu(spec, args.trials)
    finally:
        env_module.watch_rows = watch
    result = {
        "benchmark": "sql-collateral-check-big-table", "rows": args.rows, "changed_rows": 1, "trials": args.trials,
        "row_log_cpu_ms": round(logged * 1000, 3), "whole_scan_cpu_ms": round(scanned * 1000, 3),
        "speedup": round(scanned / logged, 1) if logged else None,
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "cpus": os.cpu_count(),
        "load_average_1m_before": round(load_before, 2), "load_average_1m_after": round(os.getloadavg()[0], 2),
        "note": "CPU time (process_time) of unexpected_changes() after one UPDATE, best of trials.",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
