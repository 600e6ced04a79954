"""The ``llm`` policy through the whole stack: spec -> engine -> policy -> LLM client -> a real
OpenAI-compatible server on 127.0.0.1 -> the kv testworld environment -> checkers."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentsynth_kernel.engine import execute
from agentsynth_kernel.errors import SpecError
from agentsynth_kernel.spec import load_run_spec
from agentsynth_kernel.testing import ScriptedLLMServer, conversation_handler, reply, status, tool_calls

SPEC = """
environment: {{type: kv, initial: {{a: "1"}}}}
tasks:
  - id: copy-a
    instruction: Copy the value of a into b.
    checkers: [{{type: kv_equals, key: b, value: "1"}}]
policy:
  type: llm
  model: openai/scripted-model
  api_base: {base}
  api_key_env: SCRIPTED_TEST_KEY
  max_turns: {max_turns}
  temperature: 0.0
  max_retries: 2
  timeout: 5
trials: {trials}
concurrency: {concurrency}
{extra}
"""

# turn 0: two parallel calls, one with broken JSON and one with a schema error, plus a good one
# and an unknown tool; turn 1: the fix; turn 2: the final answer
SCRIPT = [
    tool_calls(("get", {"key": "a"}), ("set", '{"key": "b", "value": '), ("set", {"key": "b"}), ("teleport", {}),
               content="Let me look first."),
    tool_calls(("set", {"key": "b", "value": "1"})),
    reply("b is now 1"),
]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSYNTH_LLM_CACHE", str(tmp_path / "llm-cache"))
    monkeypatch.setenv("SCRIPTED_TEST_KEY", "sk-scripted-secret-123456")


def run_spec(write, host, base: str, *, max_turns: int = 6, trials: int = 1, concurrency: int = 1, extra: str = "",
             run_dir=None, name: str = "spec.yaml"):
    path = write(name, SPEC.format(base=base, max_turns=max_turns, trials=trials, concurrency=concurrency,
                                   extra=extra))
    spec, pack = load_run_spec(path, host=host)
    return asyncio.run(execute(spec, pack, host=host, run_dir=run_dir))


def test_multi_turn_episode_with_parallel_and_invalid_calls(host, write):
    with ScriptedLLMServer(handler=conversation_handler(SCRIPT)) as server:
        report = run_spec(write, host, server.base_url)
        requests = list(server.requests)
    [result] = report.results
    assert result.status == "passed", result.error
    steps = result.trajectory.steps
    calls = [(s.action.name, s.invalid) for s in steps if hasattr(s.action, "name")]
    # the two malformed calls are recorded (invalid) but not executed; the unknown tool too
    # in the model's own order (the kernel records the rejected calls where they stood)
    assert calls == [("get", False), ("set", True), ("set", True), ("teleport", True), ("set", False)]
    assert steps[0].thought == "Let me look first." and steps[0].usage is not None
    assert sum(s.invalid for s in steps) == 3
    bad_json = next(s for s in steps if s.invalid and s.observation.data and s.observation.data["reason"] == "bad_json")
    assert "not valid JSON" in bad_json.observation.content and bad_json.observation.error
    schema = next(s for s in steps if s.invalid and s.observation.data and s.observation.data["reason"] == "schema")
    assert "value: missing required argument" in schema.observation.content
    assert {s.turn for s in steps[:4]} == {0}  # one turn of parallel calls
    assert result.trajectory.final_answer == "b is now 1"
    assert result.trajectory.metadata["llm"]["turns"] == 3 and result.trajectory.metadata["llm"]["invalid_tool_calls"] == 3
    assert result.usage.requests == 3 and result.usage.prompt_tokens > 0 and result.usage.cost_usd is None
    # the model saw one tool result per call, in its own order, with matching ids and the errors
    assert len(requests) == 3
    second = requests[1].messages
    assistant = second[-5]
    assert assistant["role"] == "assistant" and assistant["content"] == "Let me look first."
    ids = [c["id"] for c in assistant["tool_calls"]]
    results = second[-4:]
    assert [m["tool_call_id"] for m in results] == ids and all(m["role"] == "tool" for m in results)
    assert results[0]["content"] == "1"
    assert results[1]["content"].startswith("error: arguments of 'set' are not valid JSON")
    assert results[2]["content"].startswith("error: invalid arguments for 'set'")
    assert results[3]["content"].startswith("error: unknown tool 'teleport'")
    assert requests[0].messages[1]["content"].startswith("Copy the value of a into b.")
    assert requests[0].headers["authorization"] == "Bearer sk-scripted-secret-123456"
    assert "sk-scripted-secret" not in json.dumps(host.registry["policy"]["llm"].description)


def test_max_turns_stops_the_episode(host, write):
    loop = tool_calls(("get", {"key": "a"}))
    with ScriptedLLMServer(handler=lambda request: loop) as server:
        report = run_spec(write, host, server.base_url, max_turns=3)
        sent = len(server.requests)
    [result] = report.results
    assert sent == 3
    assert result.status == "failed" and result.trajectory.metadata["stopped"] == "max_turns"
    assert len(result.trajectory.tool_calls) == 3


def test_provider_failure_is_attributed(host, write):
    with ScriptedLLMServer(handler=lambda request: status(503)) as server:
        report = run_spec(write, host, server.base_url)
        sent = len(server.requests)
    [result] = report.results
    assert result.status == "error" and result.error_kind == "provider"
    assert "gave up after 3 attempts" in result.error and sent == 3
    assert "sk-scripted-secret" not in result.error


def test_budget_stops_the_run_and_resume_with_more_budget_finishes(host, write, tmp_path):
    run_dir = tmp_path / "run"
    with ScriptedLLMServer(handler=conversation_handler(SCRIPT)) as server:
        stopped = run_spec(write, host, server.base_url, trials=2, extra="budget: {tokens: 700}", run_dir=run_dir)
        assert stopped.stopped.startswith("budget"), stopped.stopped
        stored = [r.key for r in stopped.results]
        assert all(r.error_kind != "budget" for r in stopped.results)  # the stopped episode is not stored
        assert len(stored) < 2
        sent = len(server.requests)
        # the same budget again: what the first session spent still counts, so nothing more fits
        again = run_spec(write, host, server.base_url, trials=2, extra="budget: {tokens: 700}", run_dir=run_dir)
        assert again.stopped.startswith("budget") and len(again.results) == len(stored)
        assert len(server.requests) - sent <= 1
        resumed = run_spec(write, host, server.base_url, trials=2, extra="budget: {tokens: 100000}", run_dir=run_dir)
    assert not resumed.stopped
    assert len(resumed.results) == 2 and all(r.status == "passed" for r in resumed.results)


def test_a_rerun_replays_from_the_cache_with_zero_requests(host, write):
    with ScriptedLLMServer(handler=conversation_handler(SCRIPT)) as server:
        first = run_spec(write, host, server.base_url, trials=3, concurrency=3)
        assert len(server.requests) == 9
        server.clear()
        again = run_spec(write, host, server.base_url, trials=3, concurrency=3)
        assert len(server.requests) == 0
    assert [r.status for r in again.results] == [r.status for r in first.results] == ["passed"] * 3
    assert [r.trajectory.final_answer for r in again.results] == ["b is now 1"] * 3
    assert all(r.trajectory.metadata["llm"]["cache_hits"] == 3 for r in again.results)
    assert all(r.usage.cost_usd == 0.0 and r.usage.requests == 0 for r in again.results)


def test_trials_are_cached_separately(host, write):
    """Each trial has its own seed, so temperature > 0 trials are not replays of each other."""
    with ScriptedLLMServer(handler=conversation_handler(SCRIPT)) as server:
        run_spec(write, host, server.base_url, trials=2)
        assert len(server.requests) == 6


def test_retries_inside_an_episode_are_counted(host, write):
    flaky = iter([status(429, headers={"Retry-After": "0"}), status(500)])

    def handler(request):
        return next(flaky, None) or conversation_handler(SCRIPT)(request)

    with ScriptedLLMServer(handler=handler) as server:
        report = run_spec(write, host, server.base_url)
        assert len(server.requests) == 5
    [result] = report.results
    assert result.status == "passed" and result.trajectory.metadata["llm"]["retries"] == 2


def test_spec_errors_name_the_policy_key(host, write):
    path = write("bad.yaml", """
        environment: {type: kv}
        tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: a, value: "1"}]}]
        policy: {type: llm, temprature: 0.5}
    """)
    with pytest.raises(SpecError) as info:
        load_run_spec(path, host=host)
    text = str(info.value)
    assert "policy.temprature: unknown key" in text and "did you mean 'temperature'" in text
    assert "policy.model: missing required key" in text


def test_long_observations_are_cut_for_the_model(host, write):
    turns = [tool_calls(("get", {"key": "big"})), reply("seen")]
    with ScriptedLLMServer(handler=conversation_handler(turns)) as server:
        path = write("long.yaml", f"""
            environment: {{type: kv, initial: {{big: "{'x' * 500}"}}}}
            tasks: [{{id: t, instruction: read big, checkers: [{{type: answer_contains, text: seen}}]}}]
            policy: {{type: llm, model: openai/m, api_base: "{server.base_url}", max_observation_chars: 100}}
        """)
        spec, pack = load_run_spec(path, host=host)
        report = asyncio.run(execute(spec, pack, host=host))
        tool_message = server.requests[1].messages[-1]
    assert report.results[0].status == "passed"
    assert tool_message["content"] == "x" * 100 + "\n[... 400 more characters cut]"
    assert report.results[0].trajectory.steps[0].observation.content == "x" * 500  # the record keeps it all
