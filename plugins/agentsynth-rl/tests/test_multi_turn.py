"""Multi-turn tasks (a simulated user, ``user:``) in every RL interface: the gym env (sync and
async), TRL's reward function (replay) and environment_factory, and the OpenEnv server.

The support pack (packs/agentsynth-pack-support, loaded by path; its world is agentsynth-sql) has
scripted customers: its oracle must earn 1.0 through every interface, and the shortcuts an RL
policy could farm (act without asking to confirm, refund what the policy forbids, claim success
at once) must earn 0. A small key-value pack with a user covers dual control and a user that
breaks its own rules.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from agentsynth_kernel import (
    Answer,
    ComponentSpec,
    RunSpec,
    ToolCall,
    execute,
    load_pack,
    to_openai_messages,
)
from agentsynth_rl import AsyncPackEnv, PackEnv, VerdictReward, environment_factory

ROOT = Path(__file__).resolve().parents[3]
SUPPORT = ROOT / "packs" / "agentsynth-pack-support" / "agentsynth_pack_support" / "pack.yaml"
SEED = 11


@pytest.fixture
def support(host):
    pytest.importorskip("agentsynth_sql")
    return load_pack(SUPPORT, host=host)


@pytest.fixture
def oracle_runs(support, host):
    """The kernel engine's run (``agentsynth_kernel.execute``) of the pack's oracle on every task;
    each result carries its episode's seed, which the gym env is reset with."""
    spec = RunSpec(policy=ComponentSpec("oracle"), pack=str(SUPPORT), seed=SEED, concurrency=1)
    report = asyncio.run(execute(spec, support, host=host))
    return sorted(report.results, key=lambda r: [t.id for t in support.tasks].index(r.task_id))


def turns_of(trajectory):
    """The engine's steps grouped by policy turn: what one gym step gets."""
    turns: dict[int, list] = {}
    for step in trajectory.steps:
        turns.setdefault(step.turn, []).append(step.action)
    return list(turns.values())


def play(env, actions_by_turn):
    """Step every turn until the episode ends; the last step's return value and all observations."""
    seen = []
    for actions in actions_by_turn:
        out = env.step(actions)
        seen.append(out)
        if out[2] or out[3]:
            break
    return out, seen


def q(sql):
    return ToolCall("sql_query", {"sql": sql})


def x(sql):
    return ToolCall("sql_execute", {"sql": sql})


REFUND = [x("INSERT INTO refunds (order_id, amount) VALUES (1042, 39.99)"),
          x("UPDATE orders SET status = 'refunded' WHERE id = 1042")]


# --- the gym env on the support pack -----------------------------------------------------------------


def test_the_oracle_through_the_gym_env_passes_every_task_as_the_engine_does(support, host, oracle_runs):
    assert [r.status for r in oracle_runs] == ["passed"] * 4
    env = PackEnv(support, host=host, split="all")
    for run in oracle_runs:
        first, info = env.reset(seed=run.seed, options={"task_id": run.task_id})
        assert first.startswith(support.tasks[[t.id for t in support.tasks].index(run.task_id)].instruction)
        assert [t["function"]["name"] for t in info["tools"]] == ["sql_query", "sql_execute"]
        (obs, reward, terminated, truncated, end), seen = play(env, turns_of(run.trajectory))
        assert (reward, terminated, truncated, end["status"]) == (1.0, True, False, "passed"), end["verdicts"]
        # every step before the last went on: an answer got the user's reply, not the end
        assert all(not (s[2] or s[3]) for s in seen[:-1])
        assert [s[4]["from"] for s in seen] == ["user" if isinstance(a[-1], Answer) else "world"
                                                for a in turns_of(run.trajectory)][:len(seen)]
        assert end["from"] == "user" and end["user_stopped"] == "user" and not end["user_failed"]
        assert end["user_usage"].get("requests", 0) == 0  # a scripted user spends nothing
        # the same trajectory as the engine's: actions, observations, who spoke; the user's side too
        mine = env.result.trajectory

        def strip(traj):
            return [(type(s.action).__name__, getattr(s.action, "name", None), getattr(s.action, "arguments", None),
                     getattr(s.action, "content", None), s.observation.content if s.observation else None,
                     s.observation.data if s.observation else None, s.invalid) for s in traj.steps]

        assert strip(mine) == strip(run.trajectory)
        assert mine.user.messages == run.trajectory.user.messages
        assert [v.checker for v in env.result.verdicts] == [v.checker for v in run.verdicts]
        assert [m["role"] for m in env.render()] == [m["role"] for m in to_openai_messages(run.trajectory)]


