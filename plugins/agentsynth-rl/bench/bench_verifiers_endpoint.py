"""What the verifiers export adds per tool call: the core pack's tool calls through the loopback
session endpoint (what the exported package's MCP tool server calls), against the same calls
straight on the same kind of world (AsyncPackEnv.step), in the same run.

Needs verifiers (the ``verifiers`` extra) and agentsynth-sql:

    python plugins/agentsynth-rl/bench/bench_verifiers_endpoint.py [--calls 400] [--out FILE]

Writes JSON (default plugins/agentsynth-rl/bench/results/verifiers_endpoint.json) with the machine
load at start and end.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

if importlib.util.find_spec("verifiers") is None:  # say so and exit 0: a bench session goes on without it
    print("bench_verifiers_endpoint: skipped: needs verifiers (pip install 'agentsynth-rl[verifiers]')", file=sys.stderr)
    sys.exit(0)

import httpx  # noqa: E402

from agentsynth_rl.env import AsyncPackEnv  # noqa: E402
from agentsynth_rl.loop import on_loop  # noqa: E402
from agentsynth_rl.verifiers_env import PackData, sessions  # noqa: E402

CALL = {"tool": "sql_query", "arguments": {"sql": "SELECT email FROM customers WHERE name = 'Dana Whitfield'"}}


async def direct(calls: int) -> list[float]:
    env = AsyncPackEnv("core", max_steps=calls + 1)
    await env.reset(seed=1, options={"task_id": "lookup-customer-email"})
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        await env.step(CALL)
        out.append(time.perf_counter() - t)
    await env.close()
    return out


async def through_endpoint(calls: int) -> tuple[list[float], float]:
    registry = await on_loop(sessions())
    t = time.perf_counter()
    sid = await on_loop(registry.open(PackData(pack="core", task_id="lookup-customer-email", split="train", seed=1,
                                               max_steps=calls + 1), 60.0))
    open_s = time.perf_counter() - t
    out = []
    async with httpx.AsyncClient(timeout=60) as client:  # one client, as the tool server has per call
        for _ in range(calls):
            t = time.perf_counter()
            r = await client.post(f"{registry.url}/sessions/{sid}/call", json={"name": CALL["tool"],
                                  "arguments": CALL["arguments"]}, headers={"Authorization": f"Bearer {registry.token}"})
            r.raise_for_status()
            out.append(time.perf_counter() - t)
    await on_loop(registry.finish(sid, "dana.whitfield@example.com"))
    await on_loop(registry.stop())
    return out, open_s


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"calls": len(samples), "calls_per_s": round(len(samples) / sum(samples), 1),
            "median_ms": round(statistics.median(samples) * 1000, 3),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "verifiers_endpoint.json")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    base = asyncio.run(on_loop(direct(args.calls)))
    endpoint, open_s = asyncio.run(through_endpoint(args.calls))
    result = {
        "benchmark": "agentsynth-rl verifiers export: tool calls through the session endpoint vs direct",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_avg_1m": load_start,
                    "load_avg_1m_end": os.getloadavg()[0]},
        "pack": "core", "task": "lookup-customer-email",
        "direct_env_step": summary(base),
        "session_endpoint": summary(endpoint),
        "open_world_s": round(open_s, 4),
        "overhead_per_call_ms": round((statistics.median(endpoint) - statistics.median(base)) * 1000, 3),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
