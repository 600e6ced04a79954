"""agentsynth-browser performance: browser start cost and episode latency, shared browser vs one per episode.

Writes ``$AGENTSYNTH_BENCH_OUT/browser.json`` (default ``benchmarks/results/browser.json``).

1. Start cost: Playwright driver + Chromium launch (cold), Chromium launch alone (warm driver), and a new
   incognito context + page in a running browser.
2. Episode latency on the webshop pack (reset: fresh DB + app server + context + start page; the
   checkout-express oracle's 9 tool calls; close), N episodes with the shared browser (the default:
   one browser per run, a new context per episode) against the baseline that launches a browser
   per episode (``shared_browser: false``), measured in the same process; the same again with no
   tool calls (reset + close only, where the start cost shows most). Target: shared >= 2x faster
   on reset + close.
3. The whole pack through the engine (``execute``) with the oracle (concurrency 4 by default): wall
   time, episodes/s, pass rate, and what is still open after ``run_finished``.
4. Orphans: Chromium/driver processes left after the run closed its browsers (target: 0).
5. Hostile agents (``hostile``): the exploits that push sizes (2 MB arguments, step and
   screenshot floods, 1 MB form fields, review/add-to-cart floods, a 3 MB URL) each as one
   episode: peak Python memory of the episode (tracemalloc, includes the agent's own huge
   arguments kept in the trajectory), the largest observation and its data, and the verdict.
   Bound stated in the plugin README: observations <= max_chars, data <= 4 KB.

Usage: python benchmarks/bench_browser.py [--episodes N] [--engine-concurrency 1 4] [--quick]
       python benchmarks/bench_browser.py --hostile-only   (section 5 only, merged into browser.json)
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
import uuid
from pathlib import Path
from types import SimpleNamespace

TAG = f"bench-browser-{uuid.uuid4().hex[:8]}"
os.environ["AGENTSYNTH_BENCH_BROWSER_TAG"] = TAG  # inherited by every Chromium we start: the orphan census
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_browser import BrowserEnvironment, launcher  # noqa: E402
from agentsynth_browser.plugin import PACKS  # noqa: E402
from agentsynth_kernel import ToolCall  # noqa: E402
from agentsynth_kernel.engine import execute  # noqa: E402
from agentsynth_kernel.importing import import_file  # noqa: E402
from agentsynth_kernel.spec import ComponentSpec, RunSpec, load_pack  # noqa: E402

PACK = PACKS / "webshop"


def our_processes() -> int:
    needle = f"AGENTSYNTH_BENCH_BROWSER_TAG={TAG}".encode()
    n = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fp:
                if fp.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{entry}/environ", "rb") as fp:
                n += needle in fp.read()
        except OSError:
            continue
    return n


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    return {
        "n": len(xs), "mean_s": round(statistics.fmean(xs), 4), "median_s": round(statistics.median(xs), 4),
        "p90_s": round(xs[min(len(xs) - 1, int(0.9 * len(xs)))], 4), "min_s": round(xs[0], 4),
    }


async def start_cost(repeats: int) -> dict[str, object]:
    exe = launcher.find_chromium()
    args = launcher.launch_args()

    async def cold() -> float:
        t = time.perf_counter()
        browser = await pool.launch(exe, args, True, 60)
        elapsed = time.perf_counter() - t
        await browser.close()
        return elapsed

    async def context() -> list[float]:
        browser = await pool.launch(exe, args, True, 60)
        out = []
        for _ in range(repeats):
            t = time.perf_counter()
            ctx = await browser.new_context()
            await ctx.new_page()
            out.append(time.perf_counter() - t)
            await ctx.close()
        await browser.close()
        return out

    launcher.shutdown()
    thread, pool = launcher.runtime()
    t = time.perf_counter()
    await thread.run(pool._driver())
    driver = time.perf_counter() - t
    warm = [await thread.run(cold()) for _ in range(repeats)]
    ctx = await thread.run(context())
    return {
        "driver_start_s": round(driver, 4),
        "browser_launch": summary(warm),
        "context_and_page": summary(ctx),
        "cold_start_s": round(driver + statistics.median(warm), 4),
    }


async def episodes(n: int, shared: bool, script: list[dict]) -> dict[str, object]:
    launcher.shutdown()
    run = SimpleNamespace(run_id=f"bench-{shared}", run_dir=None)
    resets, totals, steps = [], [], []
    for i in range(n):
        t0 = time.perf_counter()
        env = BrowserEnvironment(app="app.py", db="seed.sql", base_dir=PACK, shared_browser=shared, run=run)
        await env.reset(i)
        t1 = time.perf_counter()
        for action in script:
            if "tool" in action:
                s = time.perf_counter()
                obs = await env.step(ToolCall(action["tool"], action["arguments"]))
                steps.append(time.perf_counter() - s)
                assert not obs.error, obs.content
        await env.close()
        resets.append(t1 - t0)
        totals.append(time.perf_counter() - t0)
    launches = launcher.stats()["launches"]
    launcher.release_run(run.run_id)
    return {"episode": summary(totals), "reset": summary(resets), "step": summary(steps), "browser_launches": launches}


async def engine_run(concurrency: int) -> dict[str, object]:
    launcher.shutdown()
    pack = load_pack(PACK)
    spec = RunSpec(policy=ComponentSpec("oracle"), pack="webshop", concurrency=concurrency, timeout=120)
    t = time.perf_counter()
    report = await execute(spec, pack)
    wall = time.perf_counter() - t
    passed = sum(r.passed for r in report.results)
    return {
        "episodes": len(report.results), "passed": passed, "wall_s": round(wall, 3),
        "episodes_per_s": round(len(report.results) / wall, 3),
        "episode_latency": summary([r.duration_s for r in report.results]),
        "open_after_run_finished": launcher.stats(),
    }


HOSTILE = ("generic.huge_arguments", "generic.step_flood", "browser.huge_form", "browser.review_flood",
           "browser.cart_flood", "browser.long_url", "browser.screenshot_flood", "browser.javascript_url")


async def hostile() -> dict[str, object]:
    import tracemalloc

    from agentsynth_kernel.episode import EpisodeConfig, run_episode
    from agentsynth_kernel.plugins import get_host
    from agentsynth_kernel.testing.adversarial import exploits_for

    launcher.shutdown()
    host, pack = get_host(), load_pack(PACK)
    chosen = [e for e in exploits_for(pack, host) if e.name in HOSTILE]
    out: dict[str, object] = {}
    tracemalloc.start()
    for exploit in chosen:
        task = next(t for t in pack.tasks if not exploit.tasks or t.id in exploit.tasks)
        actions = exploit.actions
        script = (lambda state, a=actions: a(state, pack)) if callable(actions) else list(actions)
        config = EpisodeConfig(ComponentSpec("scripted", {"actions": script}), max_steps=30, timeout=60)
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        t = time.perf_counter()
        result = await run_episode(host, pack, task, 0, 0, config)
        peak = tracemalloc.get_traced_memory()[1] - base
        observations = [s.observation for s in result.trajectory.steps if s.observation is not None]
        out[exploit.name] = {
            "task": task.id, "status": result.status, "steps": len(result.trajectory.steps),
            "wall_s": round(time.perf_counter() - t, 3), "peak_python_mb": round(peak / 2**20, 2),
            "max_observation_chars": max((len(o.content) for o in observations), default=0),
            "max_observation_data_bytes": max((len(json.dumps(o.data or {})) for o in observations), default=0),
        }
        del result, observations
    tracemalloc.stop()
    launcher.shutdown()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--engine-concurrency", type=int, nargs="+", default=[4])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--hostile-only", action="store_true")
    opts = parser.parse_args()
    out_dir = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results"))
    if opts.hostile_only:
        path = out_dir / "browser.json"
        merged = json.loads(path.read_text()) if path.exists() else {"benchmark": "browser"}
        merged["hostile_episodes"] = await hostile()
        merged["hostile_load_avg_1m"] = os.getloadavg()[0]
        out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(merged, indent=2) + "\n")
        json.dump(merged["hostile_episodes"], sys.stdout, indent=2)
        print()
        return
    n = 4 if opts.quick else opts.episodes
    script = import_file(PACK / "oracle.py").ORACLE["checkout-express"]
    before = our_processes()
    result: dict[str, object] = {
        "benchmark": "browser",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
                    "chromium": launcher.find_chromium()},
        "episodes_per_mode": n,
        "oracle_steps_per_episode": sum("tool" in a for a in script),
    }
    result["start_cost"] = await start_cost(3 if opts.quick else 5)
    result["shared_browser"] = await episodes(n, True, script)
    result["browser_per_episode"] = await episodes(n, False, script)
    result["shared_browser_no_steps"] = await episodes(n, True, [])
    result["browser_per_episode_no_steps"] = await episodes(n, False, [])

    def ratio(a: str, b: str) -> float:
        return round(result[b]["episode"]["median_s"] / result[a]["episode"]["median_s"], 2)  # type: ignore[index]

    result["speedup_shared_vs_per_episode"] = {
        "oracle_episode_9_steps": ratio("shared_browser", "browser_per_episode"),
        "reset_and_close_only": ratio("shared_browser_no_steps", "browser_per_episode_no_steps"),
    }
    result["engine_oracle_pack"] = {f"concurrency_{c}": await engine_run(c) for c in opts.engine_concurrency}
    result["hostile_episodes"] = await hostile()
    launcher.shutdown()
    time.sleep(1.0)
    result["processes"] = {"before": before, "after_shutdown": our_processes()}
    result["machine"]["load_avg_1m_end"] = os.getloadavg()[0]  # type: ignore[index]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "browser.json").write_text(json.dumps(result, indent=2) + "\n")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    asyncio.run(main())