def test_refunding_without_asking_to_confirm_earns_nothing(support, host):
    env = PackEnv(support, host=host, split="all")
    env.reset(seed=SEED, options={"task_id": "refund-broken-kettle"})
    obs, *_ = env.step("What is your order number?")
    assert obs == "My order number is 1042."
    env.step(REFUND)  # acts at once: never asked the customer to confirm
    (_, reward, terminated, _, info), _ = play(env, [["Done: your refund is issued."]] * 5)
    assert (reward, terminated, info["status"], info["error_kind"]) == (0.0, True, "failed", "agent")
    said = [v for v in info["verdicts"] if v["checker"] == "said"]
    assert said and not said[0]["passed"] and "before the first sql_execute" in said[0]["detail"]


def test_refunding_the_late_order_earns_nothing(support, host):
    env = PackEnv(support, host=host, split="all")
    env.reset(seed=SEED, options={"task_id": "refuse-late-refund"})
    assert env.step("What is the order number?")[0] == "It's order 1077."
    assert env.step("Shall I refund order 1077? Please confirm.")[0].startswith("Are you sure?")
    env.step([x("INSERT INTO refunds (order_id, amount) VALUES (1077, 24.5)"),
              x("UPDATE orders SET status = 'refunded' WHERE id = 1077")])
    (_, reward, _, _, info), _ = play(env, [["It is refunded, sorry it was outside 30 days."]] * 5)
    assert reward == 0.0 and info["status"] == "failed"
    assert any(not v["passed"] and "refunds" in v["detail"] for v in info["verdicts"])


def test_an_answer_that_claims_success_at_once_earns_nothing(support, host):
    env = PackEnv(support, host=host, split="all")
    env.reset(seed=SEED, options={"task_id": "refund-broken-kettle"})
    obs, reward, terminated, truncated, info = env.step("Your refund has been processed!")
    # not the end: the customer answers, the talk goes on
    assert (obs, reward, terminated, truncated, info["from"]) == ("My order number is 1042.", 0.0, False, False, "user")
    assert info["tool_messages"] == [{"role": "user", "content": "My order number is 1042."}]
    (_, reward, terminated, _, end), seen = play(env, [["Your refund has been processed!"]] * 10)
    assert (reward, terminated, end["status"]) == (0.0, True, "failed")
    assert len(seen) == 3  # the whole script (3 turns) and its stop: graded only after the talk


def test_max_steps_cuts_the_talk_and_a_broken_user_rule_is_then_the_agents(support, host):
    """An agent that goes quiet (only tool calls) until max_steps never lets the user say the order
    number (its rule ``said: 1042``): that must cost the agent its reward, not void the episode."""
    env = PackEnv(support, host=host, split="all", max_steps=3)
    env.reset(seed=SEED, options={"task_id": "refund-broken-kettle"})
    env.step(q("SELECT 1"))
    env.step(q("SELECT 2"))
    _, reward, terminated, truncated, info = env.step(q("SELECT 3"))
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["scored"] and info["status"] == "failed" and info["error_kind"] == "agent"
    assert not info["user_failed"] and "ended the conversation before the user did" in info["error"]
    assert any(v["checker"] == "user.said" and not v["passed"] for v in info["verdicts"])


async def test_async_envs_hold_their_own_conversations(support, host):
    envs = [AsyncPackEnv(support, host=host, split="all") for _ in range(4)]
    await asyncio.gather(*(e.reset(seed=i, options={"task_id": "cancel-shipped-refused"}) for i, e in enumerate(envs)))
    firsts = await asyncio.gather(*(e.step("Which email is it under?") for e in envs))
    assert [f[0] for f in firsts] == ["It's under sam@example.com."] * 4
    # half of them refuse properly, half claim to have cancelled it
    ends = await asyncio.gather(*(e.step("It has already shipped, so I can't cancel it." if i % 2 == 0
                                         else "Your order is now cancelled.") for i, e in enumerate(envs)))
    assert [e[0] for e in ends] == ["Oh well, okay then."] * 4 and not any(e[2] for e in ends)
    lasts = await asyncio.gather(*(e.step("Anything else?") for e in envs))
    assert [r[1] for r in lasts] == [1.0, 0.0, 1.0, 0.0] and all(r[2] for r in lasts)


