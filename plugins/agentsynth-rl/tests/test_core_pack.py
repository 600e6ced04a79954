"""Over the SQL ``core`` pack (skipped unless agentsynth-sql is installed; nox -s rl-train has it):
the oracle's episodes replayed through the gym API and the reward function give the engine's verdicts."""

from __future__ import annotations

import asyncio

import pytest

from agentsynth_kernel import ComponentSpec, EpisodeConfig, ToolCall, run_episode, to_openai_messages
from agentsynth_rl import PackEnv, VerdictReward


@pytest.fixture
def oracle_runs(core, host):
    """The engine's episodes of the oracle on every train task (seed 11)."""
    async def run():
        config = EpisodeConfig(ComponentSpec("oracle"))
        return [await run_episode(host, core, t, 0, 11, config) for t in core.tasks if t.split == "train"]
    return asyncio.run(run())


def test_gym_replays_of_the_oracle_pass_like_the_engine(core, host, oracle_runs):
    assert oracle_runs and all(r.status == "passed" for r in oracle_runs)
    env = PackEnv(core, host=host)
    for run in oracle_runs:
        env.reset(seed=11, options={"task_id": run.task_id})
        turns: dict[int, list] = {}
        for step in run.trajectory.steps:
            turns.setdefault(step.turn, []).append(step.action)
        for actions in turns.values():
            obs, reward, terminated, truncated, info = env.step(actions)
        assert terminated and reward == 1.0, (run.task_id, info["verdicts"])
        assert [v["checker"] for v in info["verdicts"]] == [v.checker for v in run.verdicts]
        assert info["split"] == "train"


def test_collateral_damage_costs_the_reward(core, host):
    env = PackEnv(core, host=host)
    env.reset(options={"task_id": "update-email"})
    env.step(ToolCall("sql_execute", {"sql": "UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6"}))
    env.step(ToolCall("sql_execute", {"sql": "UPDATE customers SET name = 'Someone Else' WHERE id = 1"}))
    _, reward, _, _, info = env.step("done")
    assert reward == 0.0 and info["status"] == "failed"
    assert any(not v["passed"] and "name" in v["detail"] for v in info["verdicts"])


def test_reward_function_on_the_oracle_messages(core, host, oracle_runs):
    completions = [to_openai_messages(r.trajectory)[2:] for r in oracle_runs]  # after system + user
    reward = VerdictReward(core, host=host)
    out = reward(prompts=[None] * len(completions), completions=completions,
                 task_id=[r.task_id for r in oracle_runs], seed=[11] * len(oracle_runs))
    assert out == [1.0] * len(oracle_runs)
    assert all(d["drift"] == [] for d in reward.last)  # the replayed world answered as it did in the run
    emptied = [[{"role": "assistant", "content": "done"}] for _ in oracle_runs]
    assert sum(reward(prompts=[None] * len(emptied), completions=emptied, task_id=[r.task_id for r in oracle_runs],
                      seed=[11] * len(oracle_runs))) < len(oracle_runs) / 2


def test_rl_serve_command_serves_core(core, tmp_path):
    import socket
    import subprocess
    import sys
    import time

    pytest.importorskip("openenv.core")
    from openenv.core import GenericEnvClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "agentsynth_kernel", "rl", "serve", "core", "--port", str(port)],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"rl serve did not start: {proc.stderr.read() if proc.poll() is not None else ''}") from None
                time.sleep(0.05)
        with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as env:
            first = env.reset(task_id="update-email")
            assert "Maya Chen" in first.observation["content"] and first.observation["split"] == "train"
            env.step({"tool": "sql_execute",
                      "arguments": {"sql": "UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6"}})
            end = env.step({"answer": "updated"})
            assert end.done and end.reward == 1.0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
