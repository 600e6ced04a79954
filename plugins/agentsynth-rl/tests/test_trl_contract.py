"""TRL's contracts without TRL: reward_funcs(prompts, completions, **columns) -> list[float] and an
environment_factory class whose public methods are the world's tools. The real trainer runs in
test_grpo_train.py (nox -s rl-train)."""

from __future__ import annotations

import inspect

import pytest

from agentsynth_rl import VerdictReward, dataset_rows, environment_factory
from agentsynth_rl.grpo import task_seed


def call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(*calls, content=""):
    return {"role": "assistant", "content": content, **({"tool_calls": list(calls)} if calls else {})}


def test_dataset_rows_are_train_split_chat_prompts(pack, host):
    rows = dataset_rows(pack, host=host, repeat=2)
    assert [r["task_id"] for r in rows] == ["set-b", "set-c", "leave-alone"] * 2
    assert {r["split"] for r in rows} == {"train"}
    assert rows[0]["prompt"] == [{"role": "system", "content": "You manage a key-value store."},
                                 {"role": "user", "content": "Set b to 2.\n\nstore ready (1 keys)"}]
    assert rows[0]["seed"] == task_seed("set-b", 0) != rows[3]["seed"] == task_seed("set-b", 1)
    assert [r["task_id"] for r in dataset_rows(pack, host=host, split="test")] == ["held-out", "two-checks"]


def test_reward_function_has_trls_signature_and_returns_the_verdicts(pack, host):
    reward = VerdictReward(pack, host=host)
    params = inspect.signature(reward).parameters
    assert list(params)[:2] == ["prompts", "completions"] and params["kwargs"].kind is inspect.Parameter.VAR_KEYWORD
    assert reward.__name__ == "agentsynth_kvpack"
    good = [assistant(call("put", key="b", value="2")), {"role": "tool", "name": "put", "content": "b = 2"},
            assistant(content="b is set")]
    wrong = [assistant(call("put", key="b", value="5")), {"role": "tool", "content": "b = 5"}, assistant(content="ok")]
    text = 'Sure. <tool_call>\n{"name": "put", "arguments": {"key": "c", "value": "3"}}\n</tool_call>'
    touched = [assistant(call("put", key="a", value="0")), assistant(content="hello")]
    rows = dataset_rows(pack, host=host)
    prompts = [rows[0]["prompt"]] * 2 + [rows[1]["prompt"], rows[2]["prompt"], rows[2]["prompt"]]
    out = reward(prompts=prompts, completions=[good, wrong, text, [assistant(content="hello")], touched],
                 task_id=["set-b", "set-b", "set-c", "leave-alone", "leave-alone"], seed=[1, 2, 3, 4, 5],
                 trainer_state=None, log_extra=None)
    assert out == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert [d["status"] for d in reward.last] == ["passed", "failed", "passed", "passed", "failed"]
    assert reward.last[0]["drift"] == [] and reward.last[0]["split"] == "train" and reward.last[0]["seed"] == 1
    assert reward.last[2]["tool_calls"][0].arguments == {"key": "c", "value": "3"}


def test_reward_function_refuses_what_it_cannot_score(pack, host):
    reward = VerdictReward(pack, host=host)
    with pytest.raises(ValueError, match="needs a 'task_id' column"):
        reward(prompts=["p"], completions=["c"])
    with pytest.raises(ValueError, match="'held-out' is in the 'test' split"):
        reward(prompts=["p"], completions=["c"], task_id=["held-out"])
    with pytest.raises(ValueError, match="a completion must be a str or a list of messages"):
        reward(prompts=["p"], completions=[42], task_id=["set-b"])
    with pytest.raises(ValueError, match="got 2 prompts, 1 completions"):
        reward(prompts=["p", "q"], completions=["c"], task_id=["set-b"])
    crash = [assistant(call("boom"))]
    assert reward(prompts=["p"], completions=[crash], task_id=["set-b"]) == [None]  # unscored, not 0
    assert reward.last[0]["status"] == "error" and "the world crashed" in reward.last[0]["error"]
    assert VerdictReward(pack, host=host, split="test")(prompts=["p"], completions=["no"], task_id=["held-out"]) == [0.0]


def test_environment_factory_exposes_the_worlds_tools_as_trl_finds_them(pack, host):
    Env = environment_factory(pack, host=host)
    env = Env()  # TRL calls factory() with no arguments
    # exactly TRL's discovery rule (grpo_trainer.py): functions on the class, minus reset/get_reward/_private
    tools = [n for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
             if n not in ("reset", "get_reward") and not n.startswith("_")]
    assert sorted(tools) == ["boom", "get", "put"]
    sig = inspect.signature(env.put)
    assert list(sig.parameters) == ["key", "value"] and sig.parameters["key"].annotation is str
    assert env.put.__doc__.startswith("Write a key.\n\nArgs:\n    key: The key.\n    value: The value.")
    assert not hasattr(env, "get_reward")


def test_environment_factory_rollouts_are_scored_in_their_live_world(pack, host):
    Env = environment_factory(pack, host=host)
    rows = dataset_rows(pack, host=host)
    envs = [Env(), Env()]
    assert envs[0].reset(**rows[0]) is None  # the row's prompt already holds the instruction
    assert envs[1].reset(**rows[0]) is None
    assert envs[0].put(key="b", value="2") == "b = 2"
    assert envs[1].get(key="b") == "(missing)"  # rollouts share no world
    completions = [[assistant(call("put", key="b", value="2")), {"role": "tool", "content": "b = 2"},
                    assistant(content="done")], [assistant(content="done")]]
    reward = VerdictReward(pack, host=host)
    out = reward(prompts=[rows[0]["prompt"]] * 2, completions=completions, task_id=["set-b"] * 2,
                 seed=[rows[0]["seed"]] * 2, environments=envs)
    assert out == [1.0, 0.0] and [d["mode"] for d in reward.last] == ["live", "live"]
    assert reward.last[0]["result"].trajectory.final_answer == "done"
    # pooled instances are reset for the next rollout: a fresh world
    assert envs[0].reset(task_id="set-b", seed=3) .startswith("Set b to 2.")  # no prompt column: returns it
    assert envs[0].get(key="b") == "(missing)"


def test_owns_reward_adds_trls_get_reward(pack, host):
    Env = environment_factory(pack, host=host, owns_reward=True, task_ids=["set-c"])
    env = Env()
    env.reset()
    assert env.env.episode.task.id == "set-c"
    env.put(key="c", value="3")
    assert env.get_reward() == 1.0
    env.reset()
    assert env.get_reward() == 0.0
    with pytest.raises(ValueError, match="'held-out' is in the 'test' split"):
        environment_factory(pack, host=host, task_ids=["held-out"])


def test_step_limit_inside_a_rollout(pack, host):
    Env = environment_factory(pack, host=host, max_steps=1)
    env = Env()
    env.reset(task_id="set-b")
    assert env.put(key="b", value="2") == "b = 2"
    assert env.get(key="b") == "error: the episode is over (the step limit was reached)"
    out = VerdictReward(pack, host=host)(prompts=["p"], completions=[[assistant(content="x")]], task_id=["set-b"],
                                         environments=[env])
    assert out == [1.0]  # the verdict of the world when the limit was hit
