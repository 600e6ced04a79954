"""Throughput of `agentsynth generate` against the scripted teacher, with a baseline measured in the same run.

    python plugins/agentsynth-generate/bench/bench_throughput.py [--items 40] [--out bench/results.json]

Baseline: the same number of bare LLMClient requests the generation sent, to the same server (what the
model calls alone cost). Reported: items/s per mode, LLM requests per item, and the generator's overhead
over the baseline (generation seconds / baseline seconds for as many requests), plus os.getloadavg()
before and after, since the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "unused")


def _teacher():  # the README's scripted stand-in teacher
    spec = importlib.util.spec_from_file_location("scripted_teacher", HERE.parent / "examples" / "scripted_teacher.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


async def baseline(base_url: str, requests: int) -> float:
    from agentsynth_kernel import LLMClient

    client = LLMClient(model="openai/scripted", api_base=base_url, cache=False)
    messages = [{"role": "user", "content": "What will the weather be in Lisbon?"}]
    started = time.perf_counter()
    for _ in range(requests):
        await client.complete(messages)
    elapsed = time.perf_counter() - started
    await client.aclose()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()

    from agentsynth_generate import generate_records
    from agentsynth_kernel import get_host
    from agentsynth_kernel.testing import ScriptedLLMServer

    tools = str(HERE.parent / "examples" / "weather_tools.json")
    load_before = os.getloadavg()
    results = {}
    get_host()  # plugin loading is not part of any measurement
    with ScriptedLLMServer(handler=_teacher(), log_requests=False) as server:
        asyncio.run(baseline(server.base_url, 20))  # warm-up
        for mode in ("single_agent", "back", "multi_agent"):
            params = {"model": "openai/scripted", "api_base": server.base_url, "cache": False, "tools": tools,
                      "query": ["What will the weather be in Lisbon for the next 3 days?"], "n": args.items, "mode": [mode]}
            started = time.perf_counter()
            records, report = generate_records(params)
            elapsed = time.perf_counter() - started
            base = asyncio.run(baseline(server.base_url, report["llm_requests"]))
            results[mode] = {
                "items": report["planned"], "accepted": report["accepted"], "seconds": round(elapsed, 3),
                "items_per_s": round(report["planned"] / elapsed, 2), "llm_requests": report["llm_requests"],
                "requests_per_item": round(report["llm_requests"] / report["planned"], 2),
                "baseline_seconds_same_requests": round(base, 3), "overhead_ratio": round(elapsed / base, 2),
            }
    out = {"benchmark": "agentsynth-generate throughput (scripted teacher on 127.0.0.1, simulated tools)",
           "python": sys.version.split()[0], "cpus": os.cpu_count(), "loadavg_before": load_before,
           "loadavg_after": os.getloadavg(), "results": results}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