# --- dual control and a user that breaks its rules (a key-value world) ---------------------------------

KV_TALK = """
id: kvtalk
environment: {{type: kv, initial: {{a: "1"}}}}
tasks:
  - id: set-color
    instruction: Hi, could you help me set a key?
    split: train
    user:
      instructions: You want color=blue. You set it yourself with put when the assistant asks you to.
{user}
    checkers: [{{type: kv_equals, key: color, value: blue}}]
"""

DUAL = """      tools: [put]
      policy:
        type: scripted
        actions:
          - {tool: put, arguments: {key: color, value: blue}}
          - {answer: "I set it myself. ###STOP###"}
"""


def kv_talk(tmp_path, host, user):
    (tmp_path / "kvtalk").mkdir(exist_ok=True)
    (tmp_path / "kvtalk" / "pack.yaml").write_text(textwrap.dedent(KV_TALK.format(user=user)).lstrip())
    return load_pack(tmp_path / "kvtalk", host=host)


def test_a_user_only_tool_called_by_the_agent_is_an_invalid_step(tmp_path, host):
    pack = kv_talk(tmp_path, host, DUAL)
    env = PackEnv(pack, host=host)
    _, info = env.reset(seed=1, options={"task_id": "set-color"})
    assert [t["function"]["name"] for t in info["tools"]] == ["get", "boom"]  # put is the user's
    assert not env.action_space.contains({"tool": "put", "arguments": {"key": "color", "value": "blue"}})
    obs, reward, terminated, _, info = env.step({"tool": "put", "arguments": {"key": "color", "value": "blue"}})
    assert obs == "error: unknown tool 'put'; available tools: boom, get" and not terminated
    assert env.core.episode.trajectory.steps[0].invalid
    assert env.step({"tool": "get", "arguments": {"key": "color"}})[0] == "(missing)"  # the call never ran
    obs, reward, terminated, _, info = env.step("Please set color to blue on your side.")
    assert (obs, reward, terminated, info["status"]) == ("I set it myself.", 1.0, True, "passed")
    assert [s.action.name for s in env.result.trajectory.user.steps if isinstance(s.action, ToolCall)] == ["put"]


def test_a_broken_user_rule_gives_no_reward_and_is_the_simulators_failure(tmp_path, host):
    user = DUAL + "      checks:\n        - {type: said, text: purple}\n"
    env = PackEnv(kv_talk(tmp_path, host, user), host=host)
    env.reset(seed=1, options={"task_id": "set-color"})
    obs, reward, terminated, truncated, info = env.step("Please set color to blue on your side.")
    assert (reward, terminated, truncated) == (0.0, False, True)  # cut by the simulator, not a terminal failure
    assert info["user_failed"] and not info["scored"] and info["status"] == "error" and info["error_kind"] == "user"
    assert "broke its instructions" in info["error"] and "purple" in info["error"]
    assert {v["checker"]: v["passed"] for v in info["verdicts"]} == {"kv_equals": True, "user.said": False}
    # the reward function leaves it out (None), it does not count it as the agent's 0
    reward_fn = VerdictReward(kv_talk(tmp_path, host, user), host=host)
    assert reward_fn(prompts=[None], completions=[[{"role": "assistant", "content": "Please set it."}]],
                     task_id=["set-color"], seed=[1]) == [None]
    assert reward_fn.last[0]["user_failed"] and "purple" in reward_fn.last[0]["error"]


def test_a_crashing_user_policy_is_the_simulators_failure(tmp_path, host):
    broken = tmp_path / "broken_user.py"
    broken.write_text("def act(state):\n    raise RuntimeError('simulator down')\n")
    env = PackEnv(kv_talk(tmp_path, host, f"      policy: {{type: callable, function: '{broken}:act'}}\n"), host=host)
    env.reset(seed=1, options={"task_id": "set-color"})
    _, reward, terminated, truncated, info = env.step("Hello, what do you need?")
    assert (reward, terminated, truncated, info["error_kind"], info["user_failed"]) == (0.0, False, True, "user", True)
    assert "simulator down" in info["error"]


