"""What a multi-turn episode costs through the gym env, against the kernel engine playing the same
episode (``run_episode`` with the pack's oracle), in the same run: the support pack's four
conversations with scripted customers (reset, every turn, the user's replies, the checks).

Needs agentsynth-sql (the support pack's world):

    python plugins/agentsynth-rl/bench/bench_multi_turn.py [--rounds 10] [--out FILE]

Writes JSON (default plugins/agentsynth-rl/bench/results/multi_turn.json) with the machine load
at start and end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from pathlib import Path

from agentsynth_kernel import ComponentSpec, EpisodeConfig, get_host, load_pack, run_episode
from agentsynth_rl.env import AsyncPackEnv

ROOT = Path(__file__).resolve().parents[3]
SUPPORT = ROOT / "packs" / "agentsynth-pack-support" / "agentsynth_pack_support" / "pack.yaml"


async def main(rounds: int) -> dict:
    host = get_host()
    pack = load_pack(SUPPORT, host=host)
    config = EpisodeConfig(ComponentSpec("oracle"))
    engine, gym, passed = [], [], 0
    env = AsyncPackEnv(pack, split="all", host=host)
    for r in range(rounds):
        for task in pack.tasks:
            t = time.perf_counter()
            result = await run_episode(host, pack, task, 0, r, config)
            engine.append(time.perf_counter() - t)
            turns: dict[int, list] = {}
            for step in result.trajectory.steps:
                turns.setdefault(step.turn, []).append(step.action)
            t = time.perf_counter()
            await env.reset(seed=r, options={"task_id": task.id})
            for actions in turns.values():
                _, reward, terminated, truncated, _ = await env.step(actions)
                if terminated or truncated:
                    break
            gym.append(time.perf_counter() - t)
            passed += reward == 1.0 and result.status == "passed"
    await env.close()
    ms = lambda xs: round(statistics.median(xs) * 1000, 2)  # noqa: E731
    return {"episodes": len(gym), "both_passed": passed, "engine_median_ms": ms(engine), "gym_median_ms": ms(gym),
            "gym_over_engine": round(statistics.median(gym) / statistics.median(engine), 2)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "multi_turn.json"))
    args = parser.parse_args()
    load_start = os.getloadavg()
    out = asyncio.run(main(args.rounds))
    out.update(load_start=load_start, load_end=os.getloadavg(), cpus=os.cpu_count(), python=platform.python_version(),
               baseline="engine: agentsynth_kernel.run_episode of the oracle on the same task and seed")
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))
