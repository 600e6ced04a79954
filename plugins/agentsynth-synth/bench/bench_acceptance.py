"""Cost of the challenger's acceptance modes over the sql ``core`` pack (real SQLite worlds) against
the scripted stand-in (``agentsynth_synth.demo``), with a baseline measured in the same run.

    python plugins/agentsynth-synth/bench/bench_acceptance.py [--items 12] [--concurrency 4] [--repeats 3] [--latency 0.05]

Per mode (``single``; ``verifiable`` with 4+4 attempts; the same with ``short_circuit_strong``):
seconds (best of ``--repeats``, after a warm-up run), accepted, LLM requests (per accepted item), episodes played, the run store's size and its
``synth_step`` events (what durability costs), and the time of a rerun on the finished run
directory (restores everything, no request). Baseline: as many bare ``LLMClient`` requests to the
same server, one at a time, and as many bare ``noop`` episodes in the same world, so the loop's own
overhead can be told from the model's and the world's. ``os.getloadavg()`` before and after: the
machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def bare_requests(base_url: str, n: int) -> float:
    from agentsynth_kernel import LLMClient

    client = LLMClient(model="openai/strong", api_base=base_url, cache=False)
    started = time.perf_counter()
    for _ in range(n):
        await client.complete([{"role": "user", "content": "Set the price of the Desk Lamp (LMP-01) to $59.00."}])
    elapsed = time.perf_counter() - started
    await client.aclose()
    return elapsed


async def bare_episodes(n: int) -> float:
    from agentsynth_kernel import ComponentSpec, load_pack
    from agentsynth_synth.core import SynthContext

    pack = load_pack("core")
    ctx = SynthContext(pack, cache=False)
    task = pack.tasks[0]
    started = time.perf_counter()
    for i in range(n):
        await ctx.episode(task, ComponentSpec("noop"), seed=i)
    elapsed = time.perf_counter() - started
    await ctx.llm_client.aclose()
    return elapsed


def store_stats(run_dir: Path) -> dict[str, Any]:
    size = sum(p.stat().st_size for p in run_dir.glob("run.sqlite*"))
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        steps, step_bytes = db.execute(
            "SELECT count(*), coalesce(sum(length(data)), 0) FROM events WHERE kind = 'synth_step'").fetchone()
    finally:
        db.close()
    return {"store_bytes": size, "synth_step_events": steps, "synth_step_bytes": step_bytes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the stand-in takes per answer")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()

    from agentsynth_kernel.testing import ScriptedLLMServer
    from agentsynth_synth import run_generator
    from agentsynth_synth.demo import demo_handler

    load_before = os.getloadavg()
    results: dict[str, Any] = {}
    with ScriptedLLMServer(handler=demo_handler, log_requests=False, latency=args.latency) as server, \
            tempfile.TemporaryDirectory() as tmp:
        def solver(model: str) -> dict[str, Any]:
            return {"type": "llm", "model": f"openai/{model}", "api_base": server.base_url}

        base = {"model": "openai/challenger", "api_base": server.base_url, "strong": [solver("strong")],
                "weak": [solver("weak")], "n": args.items, "rounds": 2}
        modes = {"single": base,
                 "verifiable": {**base, "acceptance": "verifiable"},
                 "verifiable_short_circuit": {**base, "acceptance": "verifiable", "short_circuit_strong": True}}
        run_generator("challenger", "core", {**base, "n": 2}, cache=False)  # warm-up: imports, the seeded world
        for name, params in modes.items():
            seconds = float("inf")
            for rep in range(args.repeats):  # the best of a few: the machine is shared
                run_dir = Path(tmp) / f"{name}-{rep}"
                started = time.perf_counter()
                report = run_generator("challenger", "core", params, run_dir=run_dir, cache=False,
                                       concurrency=args.concurrency)
                seconds = min(seconds, time.perf_counter() - started)
            started = time.perf_counter()
            again = run_generator("challenger", "core", params, run_dir=run_dir, cache=False)
            resume_s = time.perf_counter() - started
            assert again.restored_items == args.items and again.done_items == 0
            stats = store_stats(run_dir)
            results[name] = {
                "items": args.items, "accepted": len(report.accepted), "seconds": round(seconds, 3),
                "items_per_s": round(args.items / seconds, 2), "llm_requests": report.requests,
                "requests_per_accepted": report.requests_per_accepted,
                "rerun_restore_seconds": round(resume_s, 3), **stats,
            }
        total = max(r["llm_requests"] for r in results.values())
        results["baseline"] = {
            "bare_llm_requests": total,
            "bare_llm_seconds": round(asyncio.run(bare_requests(server.base_url, total)), 3),
            "bare_noop_episodes": 40,
            "bare_noop_episode_seconds": round(asyncio.run(bare_episodes(40)), 3),
        }
    out = {"benchmark": "agentsynth-synth challenger acceptance modes (scripted stand-in on 127.0.0.1, sql core pack)",
           "python": platform.python_version(), "cpus": os.cpu_count(), "concurrency": args.concurrency,
           "repeats": args.repeats, "server_latency_s": args.latency,
           "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()), "results": results}
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