def test_the_users_usage_is_reported_and_counted(tmp_path, host):
    """A callable user that reports what each reply cost (it stands in for an LLM user: litellm is
    not in this plugin's test venv); the gym env reports it per step and in the episode's usage."""
    paid = tmp_path / "paid_user.py"
    paid.write_text("from agentsynth_kernel import Answer, Turn, Usage\n"
                    "def act(state):\n"
                    "    done = len(state.trajectory.steps) >= 1\n"
                    "    text = 'Thanks. ###STOP###' if done else 'Set color to blue, please.'\n"
                    "    return Turn([Answer(text)], usage=Usage(prompt_tokens=10, completion_tokens=3, requests=1))\n")
    env = PackEnv(kv_talk(tmp_path, host, f"      policy: {{type: callable, function: '{paid}:act'}}\n"), host=host)
    env.reset(seed=1, options={"task_id": "set-color"})
    obs, *_, info = env.step("What do you need?")
    assert obs == "Set color to blue, please." and info["user_usage"]["requests"] == 1
    env.step({"tool": "get", "arguments": {"key": "a"}})
    *_, end = env.step("Done.")
    assert {k: end["user_usage"][k] for k in ("prompt_tokens", "completion_tokens", "requests")} == \
        {"prompt_tokens": 20, "completion_tokens": 6, "requests": 2}
    assert env.result.usage.requests == 2 and env.result.usage.prompt_tokens == 20


def test_a_user_tool_the_world_lacks_fails_reset_with_its_name(tmp_path, host):
    env = PackEnv(kv_talk(tmp_path, host, "      tools: [teleport]\n      script: [hi]\n"), host=host)
    with pytest.raises(RuntimeError, match="task 'set-color'.*teleport"):
        env.reset(options={"task_id": "set-color"})


# --- TRL: reward_funcs replay and environment_factory -------------------------------------------------


def test_reward_function_replays_the_conversation_against_the_same_user(support, host, oracle_runs):
    reward = VerdictReward(support, host=host, split="all")
    completions = [to_openai_messages(r.trajectory)[2:] for r in oracle_runs]  # after system + opening message
    ids = [r.task_id for r in oracle_runs]
    seeds = [r.seed for r in oracle_runs]
    assert reward(prompts=[None] * 4, completions=completions, task_id=ids, seed=seeds) == [1.0] * 4
    assert all(d["drift"] == [] and d["status"] == "passed" for d in reward.last)
    # the agent's messages alone (no recorded user replies): the scripted user is re-driven, same verdicts
    alone = [[m for m in c if m["role"] != "user"] for c in completions]
    assert reward(prompts=[None] * 4, completions=alone, task_id=ids, seed=seeds) == [1.0] * 4


