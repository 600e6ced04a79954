"""Multi-turn tasks with a simulated user (``user:`` on a task): the talk, what the agent may see,
dual control, the user's own rules and budget, and failure attribution in the report."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentsynth_kernel.engine import execute
from agentsynth_kernel.episode import replay_episode
from agentsynth_kernel.errors import SpecError
from agentsynth_kernel.records import Answer, Observation, ToolCall, to_json, to_openai_messages
from agentsynth_kernel.report import summarize, summary_lines
from agentsynth_kernel.spec import load_run_spec
from agentsynth_kernel.testing import ScriptedLLMServer, reply, tool_calls

SECRET = "the vault code is 7319"

SPEC = """
environment: {{type: kv, initial: {{a: "1"}}}}
tasks:
  - id: set-color
    instruction: Hi, could you set a key for me?
    user:
      instructions: You want key color set to blue; {secret}. Say the key and value when asked.
{user}
    checkers: [{{type: kv_equals, key: color, value: blue}}]
policy: {policy}
trials: {trials}
"""

SCRIPTED_USER = """      script:
        - The key is color and the value is blue.
        - Yes, thanks.
"""

ASKING_AGENT = """
  type: scripted
  actions:
    - {answer: "Which key, and which value?"}
    - {tool: set, arguments: {key: color, value: blue}}
    - {answer: "Done: color is blue."}
"""


def run(write, host, *, user: str = SCRIPTED_USER, policy: str = ASKING_AGENT, trials: int = 1, extra: str = "",
        run_dir=None):
    path = write("spec.yaml", SPEC.format(secret=SECRET, user=user, policy=policy, trials=trials) + extra)
    spec, pack = load_run_spec(path, host=host)
    return asyncio.run(execute(spec, pack, host=host, run_dir=run_dir))


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSYNTH_LLM_CACHE", str(tmp_path / "llm-cache"))
    monkeypatch.setenv("SCRIPTED_TEST_KEY", "sk-scripted-secret-123456")


def test_a_conversation_with_a_scripted_user_is_graded_on_the_end_state(host, write):
    [result] = run(write, host).results
    assert result.status == "passed", result.why
    steps = result.trajectory.steps
    # the agent's first message got the user's first scripted turn as its observation
    assert isinstance(steps[0].action, Answer) and steps[0].observation.content == "The key is color and the value is blue."
    assert isinstance(steps[1].action, ToolCall)
    assert steps[2].observation.content == "Yes, thanks."
    # the user's side: its messages, then the stop word that ended the talk after the script
    side = result.trajectory.user
    assert side is not None and side.messages == ["The key is color and the value is blue.", "Yes, thanks.", "###STOP###"]
    assert side.metadata["stopped"] == "user" and SECRET in side.instruction
    assert result.trajectory.metadata.get("stopped") is None
    # rendered for training: the user's replies are user messages between the agent's
    roles = [m["role"] for m in to_openai_messages(result.trajectory)]
    assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant", "user", "assistant"]


def test_an_agent_that_does_not_act_fails_after_the_whole_talk(host, write):
    [result] = run(write, host, policy="noop").results
    assert result.status == "failed" and result.error_kind == "agent"
    assert len(result.trajectory.user.messages) == 3  # the user went through its script, then stopped


def test_the_agent_never_sees_the_users_instructions(host, write, tmp_path):
    """An LLM agent and an LLM user on two real servers: everything the agent's model is sent, and
    everything an agent policy is handed, is free of the user's instructions."""
    agent_script = [reply("Which key and value do you want?"), tool_calls(("set", {"key": "color", "value": "blue"})),
                    reply("Done.")]
    user_script = [reply("Key color, value blue."), reply("Great. ###STOP###")]
    with ScriptedLLMServer(agent_script) as agent, ScriptedLLMServer(user_script) as user_server:
        user = (f"      policy: {{type: llm, model: openai/scripted-model, api_base: '{user_server.base_url}', "
                "api_key_env: SCRIPTED_TEST_KEY}\n")
        policy = (f"{{type: llm, model: openai/scripted-model, api_base: '{agent.base_url}', "
                  "api_key_env: SCRIPTED_TEST_KEY}")
        [result] = run(write, host, user=user, policy=policy).results
        agent_sent = [r.json for r in agent.requests]
        user_sent = [r.json for r in user_server.requests]
    assert result.status == "passed", result.why
    assert len(agent_sent) == 3 and len(user_sent) == 2
    assert all(SECRET not in json.dumps(body) for body in agent_sent)
    # the agent's model saw the user's reply as a user message, after its own question
    last = agent_sent[1]["messages"]
    assert [m["role"] for m in last[-2:]] == ["assistant", "user"] and last[-1]["content"] == "Key color, value blue."
    # the user's model got its instructions, the simulator's prompt, and no tools of the agent's
    first = user_sent[0]
    assert SECRET in json.dumps(first["messages"]) and "You play a user" in first["messages"][0]["content"]
    assert not first.get("tools")
    assert "Which key and value do you want?" in first["messages"][-1]["content"]
    assert result.usage.requests == 5  # the user's requests count in the episode's usage


