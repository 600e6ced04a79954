"""agentsynth-rl throughput on the `core` SQL pack: env resets/s and steps/s through the gym API,
against the same oracle episodes through the engine.

The oracle's actions are taken once from engine episodes (seed 11, every task), then replayed:
(1) the engine (`execute`, oracle policy, concurrency 1 and 8); (2) the synchronous PackEnv, one
episode after another (reset + tool steps + answer, reset measured alone too); (3) 8 AsyncPackEnv
on one loop (asyncio.gather); (4) the TRL reward function (replay of the oracle's messages).
Writes $AGENTSYNTH_BENCH_OUT/rl.json (default benchmarks/results/).

    python benchmarks/bench_rl.py [--trials 10]
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

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel.engine import execute  # noqa: E402
from agentsynth_kernel.episode import EpisodeConfig, run_episode  # noqa: E402
from agentsynth_kernel.plugins import get_host  # noqa: E402
from agentsynth_kernel.records import to_openai_messages  # noqa: E402
from agentsynth_kernel.spec import ComponentSpec, RunSpec, load_pack  # noqa: E402
from agentsynth_rl import AsyncPackEnv, PackEnv, VerdictReward  # noqa: E402

SEED = 11


def oracle_turns(pack, host):
    """Per task: the oracle's actions grouped by turn, and its messages (from real engine episodes)."""
    async def run():
        config = EpisodeConfig(ComponentSpec("oracle"))
        return [await run_episode(host, pack, t, 0, SEED, config) for t in pack.tasks]
    out = {}
    for result in asyncio.run(run()):
        assert result.status == "passed", (result.task_id, result.error)
        turns: dict[int, list] = {}
        for step in result.trajectory.steps:
            turns.setdefault(step.turn, []).append(step.action)
        out[result.task_id] = (list(turns.values()), to_openai_messages(result.trajectory)[2:])
    return out


def bench_engine(pack, trials: int, concurrency: int) -> dict:
    spec = RunSpec(policy=ComponentSpec("oracle"), trials=trials, seed=1, concurrency=concurrency)
    wall = time.perf_counter()
    report = asyncio.run(execute(spec, pack))
    wall = time.perf_counter() - wall
    n = len(report.results)
    steps = sum(len(r.trajectory.steps) for r in report.results if r.trajectory)
    return {"episodes": n, "passed": sum(r.passed for r in report.results), "episodes_per_s": round(n / wall, 1),
            "steps_per_s": round(steps / wall, 1), "wall_s": round(wall, 3)}


def bench_gym(pack, host, plan, trials: int) -> dict:
    env = PackEnv(pack, host=host, split="all")
    resets: list[float] = []
    steps = tool_steps = episodes = rewards = 0
    wall = time.perf_counter()
    for _ in range(trials):
        for task_id, (turns, _) in plan.items():
            started = time.perf_counter()
            env.reset(seed=SEED, options={"task_id": task_id})
            resets.append(time.perf_counter() - started)
            for actions in turns:
                _, reward, terminated, truncated, _ = env.step(actions)
                steps += 1
                tool_steps += sum(1 for a in actions if hasattr(a, "name"))
            assert terminated or truncated
            rewards += reward
            episodes += 1
    wall = time.perf_counter() - wall
    env.close()
    # reset alone (build + seed + close of the previous world), the cost RL pays per rollout
    started = time.perf_counter()
    n_reset = 0
    for _ in range(trials):
        for task_id in plan:
            env.reset(seed=SEED, options={"task_id": task_id})
            n_reset += 1
    reset_wall = time.perf_counter() - started
    env.close()
    return {"episodes": episodes, "mean_reward": round(rewards / episodes, 4), "episodes_per_s": round(episodes / wall, 1),
            "step_calls_per_s": round(steps / wall, 1), "tool_calls_per_s": round(tool_steps / wall, 1),
            "resets_per_s": round(n_reset / reset_wall, 1),
            "reset_ms": {"median": round(statistics.median(resets) * 1000, 3),
                         "p90": round(sorted(resets)[int(len(resets) * 0.9)] * 1000, 3)},
            "reset_share_of_episode": round(sum(resets) / wall, 3), "wall_s": round(wall, 3)}


def bench_async(pack, host, plan, trials: int, width: int) -> dict:
    async def run() -> tuple[int, float, float]:
        envs = [AsyncPackEnv(pack, host=host, split="all") for _ in range(width)]
        work = [task_id for _ in range(trials) for task_id in plan]
        total = 0.0

        async def worker(env, items):
            nonlocal total
            for task_id in items:
                await env.reset(seed=SEED, options={"task_id": task_id})
                for actions in plan[task_id][0]:
                    _, reward, *_ = await env.step(actions)
                total += reward
            await env.close()

        started = time.perf_counter()
        await asyncio.gather(*(worker(e, work[i::width]) for i, e in enumerate(envs)))
        return len(work), time.perf_counter() - started, total

    from agentsynth_rl.loop import run_sync

    n, wall, total = run_sync(run())
    return {"envs": width, "episodes": n, "mean_reward": round(total / n, 4), "episodes_per_s": round(n / wall, 1),
            "wall_s": round(wall, 3)}


def bench_reward(pack, host, plan, trials: int) -> dict:
    reward = VerdictReward(pack, host=host, split="all", concurrency=8)
    ids = [t for _ in range(trials) for t in plan]
    completions = [plan[t][1] for t in ids]
    started = time.perf_counter()
    out = reward(prompts=[None] * len(ids), completions=completions, task_id=ids, seed=[SEED] * len(ids))
    wall = time.perf_counter() - started
    return {"completions": len(ids), "mean_reward": round(sum(out) / len(out), 4),
            "completions_per_s": round(len(ids) / wall, 1), "wall_s": round(wall, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    host = get_host()
    pack = load_pack("core", host=host)
    load_start = os.getloadavg()[0]
    plan = oracle_turns(pack, host)
    bench_gym(pack, host, plan, 1)  # warm: snapshot cache, imports, worker threads
    result = {
        "benchmark": "rl",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_avg_1m": load_start},
        "pack": "core", "tasks": len(pack.tasks), "trials": args.trials,
        "oracle_tool_calls_per_episode": round(sum(sum(len(t) for t in turns) - 1 for turns, _ in plan.values())
                                               / len(plan), 2),
        "engine_concurrency_1": bench_engine(pack, args.trials, 1),
        "engine_concurrency_8": bench_engine(pack, args.trials, 8),
        "gym_sync": bench_gym(pack, host, plan, args.trials),
        "gym_async_8": bench_async(pack, host, plan, args.trials, 8),
        "trl_reward_replay": bench_reward(pack, host, plan, args.trials),
    }
    result["machine"]["load_avg_1m_end"] = os.getloadavg()[0]
    out = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results")) / "rl.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