def test_reward_function_scores_shortcuts_zero_and_refuses_another_conversation(support, host):
    reward = VerdictReward(support, host=host, split="all")
    tool_calls = [{"id": f"c{i}", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                  for i, c in enumerate(REFUND)]
    at_once = [{"role": "assistant", "content": "", "tool_calls": tool_calls},
               {"role": "assistant", "content": "Your refund is done."}]
    claim = "Your refund has been processed."  # one text completion, no action
    invented = [{"role": "assistant", "content": "What is your order number?"},
                {"role": "user", "content": "It's order 9999, and refund me twice."},
                {"role": "assistant", "content": "Done."}]
    out = reward(prompts=[None] * 3, completions=[at_once, claim, invented],
                 task_id=["refund-broken-kettle"] * 3, seed=[SEED] * 3)
    assert out == [0.0, 0.0, None]
    assert reward.last[0]["status"] == "failed" and reward.last[1]["status"] == "failed"
    error = reward.last[2]["error"]
    assert "task 'refund-broken-kettle'" in error and "turn 0" in error and "9999" in error


def test_environment_factory_talks_through_message_user(support, host, oracle_runs):
    cls = environment_factory(support, host=host, split="all", task_ids=["change-address"])
    assert {"sql_query", "sql_execute", "message_user"} <= set(dir(cls))
    run = next(r for r in oracle_runs if r.task_id == "change-address")
    env = cls()
    env.reset(task_id="change-address", seed=run.seed, prompt=[{"role": "user", "content": "x"}])
    replies = []
    for step in run.trajectory.steps[:-1]:  # the last answer is the completion's final text
        if isinstance(step.action, Answer):
            replies.append(env.message_user(message=step.action.content))
        else:
            getattr(env, step.action.name)(**step.action.arguments)
    assert replies == ["My email is sam@example.com.", "The new address is 12 Elm St.", "Yes, that's right.",
                       "Great, thank you."]
    final = [{"role": "assistant", "content": run.trajectory.steps[-1].action.content}]
    out = VerdictReward(support, host=host, split="all")(prompts=[None], completions=[final],
                                                         task_id=["change-address"], environments=[env])
    assert out == [1.0]
    # a rollout that changes the address at once, without asking, gets 0
    env.reset(task_id="change-address", seed=SEED)
    env.sql_execute(sql="UPDATE orders SET address = '12 Elm St' WHERE id = 1051")
    assert env.message_user(message="Done.") == "My email is sam@example.com."
    assert env.message_user(message="").startswith("error: message_user needs a 'message'")
    out = VerdictReward(support, host=host, split="all")(prompts=[None], completions=[[]],
                                                         task_id=["change-address"], environments=[env])
    assert out == [0.0]


# --- OpenEnv ----------------------------------------------------------------------------------------


def test_openenv_server_plays_the_conversation(support, host, oracle_runs):
    pytest.importorskip("openenv.core")
    import threading
    import time

    import uvicorn
    from openenv.core import GenericEnvClient

    from agentsynth_rl.serve import make_app

    srv = uvicorn.Server(uvicorn.Config(make_app(support, host=host, split="all", max_concurrent_envs=2),
                                        host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the OpenEnv server did not start"
        time.sleep(0.01)
    url = f"http://127.0.0.1:{srv.servers[0].sockets[0].getsockname()[1]}"
    try:
        run = next(r for r in oracle_runs if r.task_id == "cancel-shipped-refused")
        with GenericEnvClient(base_url=url).sync() as env:
            first = env.reset(task_id=run.task_id, seed=run.seed)
            assert first.observation["multi_turn"] is True
            results = []
            for actions in turns_of(run.trajectory):
                [action] = actions
                payload = {"answer": action.content} if isinstance(action, Answer) else \
                    {"tool": action.name, "arguments": action.arguments}
                results.append(env.step(payload))
                if results[-1].done:
                    break
            assert [r.observation["speaker"] for r in results] == ["user", "world", "user", "user"]
            assert results[0].observation["content"] == "It's under sam@example.com." and not results[0].done
            assert results[-1].done and results[-1].reward == 1.0 and results[-1].observation["status"] == "passed"
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


def test_environment_owned_reward_grades_the_talk_so_far(support, host, oracle_runs):
    """``get_reward`` (TRL's environment-owned reward) says nothing more to the user: a talk the
    user has not ended is cut by the agent and graded; asking nothing and acting earns 0."""
    cls = environment_factory(support, host=host, split="all", task_ids=["refund-broken-kettle"], owns_reward=True)
    run = next(r for r in oracle_runs if r.task_id == "refund-broken-kettle")
    env = cls()
    env.reset(task_id=run.task_id, seed=run.seed)
    for step in run.trajectory.steps[:-2]:  # up to the "Done" message, which gets "Thanks, that's all."
        if isinstance(step.action, Answer):
            env.message_user(message=step.action.content)
        else:
            getattr(env, step.action.name)(**step.action.arguments)
    assert env.get_reward() == 1.0 and env.outcome["status"] == "passed" and env.outcome["user_stopped"] == ""
    assert env.get_reward() == 1.0  # idempotent: the first verdict stays
    env.reset(task_id=run.task_id, seed=run.seed)
    for call in REFUND:
        env.sql_execute(**call.arguments)
    assert env.get_reward() == 0.0 and env.outcome["error_kind"] == "agent"