def test_a_callable_agent_gets_a_task_without_the_user(host, write, tmp_path):
    seen = tmp_path / "seen.json"
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import json\n"
        "from agentsynth_kernel.records import to_json\n"
        f"OUT = {str(seen)!r}\n"
        "def act(state):\n"
        "    with open(OUT, 'a') as fp:\n"
        "        fp.write(repr(state.task) + to_json(state.trajectory).decode() + '\\n')\n"
        "    return {'answer': 'hello'}\n"
    )
    run(write, host, policy=f"{{type: callable, function: '{agent}:act'}}")
    text = seen.read_text()
    assert text.count("\n") == 3  # asked once, then after each of the two scripted replies (the stop ends it)
    assert SECRET not in text and "user=None" in text


def test_dual_control_the_user_owns_tools_the_agent_cannot_call(host, write):
    user = """      tools: [set]
      policy:
        type: scripted
        actions:
          - {tool: set, arguments: {key: color, value: blue}}
          - {answer: "I set it myself. ###STOP###"}
"""
    agent = """
  type: scripted
  actions:
    - {tool: set, arguments: {key: color, value: red}}
    - {answer: "Please set color to blue on your side."}
"""
    [result] = run(write, host, user=user, policy=agent).results
    assert result.status == "passed", result.why
    # verify replays the user's own calls where they happened: the same verdict in a fresh world
    report = run(write, host, user=user, policy=agent)
    pack, task = report.info.pack, report.info.pack.tasks[0]
    replay = asyncio.run(replay_episode(host, pack, task, result.seed, result.trajectory))
    assert replay.status == "passed", replay
    first = result.trajectory.steps[0]
    assert first.invalid and "unknown tool 'set'" in first.observation.content  # the agent may not call it
    assert "set" not in {t.name for t in result.trajectory.tools}
    side = result.trajectory.user
    assert [s.action.name for s in side.steps if isinstance(s.action, ToolCall)] == ["set"]
    assert side.steps[0].observation.content == "ok"


def test_a_user_that_breaks_its_rules_is_the_simulators_failure(host, write):
    user = SCRIPTED_USER + "      checks:\n        - {type: said, reject: '7319'}\n        - {type: said, text: 'purple'}\n"
    report = run(write, host, user=user, trials=2)
    for result in report.results:
        assert result.status == "error" and result.error_kind == "user"
        assert "broke its instructions" in result.error and "purple" in result.error
        names = [v.checker for v in result.verdicts]
        assert "kv_equals" in names and "user.said" in names  # the world's verdict is kept next to it
    summary = summarize(report)
    assert summary["errors_by_kind"] == {"user": 2}
    assert summary["pass_rate"]["n"] == 2 and summary["pass_rate_excluding_user"]["n"] == 0
    assert any("simulated user" in line for line in summary_lines(summary))


def test_a_user_that_never_stops_ends_at_max_turns(host, write):
    user = """      max_turns: 3
      policy: {type: scripted, actions: [{answer: "Hm, go on."}]}
"""
    agent = "{type: scripted, actions: [{answer: 'Anything else?'}]}"
    [result] = run(write, host, user=user, policy=agent).results
    assert result.status == "failed"
    assert result.trajectory.user.metadata["stopped"] == "max_turns"
    assert len(result.trajectory.user.messages) == 3 and len(result.trajectory.steps) == 4


def test_a_user_policy_that_crashes_fails_the_episode_as_user(host, write, tmp_path):
    broken = tmp_path / "broken_user.py"
    broken.write_text("def act(state):\n    raise RuntimeError('simulator down')\n")
    user = f"      policy: {{type: callable, function: '{broken}:act'}}\n"
    [result] = run(write, host, user=user).results
    assert result.status == "error" and result.error_kind == "user" and "simulator down" in result.error
    # the message the simulator failed to answer is kept (unanswered), with the user's side so far
    last = result.trajectory.steps[-1]
    assert isinstance(last.action, Answer) and last.observation is None and result.trajectory.user is not None


