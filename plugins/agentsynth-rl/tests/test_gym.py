"""The Gymnasium API over a pack: fresh worlds, verdict rewards, split hygiene, bad input."""

from __future__ import annotations

import asyncio

import gymnasium
import pytest

from agentsynth_kernel import ComponentSpec, EpisodeConfig, ToolCall, run_episode
from agentsynth_rl import ActionError, AsyncPackEnv, EpisodeOver, PackEnv, register_gymnasium

PUT_B = {"id": "c1", "type": "function", "function": {"name": "put", "arguments": '{"key": "b", "value": "2"}'}}


def test_reset_builds_the_task_and_renders_chat(pack, host):
    env = PackEnv(pack, host=host)
    obs, info = env.reset(seed=1, options={"task_id": "set-b"})
    assert obs.startswith("Set b to 2.") and "store ready (1 keys)" in obs
    assert info["task_id"] == "set-b" and info["split"] == "train" and info["seed"] == 1
    assert [t["function"]["name"] for t in info["tools"]] == ["get", "put", "boom"]
    assert info["tools"][1]["function"]["parameters"]["required"] == ["key", "value"]
    assert [m["role"] for m in info["messages"]] == ["system", "user"]
    assert info["messages"][0]["content"] == "You manage a key-value store."


def test_a_passing_episode_rewards_the_verdict_with_provenance(pack, host):
    env = PackEnv(pack, host=host)
    env.reset(seed=1, options={"task_id": "set-b"})
    obs, reward, terminated, truncated, info = env.step(PUT_B)
    assert (obs, reward, terminated, truncated) == ("b = 2", 0.0, False, False)
    assert info["tool_messages"] == [{"role": "tool", "tool_call_id": "c1", "content": "b = 2"}]
    obs, reward, terminated, truncated, info = env.step("b is now 2")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["status"] == "passed" and info["scored"] and info["error_kind"] == ""
    assert info["verdicts"] == [{"checker": "kv_equals", "passed": True, "score": 1.0, "detail": "b='2'"}]
    prov = info["provenance"]
    assert prov["pack"] == "kvpack" and prov["pack_hash"] == pack.content_hash and prov["pack_hash"].startswith("sha256:")
    assert (prov["task_id"], prov["split"], prov["seed"]) == ("set-b", "train", 1)
    assert "agentsynth" in prov["versions"] and "agentsynth-rl" in prov["versions"]
    assert info["result"].split == "train" and info["result"].provenance == prov
    messages = env.render()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[2]["tool_calls"][0]["function"] == {"name": "put", "arguments": '{"key": "b", "value": "2"}'}
    with pytest.raises(EpisodeOver):
        env.step("again")


def test_action_shapes_all_mean_the_same_call(pack, host):
    shapes = [PUT_B, {"tool": "put", "arguments": {"key": "b", "value": "2"}}, ToolCall("put", {"key": "b", "value": "2"}),
              {"role": "assistant", "content": "", "tool_calls": [PUT_B]},
              {"name": "put", "arguments": {"key": "b", "value": "2"}}]
    for shape in shapes:
        env = PackEnv(pack, host=host)
        env.reset(options={"task_id": "set-b"})
        assert env.step(shape)[0] == "b = 2", shape
        assert env.step({"answer": "ok"})[1] == 1.0, shape


def test_parallel_calls_run_in_order_in_one_turn(pack, host):
    env = PackEnv(pack, host=host)
    env.reset(options={"task_id": "set-b"})
    get_b = {"id": "c2", "type": "function", "function": {"name": "get", "arguments": {"key": "b"}}}
    obs, _, _, _, info = env.step({"role": "assistant", "tool_calls": [PUT_B, get_b]})
    assert obs == "b = 2\n\n2"
    assert [m["tool_call_id"] for m in info["tool_messages"]] == ["c1", "c2"]
    steps = env.core.episode.trajectory.steps
    assert [s.turn for s in steps] == [0, 0]


