"""agentsynth-mcp performance: server start cost, per-call latency, episode latency, orphans.

Writes ``$AGENTSYNTH_BENCH_OUT/mcp.json`` (default ``benchmarks/results/mcp.json``).

1. Start cost of a stdio MCP server (the toy test server, written with the SDK's MCPServer):
   spawn + handshake + discovery (``McpSession.start``) and ``close``, against two baselines measured
   in the same run: a bare ``python -c pass`` and ``python -c 'import mcp.server.mcpserver'`` (what
   any Python MCP server pays before it can answer). The ratio start / import-baseline shows what the
   session itself adds.
2. Per-call latency: N ``echo`` calls through ``McpSession`` (a queue + future hop to the session's
   own task) against the same calls on a bare SDK ``Client`` used directly in one task (baseline).
3. Episode latency: the mcp-tickets pack through the engine with the oracle, concurrency 1 and 4:
   wall time, mean episode time, pass rate.
4. Orphans: toy / tickets server processes still alive after everything closed (target 0).
5. Hostile agents: the plugin's flood / huge-argument / nesting exploits on mcp-tickets tasks: peak RSS growth of
   this process, the largest observation and trajectory kept (bytes), and that nothing passed.

Usage: python benchmarks/bench_mcp.py [--starts N] [--calls N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel.engine import execute  # noqa: E402
from agentsynth_kernel.spec import ComponentSpec, RunSpec, load_pack  # noqa: E402
from agentsynth_mcp.plugin import PACKS  # noqa: E402
from agentsynth_mcp.session import Endpoint, McpSession  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "plugins" / "agentsynth-mcp" / "tests" / "servers" / "toy_server.py"


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_ms": ms(statistics.median(samples)), "min_ms": ms(min(samples)), "max_ms": ms(max(samples)),
            "n": len(samples)}


def time_process(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True)
    return time.perf_counter() - started


async def bench_start(n: int) -> dict:
    starts, closes, pids = [], [], []
    for _ in range(n):
        session = McpSession(Endpoint("stdio", command=sys.executable, args=[str(TOY)]))
        t0 = time.perf_counter()
        await session.start()
        t1 = time.perf_counter()
        pids.append(int((await session.call_tool("pid")).structured_content["result"]))
        t2 = time.perf_counter()
        await session.close()
        closes.append(time.perf_counter() - t2)
        starts.append(t1 - t0)
    bare = [time_process(["-c", "pass"]) for _ in range(n)]
    imports = [time_process(["-c", "import mcp.server.mcpserver"]) for _ in range(n)]
    return {
        "session_start": summary(starts),
        "session_close": summary(closes),
        "baseline_python_start": summary(bare),
        "baseline_python_import_mcp_server": summary(imports),
        "ratio_start_vs_import_baseline": round(statistics.median(starts) / statistics.median(imports), 2),
        "_pids": pids,
    }


async def bench_calls(n: int) -> dict:
    from mcp import Client, StdioServerParameters

    session = McpSession(Endpoint("stdio", command=sys.executable, args=[str(TOY)]))
    await session.start()
    try:
        for _ in range(5):
            await session.call_tool("echo", {"text": "warm"})
        ours = []
        for i in range(n):
            t = time.perf_counter()
            await session.call_tool("echo", {"text": f"call {i}"})
            ours.append(time.perf_counter() - t)
    finally:
        await session.close()
    base = []
    async with Client(StdioServerParameters(command=sys.executable, args=[str(TOY)]), cache=None) as client:
        for _ in range(5):
            await client.call_tool("echo", {"text": "warm"})
        for i in range(n):
            t = time.perf_counter()
            await client.call_tool("echo", {"text": f"call {i}"})
            base.append(time.perf_counter() - t)
    return {
        "mcp_session_call": summary(ours),
        "baseline_bare_sdk_client_call": summary(base),
        "ratio_session_vs_bare_client": round(statistics.median(ours) / statistics.median(base), 2),
    }


async def bench_pack(concurrency: int, only: list[str]) -> dict:
    pack = load_pack(PACKS / "tickets")
    spec = RunSpec(policy=ComponentSpec("oracle"), pack="mcp-tickets", concurrency=concurrency, only=only)
    started = time.perf_counter()
    report = await execute(spec, pack)
    wall = time.perf_counter() - started
    results = report.results
    return {
        "concurrency": concurrency,
        "episodes": len(results),
        "passed": sum(r.passed for r in results),
        "wall_s": round(wall, 2),
        "episodes_per_s": round(len(results) / wall, 2),
        "episode_mean_ms": ms(statistics.mean(r.duration_s for r in results)),
        "episode_median_ms": ms(statistics.median(r.duration_s for r in results)),
    }


def json_size(value: object) -> int:
    """Bytes of ``value`` as JSON. mcp.nesting_and_encoding's arguments hold a lone surrogate, which
    msgspec cannot encode as UTF-8: those are measured as ASCII-escaped JSON (a surrogate is 6 bytes)."""
    import msgspec

    try:
        return len(msgspec.json.encode(value))
    except UnicodeEncodeError:
        return len(json.dumps(msgspec.to_builtins(value), separators=(",", ":")))


async def bench_hostile(tasks: list[str]) -> dict:
    import resource

    from agentsynth_kernel.episode import EpisodeConfig, run_episode
    from agentsynth_kernel.plugins import get_host
    from agentsynth_kernel.testing.adversarial import GENERIC_EXPLOITS
    from agentsynth_mcp.exploits import mcp_exploits

    host = get_host()
    pack = load_pack(PACKS / "tickets")
    chosen = [e for e in (*GENERIC_EXPLOITS, *mcp_exploits())
              if e.name in ("mcp.flood", "mcp.nesting_and_encoding", "generic.huge_arguments", "generic.step_flood")]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    largest_obs = largest_traj = passed = episodes = 0
    for exploit in chosen:
        for task in [t for t in pack.tasks if t.id in tasks]:
            actions = exploit.actions
            script = (lambda state, a=actions: a(state, pack)) if callable(actions) else list(actions)
            config = EpisodeConfig(ComponentSpec("scripted", {"actions": script}), max_steps=30, timeout=180)
            result = await run_episode(host, pack, task, 0, 0, config)
            episodes += 1
            passed += result.passed
            largest_traj = max(largest_traj, json_size(result.trajectory))
            for step in result.trajectory.steps:
                if step.observation is not None:
                    largest_obs = max(largest_obs, json_size(step.observation))
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"exploits": [e.name for e in chosen], "episodes": episodes, "passed": passed,
            "largest_observation_bytes": largest_obs, "largest_trajectory_bytes": largest_traj,
            "peak_rss_growth_mb": round((rss_after - rss_before) / 1024, 1), "peak_rss_mb": round(rss_after / 1024, 1),
            "observation_cap_bytes": 65536}


def alive_servers() -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X") and (str(TOY).encode() in cmdline or b"packs/tickets/server.py" in cmdline):
            found.append(int(proc.name))
    return found


async def main(args: argparse.Namespace) -> dict:
    before = set(alive_servers())
    start = await bench_start(args.starts)
    pids = start.pop("_pids")
    calls = await bench_calls(args.calls)
    pack = await bench_pack(1, args.only)
    pack4 = await bench_pack(4, args.only)
    hostile = await bench_hostile(args.only or ["close-vpn", "export-bob"])
    await asyncio.sleep(0.2)
    leftover = [p for p in alive_servers() if p not in before]
    return {
        "benchmark": "mcp",
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_avg_1m": round(os.getloadavg()[0], 2)},
        "server_start": start,
        "calls": calls,
        "pack_oracle": [pack, pack4],
        "hostile_agents": hostile,
        "orphans": {"server_processes_left": len(leftover), "session_pids_alive": sum(
            1 for p in pids if Path(f"/proc/{p}").exists() and p in leftover)},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="fewer samples, 4 pack tasks")
    parser.add_argument("--only", nargs="*", default=[])
    ns = parser.parse_args()
    if ns.quick:
        ns.starts, ns.calls = 2, 30
        ns.only = ns.only or ["close-vpn", "export-bob", "reopen-oncall", "carol-leave"]
    result = asyncio.run(main(ns))
    out_dir = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", ROOT / "benchmarks" / "results"))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "mcp.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
