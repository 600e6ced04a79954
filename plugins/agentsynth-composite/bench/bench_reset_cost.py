"""Reset cost of a composite world against the sum of its children's, and the overhead of one
tool call through the composite, on the sql-python pack's worlds (sql + python in bubblewrap).

Every measurement is build + reset + close of a fresh environment, as an episode does it. The
baseline is measured in the same run on the same machine: each child alone, and the sum of the
two. Results (medians, p90s, load before and after) go to bench/results.json or --out.

    python plugins/agentsynth-composite/bench/bench_reset_cost.py [--repeat 15] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from agentsynth_kernel import ComponentSpec, ToolCall, build, call, get_host, load_pack


def _stats(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    return {"median_ms": round(statistics.median(values) * 1000, 2),
            "p90_ms": round(values[min(len(values) - 1, int(len(values) * 0.9))] * 1000, 2),
            "min_ms": round(values[0] * 1000, 2), "n": len(values)}


async def _cycle(cspec: ComponentSpec, pack: Any, task: Any, calls: list[ToolCall]) -> tuple[float, float, list[float]]:
    """(reset seconds, close seconds, seconds per call) of one fresh environment."""
    env = build("environment", cspec, base_dir=pack.base_dir, task=task, pack=pack)
    started = time.perf_counter()
    await call(env.reset, 0)
    reset = time.perf_counter() - started
    steps = []
    for tool_call in calls:
        t0 = time.perf_counter()
        obs = await call(env.step, tool_call)
        steps.append(time.perf_counter() - t0)
        assert not obs.error, obs.content
    t0 = time.perf_counter()
    await call(env.close)
    return reset, time.perf_counter() - t0, steps


async def measure(repeat: int) -> dict[str, Any]:
    get_host()
    pack = load_pack("sql-python")
    task = pack.tasks[0]
    composite = pack.task_environment(task)
    worlds = {name: ComponentSpec(raw.type, raw.params) if isinstance(raw, ComponentSpec) else
              ComponentSpec(raw["type"], {k: v for k, v in raw.items() if k != "type"})
              for name, raw in composite.params["worlds"].items()}
    sequential = ComponentSpec("composite", {**composite.params, "parallel": False})
    # two sandboxes: children of comparable cost, where setting them up in parallel can show
    py_raw = composite.params["worlds"]["py"]
    two_python = ComponentSpec("composite", {"worlds": {"py": py_raw, "py2": py_raw}})
    child_calls = {"db": [ToolCall("sql_query", {"sql": "SELECT COUNT(*) FROM orders"})] * 5,
                   "py": [ToolCall("python_exec", {"code": "1 + 1"})] * 5}
    through = [ToolCall(f"{w}__{c.name}", c.arguments) for w, cs in child_calls.items() for c in cs]
    samples: dict[str, dict[str, list[float]]] = {k: {"reset": [], "close": [], "step": []} for k in
                                                  ("db", "py", "py_again", "composite", "composite_sequential",
                                                   "two_python")}
    db_through: list[float] = []
    await _cycle(composite, pack, task, through)  # warm imports, the sandbox probe, the sql snapshot cache
    for _ in range(repeat):  # interleaved, so load changes hit every variant alike
        for name, spec in worlds.items():
            r, c, s = await _cycle(spec, pack, task, child_calls[name])
            samples[name]["reset"].append(r)
            samples[name]["close"].append(c)
            samples[name]["step"] += s
        r, c, _ = await _cycle(worlds["py"], pack, task, [])
        samples["py_again"]["reset"].append(r)
        samples["py_again"]["close"].append(c)
        for key, spec in (("composite", composite), ("composite_sequential", sequential), ("two_python", two_python)):
            r, c, s = await _cycle(spec, pack, task, through if key == "composite" else [])
            samples[key]["reset"].append(r)
            samples[key]["close"].append(c)
            samples[key]["step"] += s
            if key == "composite":
                db_through += s[: len(child_calls["db"])]
    out: dict[str, Any] = {k: {part: _stats(v) for part, v in parts.items() if v} for k, parts in samples.items()}
    sums = [a + b for a, b in zip(samples["db"]["reset"], samples["py"]["reset"], strict=True)]
    out["sum_of_children"] = {"reset": _stats(sums)}
    two = [a + b for a, b in zip(samples["py"]["reset"], samples["py_again"]["reset"], strict=True)]
    out["sum_of_two_python"] = {"reset": _stats(two)}
    med = statistics.median
    out["ratios"] = {
        "composite_reset_vs_sum_of_children": round(med(samples["composite"]["reset"]) / med(sums), 3),
        "composite_reset_vs_slowest_child": round(med(samples["composite"]["reset"]) / max(
            med(samples["db"]["reset"]), med(samples["py"]["reset"])), 3),
        "sequential_reset_vs_sum_of_children": round(med(samples["composite_sequential"]["reset"]) / med(sums), 3),
        "two_python_reset_vs_sum_of_two": round(med(samples["two_python"]["reset"]) / med(two), 3),
    }
    out["step_overhead_ms"] = {
        "db_through_composite_minus_direct": round((med(db_through) - med(samples["db"]["step"])) * 1000, 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = parser.parse_args()
    import importlib.util

    if importlib.util.find_spec("agentsynth_python") is None:
        print("bench_reset_cost: skipped: the sql-python pack needs agentsynth-python", file=sys.stderr)
        return
    from agentsynth_python.sandbox import probe

    if why_not := probe():
        print(f"bench_reset_cost: skipped: the python world needs a bwrap sandbox: {why_not}", file=sys.stderr)
        return
    load_before = os.getloadavg()
    started = time.perf_counter()
    results = asyncio.run(measure(args.repeat))
    report = {
        "benchmark": "agentsynth-composite reset cost (sql-python: sql + python worlds)",
        "repeat": args.repeat, "seconds": round(time.perf_counter() - started, 1),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "load_before": [round(x, 2) for x in load_before],
                    "load_after": [round(x, 2) for x in os.getloadavg()]},
        "warm_pool": False,
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report["results"]["ratios"]), "->", args.out)


if __name__ == "__main__":
    main()
