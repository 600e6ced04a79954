"""LLM client overhead: client CPU per request and % of ideal throughput against a local
OpenAI-compatible server with 50 ms latency, at concurrency 16 and 64.

Compared in the same run: agentsynth's fast path (``LLMClient``, OpenAI-compatible transport,
no cache), the same with a token budget (reserve/settle on every request), a raw aiohttp loop
(what the machine and server allow: the ceiling) and plain ``litellm.acompletion`` (the
baseline). Fast clients: 5 runs each of concurrency x 40 requests, interleaved (A B C A B C ...)
so load from other processes hits them alike; the median and the best run are reported. litellm:
one run of concurrency x 10 (it is slow). The raw aiohttp loop shows what this machine and server
allow at the moment: on a shared, loaded machine, compare the fast path with it. The server runs in its own process
(``python -m agentsynth_kernel.testing``), so only the client's CPU is counted.
Ideal throughput = concurrency / latency. Targets: <= 0.5 ms CPU/request, >= 75 % of ideal at 64.

Writes ``$AGENTSYNTH_BENCH_OUT/llm.json`` (default benchmarks/results/).
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

LATENCY = 0.05
WAVES = int(os.environ.get("BENCH_LLM_WAVES", "40"))  # requests per run = concurrency * WAVES
REPEATS = int(os.environ.get("BENCH_LLM_REPEATS", "5"))  # fast clients: runs each, interleaved
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say done."}]


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentsynth_kernel.testing", "--latency", str(LATENCY)],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.removeprefix("listening on ")


SERVER_PID = 0


def server_cpu() -> float:
    """CPU seconds the server process has used (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


async def drive(call, concurrency: int, total: int) -> tuple[float, float]:
    """Run ``total`` calls with ``concurrency`` in flight; returns (wall seconds, client CPU seconds)."""
    queue = iter(range(total))

    async def worker() -> None:
        for _ in queue:
            await call()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - wall0, time.process_time() - cpu0


async def measure_group(clients: list[tuple[str, object]], concurrency: int, waves: int = WAVES,
                        repeats: int = REPEATS) -> list[dict[str, float]]:
    """Measure several clients at one concurrency, interleaved run by run (A B C A B C ...), so a burst
    of load from other processes on this shared machine hits them all alike. Reports the median
    run and the best run of each."""
    ready = []
    for name, make_call in clients:
        call, close = await make_call(concurrency)
        await drive(call, concurrency, concurrency * 2)  # warm-up: connections, imports
        ready.append((name, call, close, []))
    total = concurrency * waves
    for _ in range(repeats):
        for _name, call, _close, runs in ready:
            server0 = server_cpu()
            wall, cpu = await drive(call, concurrency, total)
            runs.append((wall, cpu, server_cpu() - server0))
    rows = []
    ideal = concurrency / LATENCY
    for name, _call, close, runs in ready:
        await close()
        walls = sorted(r[0] for r in runs)
        cpus = sorted(r[1] for r in runs)
        median_wall, best_wall = walls[len(walls) // 2], walls[0]
        row = {
            "client": name, "concurrency": concurrency, "requests_per_run": total, "runs": len(runs),
            "requests_per_s": round(total / median_wall, 1), "ideal_per_s": round(ideal, 1),
            "pct_of_ideal": round(100 * total / median_wall / ideal, 1),
            "pct_of_ideal_best_run": round(100 * total / best_wall / ideal, 1),
            "cpu_ms_per_request": round(1000 * cpus[len(cpus) // 2] / total, 3),
            "server_cpu_ms_per_request": round(1000 * sum(r[2] for r in runs) / (total * len(runs)), 3),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    global SERVER_PID
    proc, base = start_server()
    SERVER_PID = proc.pid
    rows = []
    try:
        from agentsynth_kernel.llm import LLMClient

        async def fast(concurrency: int, budget: int | None = None):
            client = LLMClient("openai/bench", api_base=base, api_key="bench", cache=False, concurrency=concurrency,
                               budget_tokens=budget, max_tokens=64)

            async def call():
                await client.complete(MESSAGES)

            return call, client.aclose

        async def fast_budget(concurrency: int):
            return await fast(concurrency, budget=10**12)

        async def raw_aiohttp(concurrency: int):
            import aiohttp
            import msgspec

            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
            body = msgspec.json.encode({"model": "bench", "messages": MESSAGES})
            headers = {"content-type": "application/json", "authorization": "Bearer bench"}

            async def call():
                async with session.post(base + "/chat/completions", data=body, headers=headers) as response:
                    msgspec.json.decode(await response.read())

            return call, session.close

        async def plain_litellm(concurrency: int):
            import litellm

            async def call():
                await litellm.acompletion(model="openai/bench", messages=MESSAGES, api_base=base, api_key="bench")

            async def close():
                return None

            return call, close

        async def run_all() -> None:
            for concurrency in (16, 64):
                rows.extend(await measure_group([
                    ("agentsynth-fast-path", fast), ("agentsynth-fast-path+budget", fast_budget),
                    ("raw-aiohttp-loop (ceiling)", raw_aiohttp),
                ], concurrency))
                rows.extend(await measure_group([("litellm.acompletion", plain_litellm)], concurrency, waves=10,
                                                repeats=1))

        asyncio.run(run_all())
    finally:
        proc.terminate()
        proc.wait(5)

    def pick(client: str, c: int) -> dict[str, float]:
        return next(r for r in rows if r["client"] == client and r["concurrency"] == c)

    fast64, lite64 = pick("agentsynth-fast-path", 64), pick("litellm.acompletion", 64)
    result = {
        "benchmark": "llm client overhead",
        "server_latency_s": LATENCY,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "rows": rows,
        "targets": {"cpu_ms_per_request_max": 0.5, "pct_of_ideal_at_64_min": 75.0},
        "fast_path_meets_cpu_target": all(
            r["cpu_ms_per_request"] <= 0.5 for r in rows if r["client"] == "agentsynth-fast-path"),
        "fast_path_meets_throughput_target_median": fast64["pct_of_ideal"] >= 75.0,
        "fast_path_meets_throughput_target_best_run": fast64["pct_of_ideal_best_run"] >= 75.0,
        "load_average_at_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "fast_path_pct_of_raw_aiohttp_at_64": round(
            100 * fast64["requests_per_s"] / pick("raw-aiohttp-loop (ceiling)", 64)["requests_per_s"], 1),
        "speedup_vs_litellm_at_64": round(fast64["requests_per_s"] / lite64["requests_per_s"], 2),
        "cpu_ratio_litellm_over_fast_at_64": round(lite64["cpu_ms_per_request"] / fast64["cpu_ms_per_request"], 2),
    }
    out_dir = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "llm.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))


if __name__ == "__main__":
    main()
