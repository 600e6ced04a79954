"""Throughput of the core pack (oracle policy): the local executor against 1 and 2 Ray workers.

Everything runs in this process, one after the other, on a local cluster this script starts, so
the local baseline and the Ray figures are measured on the same machine under the same load (the
load average is recorded before and after). Each figure is episodes/s over a whole run, worker
start-up included (a run starts its actors); the cluster's own start is reported apart.

    python plugins/agentsynth-ray/bench/bench_throughput.py [--trials 10] [--out bench/results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only
os.environ.setdefault("RAY_agent_register_timeout_ms", "300000")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).parent


def _run(trials: int, executor: dict | None, concurrency: int) -> dict:
    import attrs

    from agentsynth_kernel import ComponentSpec, RunSpec, execute, get_host, resolve_pack

    spec = RunSpec(policy=ComponentSpec("oracle"), pack="core", trials=trials, seed=0, concurrency=concurrency)
    if executor is not None:
        spec = attrs.evolve(spec, executor=ComponentSpec("ray", executor))
    pack = resolve_pack(spec, base_dir=Path.cwd(), source="bench", host=get_host())
    stamps: list[float] = []
    cpu, wall = time.process_time(), time.perf_counter()
    report = asyncio.run(execute(spec, pack, on_result=lambda info, result, done: stamps.append(time.perf_counter())))
    end = time.perf_counter()
    wall, cpu = end - wall, time.process_time() - cpu
    n = len(report.results)
    passed = sum(r.passed for r in report.results)
    first = stamps[0] - (end - wall) if stamps else wall
    # steady state: from the first result to the last, i.e. without the workers' start-up
    steady = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 and stamps[-1] > stamps[0] else 0.0
    return {"episodes": n, "passed": passed, "wall_s": round(wall, 3), "episodes_per_s": round(n / wall, 2),
            "first_result_s": round(first, 3), "steady_episodes_per_s": round(steady, 2),
            "driver_cpu_ms_per_episode": round(1000 * cpu / n, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per task (core has 22 tasks)")
    parser.add_argument("--per-worker", type=int, default=4, help="episodes in flight per Ray worker")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()

    try:
        import ray
    except ImportError:
        print("bench_throughput: skipped: ray is not installed (pip install plugins/agentsynth-ray)", file=sys.stderr)
        return

    load_before = os.getloadavg()
    local = _run(args.trials, None, concurrency=2 * args.per_worker)
    started = time.perf_counter()
    for attempt in range(3):  # a loaded machine can outlast Ray's own 30 s start-up wait
        try:
            ray.init(address="local", num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    ray_init_s = time.perf_counter() - started
    try:
        one = _run(args.trials, {"workers": 1, "per_worker": args.per_worker}, concurrency=args.per_worker)
        two = _run(args.trials, {"workers": 2, "per_worker": args.per_worker}, concurrency=2 * args.per_worker)
    finally:
        ray.shutdown()
    load_after = os.getloadavg()
    result = {
        "benchmark": "agentsynth-ray throughput: core pack, oracle policy",
        "machine": {"cpus": os.cpu_count(), "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_after": [round(x, 2) for x in load_after]},
        "trials": args.trials, "per_worker": args.per_worker, "ray_version": ray.__version__,
        "ray_init_s": round(ray_init_s, 2),
        "local": local, "ray_1_worker": one, "ray_2_workers": two,
        "ratios_to_local": {"ray_1_worker": round(one["episodes_per_s"] / local["episodes_per_s"], 3),
                            "ray_2_workers": round(two["episodes_per_s"] / local["episodes_per_s"], 3)},
        "steady_ratios_to_local": {
            "ray_1_worker": round(one["steady_episodes_per_s"] / local["steady_episodes_per_s"], 3),
            "ray_2_workers": round(two["steady_episodes_per_s"] / local["steady_episodes_per_s"], 3)},
        "scaling_2_over_1": round(two["episodes_per_s"] / one["episodes_per_s"], 3),
        "steady_scaling_2_over_1": round(two["steady_episodes_per_s"] / one["steady_episodes_per_s"], 3),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