def test_a_failing_episode_scores_zero_and_blames_the_agent(pack, host):
    env = PackEnv(pack, host=host)
    env.reset(options={"task_id": "set-b"})
    env.step({"tool": "put", "arguments": {"key": "b", "value": "3"}})
    _, reward, terminated, _, info = env.step("done")
    assert (reward, terminated, info["status"], info["error_kind"]) == (0.0, True, "failed", "agent")
    assert info["verdicts"][0]["detail"] == "b='3'"


def test_score_mode_averages_checkers(pack, host):
    env = PackEnv(pack, host=host, split="test", reward="score")
    env.reset(options={"task_id": "two-checks"})
    env.step({"tool": "put", "arguments": {"key": "b", "value": "2"}})
    _, reward, _, _, info = env.step("done")
    assert reward == 0.5 and info["status"] == "failed"


def test_train_split_by_default_and_test_only_when_asked(pack, host):
    env = PackEnv(pack, host=host)
    picked = set()
    for seed in range(40):
        _, info = env.reset(seed=seed)
        picked.add(info["task_id"])
        assert info["split"] == "train"
    assert picked == {"set-b", "set-c", "leave-alone"}
    with pytest.raises(ValueError, match="'held-out' is in the 'test' split; this environment serves 'train'"):
        env.reset(options={"task_id": "held-out"})
    test_env = PackEnv(pack, host=host, split="test")
    _, info = test_env.reset(options={"task_id": "held-out"})
    assert info["split"] == "test"
    test_env.step("nothing")
    assert test_env.result.split == "test" and test_env.result.provenance["split"] == "test"
    with pytest.raises(ValueError, match="split: expected one of train, test, all"):
        PackEnv(pack, host=host, split="dev")


def test_seed_makes_the_choice_reproducible(pack, host):
    a, b = PackEnv(pack, host=host), PackEnv(pack, host=host)
    assert [a.reset(seed=s)[1]["task_id"] for s in range(10)] == [b.reset(seed=s)[1]["task_id"] for s in range(10)]
    assert a.core.episode.seed == 9  # the world is seeded with the seed given
    a.reset()
    assert a.core.episode.seed != 9  # then from the env's RNG


def test_max_steps_truncates_and_still_checks(pack, host):
    env = PackEnv(pack, host=host, max_steps=2)
    env.reset(options={"task_id": "set-b"})
    assert env.step({"tool": "get", "arguments": {"key": "a"}})[2:4] == (False, False)
    _, reward, terminated, truncated, info = env.step(PUT_B)
    assert (reward, terminated, truncated, info["status"]) == (1.0, False, True, "passed")
    assert env.result.trajectory.metadata["stopped"] == "max_steps"


def test_agent_mistakes_are_observations_caller_mistakes_are_errors(pack, host):
    env = PackEnv(pack, host=host)
    with pytest.raises(EpisodeOver):
        env.step("hello")
    env.reset(options={"task_id": "set-b"})
    obs, _, done, _, _ = env.step({"type": "function", "function": {"name": "put", "arguments": "{not json"}})
    assert obs.startswith("error: the arguments of 'put' are not valid JSON") and not done
    obs, *_ = env.step({"tool": "drop_table", "arguments": {}})
    assert obs == "error: unknown tool 'drop_table'; available tools: boom, get, put"
    assert [s.invalid for s in env.core.episode.trajectory.steps] == [True, True]
    for bad, message in [(42, "got int; expected an action"), ([], "empty list"), ({"arguments": {}}, "needs a tool name")]:
        with pytest.raises(ActionError, match=message):
            env.step(bad)
    with pytest.raises(ValueError, match="options: unknown key"):
        env.reset(options={"task": "set-b"})
    with pytest.raises(ValueError, match="no task 'nope'"):
        env.reset(options={"task_id": "nope"})
    for kwargs, message in [({"reward": "dense"}, "reward: expected"), ({"max_steps": 0}, "max_steps"),
                            ({"judge_weight": 0.5}, "no judge is given"), ({"judge_weight": 2, "judge": "x"}, "in \\[0, 1\\]")]:
        with pytest.raises(ValueError, match=message):
            PackEnv(pack, host=host, **kwargs)


