"""The litellm transport against calling ``litellm.acompletion`` directly, measured in the same run.

Both send ``openai/bench`` through litellm to a local OpenAI-compatible server with 50 ms latency
(its own process, so only the client's CPU is counted), at concurrency 64 (and 16). Runs are
interleaved in ABBA order (direct, transport, transport, direct, ...) so a burst of load from other
processes on a shared machine hits both alike; each run is ``concurrency x WAVES`` requests. The
transport goes through the whole client (``LLMClient(transport="litellm", cache=False)``: route,
budget reservation, concurrency limit, retries, response normalisation), so the difference is
everything agentsynth adds. Also measured: the client's own CPU per request with litellm replaced
by a coroutine that returns a prebuilt response (what agentsynth adds, without litellm's noise).

Target: the transport at least as fast as direct (throughput ratio >= 1.0, CPU ratio <= 1.0, within
the run-to-run spread). On a loaded 2-core machine the throughput of one run swings by 2x; the CPU
per request (litellm's work is CPU-bound) is steadier, and the stubbed overhead is exact.
Writes ``$AGENTSYNTH_BENCH_OUT/llm_litellm.json`` (default benchmarks/results/) with the load average
at the start and the end.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
sys.path.insert(0, str(Path(__file__).parent))

import bench_llm  # noqa: E402  (the server and the driver)

WAVES = int(os.environ.get("BENCH_LLM_WAVES", "8"))
REPEATS = int(os.environ.get("BENCH_LLM_REPEATS", "6"))  # runs per client per concurrency (even: ABBA)
CONCURRENCIES = tuple(int(c) for c in os.environ.get("BENCH_LLM_CONCURRENCY", "64,16").split(","))
MESSAGES = bench_llm.MESSAGES


async def overhead_ms(base: str, n: int = 3000) -> dict[str, float]:
    """CPU per request of the client around litellm, with litellm.acompletion stubbed by a prebuilt
    response (a stand-in for litellm, so the number is the client's alone)."""
    import litellm

    from agentsynth_kernel.llm import LLMClient

    real = await litellm.acompletion(model="openai/bench", messages=MESSAGES, api_base=base, api_key="bench")
    original = litellm.acompletion

    async def prebuilt(**_: object) -> object:
        return real

    litellm.acompletion = prebuilt
    try:
        client = LLMClient("openai/bench", api_base=base, api_key="bench", cache=False, transport="litellm")
        await client.complete(MESSAGES)
        cpu0 = time.process_time()
        await asyncio.gather(*(client.complete(MESSAGES) for _ in range(n)))
        client_ms = 1000 * (time.process_time() - cpu0) / n
        cpu0 = time.process_time()
        await asyncio.gather(*(prebuilt() for _ in range(n)))
        bare_ms = 1000 * (time.process_time() - cpu0) / n
    finally:
        litellm.acompletion = original
    return {"client_cpu_ms_per_request": round(client_ms, 4), "bare_await_cpu_ms_per_request": round(bare_ms, 4)}


async def run_all(base: str) -> tuple[list[dict[str, object]], dict[str, float]]:
    import litellm

    from agentsynth_kernel.llm import LLMClient

    rows: list[dict[str, object]] = []
    for concurrency in CONCURRENCIES:
        client = LLMClient("openai/bench", api_base=base, api_key="bench", cache=False, transport="litellm",
                           concurrency=concurrency)

        async def direct() -> None:
            await litellm.acompletion(model="openai/bench", messages=MESSAGES, api_base=base, api_key="bench")

        async def transport(client: LLMClient = client) -> None:
            await client.complete(MESSAGES)

        calls = {"litellm.acompletion (direct)": direct, "agentsynth litellm transport": transport}
        for call in calls.values():  # warm-up: imports, connections
            await bench_llm.drive(call, concurrency, concurrency * 2)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
        total = concurrency * WAVES
        order = list(calls)
        for repeat in range(REPEATS):
            for name in (order if repeat % 2 == 0 else order[::-1]):
                wall, cpu = await bench_llm.drive(calls[name], concurrency, total)
                runs[name].append((total / wall, 1000 * cpu / total))
        await client.aclose()
        pair_ratios = [t[0] / d[0] for d, t in zip(runs[order[0]], runs[order[1]], strict=True)]
        cpu_ratios = [t[1] / d[1] for d, t in zip(runs[order[0]], runs[order[1]], strict=True)]
        for name, values in runs.items():
            rates = [v[0] for v in values]
            row = {"client": name, "concurrency": concurrency, "requests_per_run": total, "runs": len(values),
                   "requests_per_s_median": round(statistics.median(rates), 1),
                   "requests_per_s_best": round(max(rates), 1),
                   "requests_per_s_all": [round(r, 1) for r in rates],
                   "cpu_ms_per_request_median": round(statistics.median(v[1] for v in values), 3)}
            print(json.dumps(row), flush=True)
            rows.append(row)
        rows.append({"concurrency": concurrency, "transport_over_direct_per_pair": [round(r, 3) for r in pair_ratios],
                     "transport_over_direct_median": round(statistics.median(pair_ratios), 3),
                     "cpu_transport_over_direct_per_pair": [round(r, 3) for r in cpu_ratios],
                     "cpu_transport_over_direct_median": round(statistics.median(cpu_ratios), 3)})
        print(json.dumps(rows[-1]), flush=True)
    return rows, await overhead_ms(base)


def main() -> None:
    load_start = os.getloadavg()
    proc, base = bench_llm.start_server()
    bench_llm.SERVER_PID = proc.pid
    try:
        rows, overhead = asyncio.run(run_all(base))
    finally:
        proc.terminate()
        proc.wait(5)
    ratios = {r["concurrency"]: r["transport_over_direct_median"] for r in rows if "transport_over_direct_median" in r}
    cpu = {r["concurrency"]: r["cpu_transport_over_direct_median"] for r in rows if "cpu_transport_over_direct_median" in r}
    result = {
        "benchmark": "litellm transport vs litellm.acompletion direct",
        "server_latency_s": bench_llm.LATENCY,
        "litellm_version": importlib.metadata.version("litellm"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "load_average_at_start": load_start,
        "load_average_at_end": os.getloadavg(),
        "rows": rows,
        "client_overhead_without_litellm": overhead,
        "transport_over_direct_median_by_concurrency": ratios,
        # throughput is CPU-bound here (litellm costs ~7 ms of CPU per request): on a loaded machine the
        # CPU ratio (lower is better) is the steadier number
        "cpu_per_request_transport_over_direct_median_by_concurrency": cpu,
        "target": "transport >= direct (ratio >= 1.0 within run-to-run spread)",
    }
    out_dir = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "llm_litellm.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))


if __name__ == "__main__":
    main()
