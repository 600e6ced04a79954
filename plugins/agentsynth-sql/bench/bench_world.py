"""CPU per episode of the `core` pack in the sql world alone, against raw sqlite3 doing the same work.

plugin = the environment and checkers driven directly with the oracle's actions (reset, tool calls,
every checker incl. the collateral diff, close); no engine. raw = a deserialized copy of the same
snapshot, the oracle's statements, the checkers' queries (``sql`` and ``sql_answer``'s). Both in the same process, interleaved
rounds, best round each; the machine load is recorded. Target (issue #21 item 3): ratio <= 2.

    python plugins/agentsynth-sql/bench/bench_world.py [--trials 20] [--rounds 15] [--profile] [--out FILE]
    python plugins/agentsynth-sql/bench/bench_world.py --baseline DIR [--pairs 3]   # DIR: another agentsynth_sql

With ``--baseline``, this script runs itself alternately on DIR's copy of the plugin (e.g. the last
commit's, from ``git archive``) and on this one, ``--pairs`` times, and writes both series.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel import Step, ToolCall, Trajectory, build, get_host, import_file, load_pack, to_action  # noqa: E402
from agentsynth_sql.world import snapshot_for, split_statements  # noqa: E402

TARGET = 2.0


def raw_plan(pack, data):
    """Per task: the oracle's statements, every checker query, and the tables those statements write
    with their start rows (found once here, by an authorizer, outside the measured rounds)."""
    oracle = import_file(pack.oracle_path).ORACLE
    plan = []
    for task in pack.tasks:
        statements = [split_statements(a["arguments"]["sql"]) for a in oracle[task.id] if "tool" in a]
        checks = [c.params[key] for c in pack.task_checkers(task) if c.type in ("sql", "sql_answer")
                  for key in ("query", "distractors") if c.params.get(key)]  # every checker query
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.deserialize(data)
        conn.execute("PRAGMA foreign_keys = ON")
        written: set[str] = set()
        conn.set_authorizer(functools.partial(_note_write, written))
        for parts in statements:
            for stmt in parts:
                conn.execute(stmt).fetchall()
        conn.set_authorizer(None)
        conn.close()
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.deserialize(data)
        start = {t: conn.execute(f'SELECT rowid, * FROM "{t}"').fetchall() for t in sorted(written)}
        conn.close()
        plan.append((statements, checks, start))
    return plan


def _note_write(written, action, table, *_):
    if action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE) and table:
        written.add(table)
    return sqlite3.SQLITE_OK


def bench_raw(plan, trials, data, reads=False):
    """``reads``: also read back every table the statements wrote and compare it with its start rows,
    what a hand-written collateral check costs in raw sqlite3 (reported beside the target's ratio)."""
    cpu = time.process_time()
    n = unchanged = 0
    for _ in range(trials):
        for statements, checks, start in plan:
            conn = sqlite3.connect(":memory:", isolation_level=None)
            conn.deserialize(data)
            conn.execute("PRAGMA foreign_keys = ON")
            for parts in statements:
                for stmt in parts:
                    conn.execute(stmt).fetchall()
            for query in checks:
                conn.execute(query).fetchall()
            if reads:
                for table, rows in start.items():
                    unchanged += conn.execute(f'SELECT rowid, * FROM "{table}"').fetchall() == rows
            conn.close()
            n += 1
    return (time.process_time() - cpu) / n


def bench_plugin(pack, trials):
    host = get_host()
    oracle = import_file(pack.oracle_path).ORACLE
    scripts = {t.id: [to_action(a) for a in oracle[t.id]] for t in pack.tasks}
    checkers = {t.id: [build("checker", c, host=host) for c in pack.task_checkers(t)] for t in pack.tasks}
    cpu = time.process_time()
    n = 0
    for _ in range(trials):
        for task in pack.tasks:
            env = build("environment", pack.task_environment(task), host=host, base_dir=pack.base_dir)
            env.start(0)
            traj = Trajectory(task.id, task.instruction)
            for action in scripts[task.id]:
                traj.steps.append(Step(action, env.run(action) if isinstance(action, ToolCall) else None))
            for checker in checkers[task.id]:
                verdict = checker.evaluate(env, traj) if hasattr(checker, "evaluate") else checker.check(env, traj)
                assert verdict.passed, (task.id, verdict.detail)
            env.shutdown()
            n += 1
    return (time.process_time() - cpu) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)  # this VM's noise comes in bursts: more chances at a quiet round
    parser.add_argument("--profile", action="store_true", help="cProfile the plugin rounds instead")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results.json")
    parser.add_argument("--baseline", type=Path, help="a directory holding another agentsynth_sql package")
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    if args.baseline is not None:
        compare(args)
        return
    pack = load_pack("core")
    env = pack.environment.params
    snap = snapshot_for(env["schema"], env["seed"], base_dir=pack.base_dir)
    plan = raw_plan(pack, snap.data)
    bench_plugin(pack, 1)
    bench_raw(plan, 1, snap.data)
    bench_raw(plan, 1, snap.data, reads=True)
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.runcall(bench_plugin, pack, args.trials)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return
    load_before = os.getloadavg()[0]
    plugin, raw, raw_reads = [], [], []
    for _ in range(args.rounds):
        raw.append(bench_raw(plan, args.trials, snap.data))
        plugin.append(bench_plugin(pack, args.trials))
        raw_reads.append(bench_raw(plan, args.trials, snap.data, reads=True))
    ratio = min(plugin) / min(raw)
    result = {
        "benchmark": "sql-world", "pack": "core", "tasks": len(pack.tasks),
        "episodes_per_round": args.trials * len(pack.tasks), "rounds": args.rounds,
        "plugin_cpu_ms_per_episode": round(min(plugin) * 1000, 4),
        "raw_sqlite_cpu_ms_per_episode": round(min(raw) * 1000, 4),
        "ratio_plugin_over_raw": round(ratio, 2), "target_ratio_max": TARGET, "within_target": ratio <= TARGET,
        # not the target's measure: raw sqlite3 reading back the tables the statements wrote as well
        "raw_with_collateral_reads_cpu_ms_per_episode": round(min(raw_reads) * 1000, 4),
        "ratio_plugin_over_raw_with_collateral_reads": round(min(plugin) / min(raw_reads), 2),
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "cpus": os.cpu_count(),
        "load_average_1m_before": round(load_before, 2), "load_average_1m_after": round(os.getloadavg()[0], 2),
        "note": "CPU time (process_time), best of interleaved rounds; raw and plugin measured in the same run.",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    json.dump(result, sys.stdout, indent=2)
    print()


def compare(args: argparse.Namespace) -> None:
    """Alternate runs of the baseline copy and this copy, each in its own process."""
    import subprocess
    import tempfile

    here = Path(__file__).resolve().parents[1]
    series: dict[str, list[dict[str, object]]] = {"baseline": [], "current": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.pairs):
            for name, path in (("baseline", args.baseline.resolve()), ("current", here)):
                out = Path(tmp) / f"{name}.json"
                env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
                subprocess.run([sys.executable, __file__, "--trials", str(args.trials), "--rounds", str(args.rounds),
                                "--out", str(out)], env=env, check=True, stdout=subprocess.DEVNULL)
                series[name].append(json.loads(out.read_text()))
    median = lambda rows: sorted(r["ratio_plugin_over_raw"] for r in rows)[len(rows) // 2]  # type: ignore[arg-type] # noqa: E731
    result = {"benchmark": "sql-world-compare", "pairs": args.pairs, "baseline": str(args.baseline),
              "median_ratio_baseline": median(series["baseline"]), "median_ratio_current": median(series["current"]),
              "target_ratio_max": TARGET, "runs": series}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