def test_a_crashing_world_is_an_unscored_environment_error(pack, host):
    env = PackEnv(pack, host=host)
    env.reset(options={"task_id": "set-b"})
    _, reward, terminated, _, info = env.step({"tool": "boom", "arguments": {}})
    assert (reward, terminated, info["status"], info["error_kind"], info["scored"]) == (0.0, True, "error", "environment", False)
    assert "the world crashed" in info["error"]


def test_same_actions_same_verdict_as_the_engine(pack, host):
    task = next(t for t in pack.tasks if t.id == "set-b")
    engine = asyncio.run(run_episode(host, pack, task, 0, 7, EpisodeConfig(ComponentSpec("put_b"))))
    env = PackEnv(pack, host=host)
    env.reset(seed=7, options={"task_id": "set-b"})
    env.step({"tool": "put", "arguments": {"key": "b", "value": "2"}})
    *_, info = env.step("done")
    assert engine.status == info["status"] == "passed"
    assert [v.detail for v in engine.verdicts] == [v["detail"] for v in info["verdicts"]]
    strip = lambda steps: [(getattr(s.action, "name", None), getattr(s.action, "arguments", None)) for s in steps]  # noqa: E731
    assert strip(engine.trajectory.steps) == strip(env.result.trajectory.steps)
    assert [s.observation.content for s in env.result.trajectory.steps if s.observation] == \
        [s.observation.content for s in engine.trajectory.steps if s.observation]


async def test_many_async_envs_share_no_world_state(pack, host):
    envs = [AsyncPackEnv(pack, host=host) for _ in range(8)]
    await asyncio.gather(*(e.reset(seed=i, options={"task_id": "set-b"}) for i, e in enumerate(envs)))
    # even-numbered agents write b=2; every agent then reads b in its own world
    await asyncio.gather(*(e.step({"tool": "put", "arguments": {"key": "b", "value": "2"}})
                           for i, e in enumerate(envs) if i % 2 == 0))
    reads = await asyncio.gather(*(e.step({"tool": "get", "arguments": {"key": "b"}}) for e in envs))
    assert [r[0] for r in reads] == ["2", "(missing)"] * 4
    ends = await asyncio.gather(*(e.step("done") for e in envs))
    assert [r[1] for r in ends] == [1.0, 0.0] * 4


def test_gymnasium_make_and_spaces(pack, host):
    env = gymnasium.make(register_gymnasium(), pack=pack, host=host, render_mode="ansi")
    obs, info = env.reset(seed=3, options={"task_id": "leave-alone"})
    assert env.observation_space.contains(obs)
    space = env.action_space
    assert space.contains(PUT_B) and space.contains("an answer") and not space.contains({"tool": "rm", "arguments": {}})
    assert not space.contains(3.5)
    assert space.contains(space.sample())
    _, reward, terminated, _, _ = env.step("hello")
    assert (reward, terminated) == (1.0, True)
    assert "[user] Change nothing" in env.render()
    env.close()


def test_judge_blend_is_documented_arithmetic(pack, host):
    env = PackEnv(pack, host=host, judge="half", judge_weight=0.5)
    env.reset(options={"task_id": "set-b"})
    env.step(PUT_B)
    _, reward, _, _, info = env.step("done")
    assert reward == 0.75 and info["scores"]["judge"] == 0.5 and info["status"] == "passed"
    env.reset(options={"task_id": "set-b"})
    assert env.step("nothing")[1] == 0.25  # failed verdict (0) blended with the judge's 0.5