def test_the_users_own_budget_is_a_user_failure(host, write):
    with ScriptedLLMServer([reply("Key color, value blue.")]) as server:
        user = (f"      budget: {{tokens: 5}}\n      policy: {{type: llm, model: openai/scripted-model, "
                f"api_base: '{server.base_url}', api_key_env: SCRIPTED_TEST_KEY}}\n")
        [result] = run(write, host, user=user).results
    assert result.status == "error" and result.error_kind == "user" and "budget" in result.error


@pytest.mark.parametrize(("user", "expected"), [
    ("      script: [hi]\n      policy: noop\n", "user: give either 'script' or 'policy', not both"),
    ("      max_turns: 0\n      script: [hi]\n", "max_turns"),
    ("      instructions: x\n", "user: give 'script' (scripted turns) or 'policy'"),
    ("      script: [hi]\n      instrucions: typo\n", "instrucions"),
])
def test_a_malformed_user_is_a_path_qualified_error(host, write, user, expected):
    path = write("spec.yaml", SPEC.format(secret=SECRET, user=user, policy="noop", trials=1))
    with pytest.raises(SpecError) as info:
        load_run_spec(path, host=host)
    assert expected in str(info.value) and "tasks[0].user" in str(info.value)


def test_a_user_tool_the_world_does_not_offer_is_named(host, write):
    user = SCRIPTED_USER + "      tools: [teleport]\n"
    [result] = run(write, host, user=user).results
    assert result.status == "error" and result.error_kind == "user" and "teleport" in result.error


def test_the_stored_trajectory_round_trips_with_the_users_side(host, write, tmp_path):
    run_dir = tmp_path / "run"
    report = run(write, host, run_dir=run_dir)
    [result] = report.results
    from agentsynth_kernel.store import RunStore

    store = RunStore(run_dir, create=False)
    try:
        [stored] = list(store.results())
    finally:
        store.close()
    assert to_json(stored.trajectory) == to_json(result.trajectory)
    assert stored.trajectory.user.messages[0] == "The key is color and the value is blue."


@pytest.mark.parametrize(("params", "passed", "detail"), [
    ({"text": "order number"}, True, "2 message(s) checked"),
    ({"regex": "confirm", "before": "set"}, False, "before the first set call matches /confirm/"),
    ({"regex": "confirm"}, True, ""),
    ({"reject": "refunded"}, False, "rejected pattern /refunded/"),
    ({"text": "purple"}, False, "says ['purple']"),
    ({"text": "order", "max_chars": 20}, False, "more than max_chars=20"),
    # the user answered the question with its order number, not a yes: the call was not agreed to
    ({"before": "set", "regex": "order", "confirmed": "yes"}, False, "does not agree (/yes/): '1042'"),
    ({"before": "set", "regex": "order", "confirmed": "1042"}, True, "1 message(s) before the first set call"),
])
def test_said_reads_every_message(params, passed, detail):
    from agentsynth_kernel.builtins.checkers import Said
    from agentsynth_kernel.records import Step, Trajectory

    trajectory = Trajectory("t", "hi", steps=[
        Step(Answer("What is your order number?"), Observation("1042")), Step(ToolCall("set", {"key": "k", "value": "v"})),
        Step(Answer("Please confirm: it is refunded.")),
    ])
    verdict = Said(**params).check(None, trajectory)
    assert verdict.passed is passed and detail in verdict.detail


def test_going_quiet_does_not_make_a_broken_user_rule_the_simulators_failure(host, write):
    """An agent that only calls tools until max_steps never lets the user speak, so the user's rule
    (it must give the key) is broken: that fails the agent, it is not the simulator's error."""
    user = SCRIPTED_USER + "      checks:\n        - {type: said, text: color}\n"
    agent = "{type: scripted, actions: [" + ", ".join(["{tool: get, arguments: {key: a}}"] * 4) + "]}"
    [result] = run(write, host, user=user, policy=agent, extra="max_steps: 3\n").results
    assert result.status == "failed" and result.error_kind == "agent"
    assert "user.said" in [v.checker for v in result.verdicts if not v.passed]
    assert result.trajectory.metadata["user_cut"].startswith("user.said:")
