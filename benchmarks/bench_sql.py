"""Episodes/s of the `core` SQL pack with the oracle policy, against a raw sqlite3 loop.

The raw loop is what the framework does at its barest: per episode, a fresh in-memory
copy of the seeded database (deserialize of the same snapshot), the oracle's statements,
then the checkers' queries, with no engine, sandbox, trajectory or collateral diff.
A second raw figure re-runs the schema + seed scripts per episode (what a naive
harness does). Writes $AGENTSYNTH_BENCH_OUT/sql.json (default benchmarks/results/).

    python benchmarks/bench_sql.py [--trials 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel.engine import execute  # noqa: E402
from agentsynth_kernel.importing import import_file  # noqa: E402
from agentsynth_kernel.spec import ComponentSpec, RunSpec, load_pack  # noqa: E402
from agentsynth_sql.world import snapshot_for, split_statements  # noqa: E402


def raw_plan(pack):
    """Per task: the oracle's SQL (query or script) and the checkers' queries."""
    oracle = import_file(pack.oracle_path).ORACLE
    plan = []
    for task in pack.tasks:
        statements = []
        for action in oracle[task.id]:
            if "tool" in action:
                statements.append((action["tool"], split_statements(action["arguments"]["sql"])))
        checks = [c.params["query"] for c in pack.task_checkers(task) if c.type == "sql"]
        plan.append((task.id, statements, checks))
    return plan


def raw_episode(make_conn, statements, checks) -> None:
    conn = make_conn()
    for _tool, parts in statements:
        for stmt in parts:
            conn.execute(stmt).fetchall()
    for query in checks:
        conn.execute(query).fetchall()
    conn.close()


def bench_raw(plan, trials: int, make_conn) -> tuple[float, float]:
    """(wall seconds, CPU seconds) per episode."""
    wall, cpu = time.perf_counter(), time.process_time()
    n = 0
    for _ in range(trials):
        for _task, statements, checks in plan:
            raw_episode(make_conn, statements, checks)
            n += 1
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


def bench_plugin(pack, trials: int) -> tuple[float, float]:
    """(wall, CPU) seconds per episode of the plugin alone: environment and checkers built and driven
    directly with the oracle's actions, no engine (isolates the plugin's cost from the kernel's)."""
    from agentsynth_kernel import Step, ToolCall, Trajectory, get_host
    from agentsynth_kernel.builtins.policies import to_action
    from agentsynth_kernel.spec import build

    host = get_host()
    oracle = import_file(pack.oracle_path).ORACLE
    scripts = {t.id: [to_action(a) for a in oracle[t.id]] for t in pack.tasks}
    wall, cpu = time.perf_counter(), time.process_time()
    n = 0
    for _ in range(trials):
        for task in pack.tasks:
            env = build("environment", pack.task_environment(task), host=host, base_dir=pack.base_dir)
            env.start(0)
            traj = Trajectory(task.id, task.instruction)
            for action in scripts[task.id]:
                traj.steps.append(Step(action, env.run(action) if isinstance(action, ToolCall) else None))
            for cspec in pack.task_checkers(task):
                checker = build("checker", cspec, host=host)
                verdict = checker.evaluate(env, traj) if hasattr(checker, "evaluate") else checker.check(env, traj)
                assert verdict.passed, (task.id, verdict.detail)
            env.shutdown()
            n += 1
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


