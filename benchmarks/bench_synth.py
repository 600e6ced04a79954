"""agentsynth-synth performance: what the generator runner costs on top of the kernel's engine.

Writes ``$AGENTSYNTH_BENCH_OUT/synth.json`` (default ``benchmarks/results/synth.json``).

1. ``forward`` with the oracle as the only teacher on the SQL ``core`` pack (every task, R rollouts,
   all R in flight) against the kernel engine (``execute``, trials=R, concurrency=R) playing the same
   episodes with the oracle, in the same process: wall time per episode and the ratio (target: the
   runner adds < 25 %; it also runs one fingerprint checker per episode and writes each item in one
   store transaction).
2. ``replay_filter`` over the engine's stored trajectories: trajectories checked per second
   (a static pass plus one replay in a fresh world each).
3. ``back_translation`` against the scripted OpenAI-compatible server on 127.0.0.1: items per
   second, LLM requests per accepted item, and the same run again with a warm cache (requests sent:
   target 0).

Usage: python benchmarks/bench_synth.py [--rounds R] [--items N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel.engine import execute  # noqa: E402
from agentsynth_kernel.spec import ComponentSpec, RunSpec, load_pack  # noqa: E402
from agentsynth_kernel.testing import ScriptedLLMServer, reply, tool_calls  # noqa: E402
from agentsynth_synth import run_generator  # noqa: E402


def engine_time(pack, rounds: int, tmp: Path, name: str = "engine") -> tuple[float, int]:
    t0 = time.perf_counter()
    report = asyncio.run(execute(RunSpec(policy=ComponentSpec("oracle"), trials=rounds, concurrency=rounds), pack,
                                 run_dir=tmp / name))
    return time.perf_counter() - t0, len(report.results)


def forward_time(pack, rounds: int, tmp: Path, name: str = "forward") -> tuple[float, int]:
    # one item per task, `rounds` rollouts of it in flight together: the engine's trials x concurrency
    t0 = time.perf_counter()
    report = run_generator("forward", pack, {"teachers": [{"type": "oracle"}], "rollouts": rounds,
                                             "consensus": False}, cache=False, run_dir=tmp / name)
    return time.perf_counter() - t0, len(report.accepted)


def bt_server() -> ScriptedLLMServer:
    def handle(request):
        user = next(m["content"] for m in request["messages"] if m["role"] == "user")
        k = sum(1 for m in request["messages"] if m["role"] == "assistant")
        if request["model"] == "writer":
            email = re.findall(r"SET email = '([^']+)'", user)[-1]
            return reply(json.dumps({"instruction": f"Dana's new email is {email}, please update it.",
                                     "probes": [{"tool": "sql_query",
                                                 "arguments": {"sql": "SELECT email FROM customers"}}]}))
        n = re.search(r"Focus: (\w+)\.", user).group(1)
        if k == 0:
            return tool_calls(("sql_query", {"sql": "SELECT id, email FROM customers WHERE name = 'Dana Whitfield'"}))
        if k == 1:
            return tool_calls(("sql_execute", {"sql": f"UPDATE customers SET email = 'dana{n}@example.com' "
                                                     "WHERE name = 'Dana Whitfield'"}))
        return reply("done")

    return ScriptedLLMServer(handler=handle)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--items", type=int, default=20)
    args = ap.parse_args()
    load_before = os.getloadavg()  # the machine is shared: its load goes next to the numbers
    pack = load_pack("core")
    out: dict = {"python": sys.version.split()[0], "platform": platform.platform(), "pack": pack.id,
                 "tasks": len(pack.tasks)}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        forward_time(pack, 1, tmp, "warm-forward")  # warm-up: imports, SQL snapshots
        engine_time(pack, 1, tmp, "warm-engine")
        # alternate, best of 5 each (the machine is shared: the minimum is the least disturbed run)
        engine_runs, forward_runs = [], []
        for i in range(5):
            engine_runs.append(engine_time(pack, args.rounds, tmp, f"engine{'' if i == 0 else i}"))
            forward_runs.append(forward_time(pack, args.rounds, tmp, f"forward{i}"))
        engine_s, engine_n = min(engine_runs)
        forward_s, forward_n = min(forward_runs)
        out["forward_vs_engine"] = {
            "episodes": engine_n, "engine_ms_per_episode": round(engine_s / engine_n * 1000, 2),
            "forward_ms_per_episode": round(forward_s / forward_n * 1000, 2), "repeats": 5,
            "ratio": round(forward_s / forward_n / (engine_s / engine_n), 3), "forward_accepted": forward_n,
        }
        t0 = time.perf_counter()
        report = run_generator("replay_filter", pack, {"input": str(tmp / "engine")}, cache=False)
        secs = time.perf_counter() - t0
        out["replay_filter"] = {"trajectories": report.planned, "kept": len(report.accepted),
                                "per_second": round(report.planned / secs, 1)}
        with bt_server() as server:
            params = {"model": "openai/writer", "api_base": server.base_url, "n": args.items,
                      "explorer": {"type": "llm", "model": "openai/explorer", "api_base": server.base_url},
                      "focus": [str(i) for i in range(args.items)]}
            cache = tmp / "cache"
            t0 = time.perf_counter()
            cold = run_generator("back_translation", pack, params, cache=cache, concurrency=4)
            cold_s = time.perf_counter() - t0
            sent = server.count
            t0 = time.perf_counter()
            warm = run_generator("back_translation", pack, params, cache=cache, concurrency=4)
            warm_s = time.perf_counter() - t0
            out["back_translation"] = {
                "items": args.items, "accepted": len(cold.accepted), "rejected": dict(cold.rejected),
                "items_per_second": round(args.items / cold_s, 2),
                "llm_requests_per_accepted": cold.requests_per_accepted,
                "warm_cache_requests_sent": server.count - sent, "warm_cache_accepted": len(warm.accepted),
                "warm_items_per_second": round(args.items / warm_s, 2),
                "same_tasks_with_warm_cache": [r.task_id for r in cold.accepted] == [r.task_id for r in warm.accepted],
            }
    out["machine"] = {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load_before],
                      "load_after": [round(x, 2) for x in os.getloadavg()]}
    target = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results")) / "synth.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
