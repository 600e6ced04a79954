"""Kernel benchmarks: CLI cold start and engine overhead per episode.

- cold start: `agentsynth --help` in a fresh interpreter vs `python -c pass` (same run).
- engine overhead: N episodes of a no-op world (one tool call, one answer) through the
  engine (in memory, no store) vs a raw loop calling the same methods directly.

Writes $AGENTSYNTH_BENCH_OUT/kernel.json (default benchmarks/results/).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from agentsynth_kernel import Answer, Observation, ToolCall, ToolSpec, Verdict, get_host, hookimpl
from agentsynth_kernel.engine import execute
from agentsynth_kernel.spec import ComponentSpec, Pack, RunSpec, Task

OUT = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results"))


def cold_start(repeats: int = 15) -> dict[str, float]:
    def timed(args: list[str]) -> float:
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run(args, check=True, capture_output=True)
            samples.append(time.perf_counter() - started)
        return statistics.median(samples)

    baseline = timed([sys.executable, "-c", "pass"])
    help_s = timed([sys.executable, "-m", "agentsynth_kernel", "--help"])
    return {"python_startup_s": round(baseline, 4), "agentsynth_help_s": round(help_s, 4),
            "agentsynth_help_minus_python_s": round(help_s - baseline, 4), "ratio_vs_python": round(help_s / baseline, 2)}


class NoopWorld:
    def reset(self, seed: int) -> Observation:
        return Observation("ready")

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("ping")]

    def step(self, call: ToolCall) -> Observation:
        return Observation("pong")

    def close(self) -> None:
        pass


class AsyncNoopWorld(NoopWorld):
    async def reset(self, seed: int) -> Observation:  # type: ignore[override]
        return Observation("ready")

    async def tools(self) -> list[ToolSpec]:  # type: ignore[override]
        return [ToolSpec("ping")]

    async def step(self, call: ToolCall) -> Observation:  # type: ignore[override]
        return Observation("pong")

    async def close(self) -> None:  # type: ignore[override]
        pass


class PingPolicy:
    def __init__(self) -> None:
        self.turn = 0

    async def act(self, state):
        self.turn += 1
        return ToolCall("ping", {}) if self.turn == 1 else Answer("done")


class PongChecker:
    def check(self, env, trajectory):
        return Verdict("pong", True, 1.0)


class BenchPlugin:
    @hookimpl
    def register_environments(self, register):
        register("bench_noop", NoopWorld)
        register("bench_noop_async", AsyncNoopWorld)

    @hookimpl
    def register_policies(self, register):
        register("bench_ping", PingPolicy)

    @hookimpl
    def register_checkers(self, register):
        register("bench_pong", PongChecker)


async def raw_loop(n: int, world_cls: type) -> float:
    started = time.perf_counter()
    for _ in range(n):
        env, policy, checker = world_cls(), PingPolicy(), PongChecker()
        for fn in (env.reset,):
            r = fn(0)
            if asyncio.iscoroutine(r):
                await r
        while True:
            action = await policy.act(None)
            if isinstance(action, Answer):
                break
            r = env.step(action)
            if asyncio.iscoroutine(r):
                await r
        checker.check(env, None)
        r = env.close()
        if asyncio.iscoroutine(r):
            await r
    return time.perf_counter() - started


async def engine_loop(n: int, env_type: str, concurrency: int) -> float:
    pack = Pack(id="bench", tasks=[Task("t", "ping once", [ComponentSpec("bench_pong")])],
                environment=ComponentSpec(env_type))
    spec = RunSpec(policy=ComponentSpec("bench_ping"), trials=n, concurrency=concurrency)
    started = time.perf_counter()
    report = await execute(spec, pack)
    elapsed = time.perf_counter() - started
    assert len(report.results) == n and all(r.passed for r in report.results), "benchmark episodes must pass"
    return elapsed


def engine_overhead(n: int = 2000) -> dict[str, object]:
    get_host().add_plugin(BenchPlugin(), "bench")
    results: dict[str, object] = {"episodes": n}
    for env_type, world in (("bench_noop", NoopWorld), ("bench_noop_async", AsyncNoopWorld)):
        raw = asyncio.run(raw_loop(n, world))
        for concurrency in (1, 16):
            eng = asyncio.run(engine_loop(n, env_type, concurrency))
            results[f"{env_type}_c{concurrency}"] = {
                "raw_us_per_episode": round(raw / n * 1e6, 1),
                "engine_us_per_episode": round(eng / n * 1e6, 1),
                "overhead_us_per_episode": round((eng - raw) / n * 1e6, 1),
                "ratio_vs_raw": round(eng / raw, 1),
            }
    return results


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()  # the machine is shared: its load goes next to the numbers
    result = {
        "benchmark": "kernel",
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
        "cold_start": cold_start(),
        "engine_overhead": engine_overhead(),
        "note": "sync worlds run on one thread per episode (thread hop per call); async worlds run on the loop",
    }
    result["machine"] = {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load_before],
                         "load_after": [round(x, 2) for x in os.getloadavg()]}
    (OUT / "kernel.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