def bench_engine(pack, trials: int, concurrency: int) -> dict[str, float]:
    """Per-episode wall and CPU seconds, steady state (first episode start -> last episode end) and for
    the whole run (adds the engine's fixed per-run setup: provenance, run hash). CPU time counts
    every thread of the process."""
    spec = RunSpec(policy=ComponentSpec("oracle"), trials=trials, seed=1, concurrency=concurrency)
    first: list[tuple[float, float]] = []
    last: list[tuple[float, float]] = []

    def on_start(info, task, trial):
        if not first:
            first.append((time.perf_counter(), time.process_time()))

    def on_result(info, result, done):
        last[:] = [(time.perf_counter(), time.process_time())]

    wall, cpu = time.perf_counter(), time.process_time()
    report = asyncio.run(execute(spec, pack, on_start=on_start, on_result=on_result))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n = len(report.results)
    return {
        "wall": (last[0][0] - first[0][0]) / n, "cpu": (last[0][1] - first[0][1]) / n,
        "wall_run": wall / n, "cpu_run": cpu / n, "passed": sum(r.passed for r in report.results), "n": n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    pack = load_pack("core")
    env = pack.environment.params
    snap = snapshot_for(env["schema"], env["seed"], base_dir=pack.base_dir)
    schema_sql = (pack.base_dir / env["schema"]).read_text()
    seed_sql = (pack.base_dir / env["seed"]).read_text()
    plan = raw_plan(pack)

    def from_snapshot():
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.deserialize(snap.data)
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def from_script():
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.executescript(schema_sql + seed_sql)
        return conn

    bench_engine(pack, 1, args.concurrency)  # warm-up: imports, plugin load, snapshot, oracle module
    bench_raw(plan, 1, from_snapshot)
    # The machine is shared: interleave the contenders and keep each one's best round.
    rounds = {"engine": [], "engine_c1": [], "raw": [], "raw_script": [], "plugin": []}
    for _ in range(args.rounds):
        rounds["engine"].append(bench_engine(pack, args.trials, args.concurrency))
        rounds["engine_c1"].append(bench_engine(pack, args.trials, 1))
        rounds["raw"].append(bench_raw(plan, args.trials, from_snapshot))
        rounds["raw_script"].append(bench_raw(plan, args.trials, from_script))
        rounds["plugin"].append(bench_plugin(pack, args.trials))
    best = lambda rows, key: min(r[key] for r in rows)  # noqa: E731
    eng, eng1 = rounds["engine"], rounds["engine_c1"]
    raw_wall, raw_cpu = min(r[0] for r in rounds["raw"]), min(r[1] for r in rounds["raw"])
    script_wall = min(r[0] for r in rounds["raw_script"])
    eps = lambda seconds: round(1 / seconds, 1)  # noqa: E731
    result = {
        "benchmark": "sql",
        "pack": "core",
        "tasks": len(pack.tasks),
        "episodes_per_round": args.trials * len(pack.tasks),
        "rounds": args.rounds,
        "oracle_passed_all": all(r["passed"] == r["n"] for r in eng + eng1),
        "engine_episodes_per_s": eps(best(eng, "wall")),
        "engine_episodes_per_s_including_run_setup": eps(best(eng, "wall_run")),
        "engine_episodes_per_s_concurrency_1": eps(best(eng1, "wall")),
        "raw_sqlite_episodes_per_s": eps(raw_wall),
        "raw_sqlite_rerun_seed_episodes_per_s": eps(script_wall),
        "engine_cpu_ms_per_episode": round(best(eng, "cpu") * 1000, 3),
        "engine_cpu_ms_per_episode_including_run_setup": round(best(eng, "cpu_run") * 1000, 3),
        "raw_sqlite_cpu_ms_per_episode": round(raw_cpu * 1000, 3),
        "plugin_only_cpu_ms_per_episode": round(min(r[1] for r in rounds["plugin"]) * 1000, 3),
        "ratio_raw_over_plugin_only": round(min(r[1] for r in rounds["plugin"]) / raw_cpu, 2),
        "ratio_raw_over_engine": round(best(eng, "cpu") / raw_cpu, 2),
        "ratio_raw_over_engine_wall": round(best(eng, "wall") / raw_wall, 2),
        "ratio_raw_over_engine_wall_concurrency_1": round(best(eng1, "wall") / raw_wall, 2),
        "target_ratio_max": 3.0,
        "within_target": best(eng, "cpu") / raw_cpu <= 3.0,
        "concurrency": args.concurrency,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "note": "raw = a deserialized copy of the same snapshot + the oracle's statements + the checkers' "
                "queries, no engine. The engine adds policy turns, the sandbox, trajectory records, the "
                "collateral diff and the verdicts. ratio_raw_over_engine compares CPU time per episode in "
                "steady state (robust on a shared machine); the wall-clock ratios are given too. Best of "
                "interleaved rounds. plugin_only = the sql environment and checkers driven directly with the "
                "oracle's actions (no engine): the gap between it and the engine is the kernel's per-episode cost.",
    }
    out_dir = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sql.json").write_text(json.dumps(result, indent=2) + "\n")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
