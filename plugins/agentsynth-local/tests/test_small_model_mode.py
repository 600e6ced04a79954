"""The llm policy's small-model mode, checked on the requests it sends to a real HTTP server."""

from __future__ import annotations

import asyncio
import json

from agentsynth_kernel import execute, fit_messages, load_run_spec
from agentsynth_kernel.testing import ScriptedLLMServer, conversation_handler, reply, tool_calls

SPEC = """
environment: {{type: counter}}
tasks:
  - id: add-two
    instruction: Add 2 to the counter.
    checkers: [{{type: counter_at_least, value: 2}}]
policy: {{type: llm, model: "{model}", api_base: "{base}", {extra}}}
"""


def run(host, write, base, model="openai/m", extra=""):
    spec, pack = load_run_spec(write("spec.yaml", SPEC.format(model=model, base=base, extra=extra)), host=host)
    return asyncio.run(execute(spec, pack, host=host))


def test_small_model_mode_forces_a_call_and_ends_on_final_answer(host, write):
    turns = [tool_calls(("add", {"n": 2})), tool_calls(("final_answer", {"answer": "added 2"}))]
    with ScriptedLLMServer(handler=conversation_handler(turns)) as server:
        report = run(host, write, server.base_url, extra="small_model: true")
        first, second = (r.json for r in server.requests if r.method == "POST")
    result = report.results[0]
    assert result.status == "passed" and result.trajectory.final_answer == "added 2"
    assert first["tool_choice"] == "required" and second["tool_choice"] == "required"
    assert [t["function"]["name"] for t in first["tools"]] == ["add", "read", "final_answer"]
    assistant = second["messages"][-2]
    assert assistant["role"] == "assistant" and assistant["content"] == "" and assistant["tool_calls"]
    assert first["max_tokens"] == 256
    assert [s.action.name for s in result.trajectory.steps if hasattr(s.action, "name")] == ["add"]


def test_without_the_mode_nothing_changes(host, write):
    with ScriptedLLMServer(handler=conversation_handler([tool_calls(("add", {"n": 2})), reply("done")])) as server:
        report = run(host, write, server.base_url)
        first, second = (r.json for r in server.requests if r.method == "POST")
    assert report.results[0].status == "passed"
    assert "tool_choice" not in first and [t["function"]["name"] for t in first["tools"]] == ["add", "read"]
    assert second["messages"][-2]["content"] is None


def test_local_models_get_the_mode_by_default(host, write):
    turns = [tool_calls(("final_answer", {"answer": "nothing to do"}))]
    with ScriptedLLMServer(handler=conversation_handler(turns)) as server:
        report = run(host, write, server.base_url, model="local/tiny")
        sent = server.requests[-1].json
    assert sent["tool_choice"] == "required" and sent["model"] == "tiny"
    assert report.results[0].status == "failed" and report.results[0].trajectory.final_answer == "nothing to do"


def test_the_conversation_sent_fits_the_context(host, write):
    turns = [tool_calls(("add", {"n": 1}))] * 8 + [tool_calls(("final_answer", {"answer": "ok"}))]
    with ScriptedLLMServer(handler=conversation_handler(turns)) as server:
        report = run(host, write, server.base_url, extra="small_model: true, context_chars: 600")
        sizes = [len(json.dumps(r.json["messages"])) for r in server.requests if r.method == "POST"]
        last = server.requests[-1].json["messages"]
    assert report.results[0].status == "passed"  # 8 x add 1: the world got every call
    assert len(report.results[0].trajectory.steps) >= 8
    assert any("earlier turns cut" in (m.get("content") or "") for m in last)
    assert max(sizes) < 2 * 600 + 1200  # bounded, although the conversation keeps growing
    roles = [m["role"] for m in last]
    for i, role in enumerate(roles):  # every tool result still follows its call
        if role == "tool":
            assert roles[i - 1] in ("assistant", "tool")


def test_fit_messages_keeps_task_and_latest_turns():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for i in range(10):
        messages += [{"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}"}]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": "r" * 100}]
    fitted = fit_messages(messages, 400)
    assert fitted[:2] == messages[:2] and fitted[-2:] == messages[-2:]
    assert "earlier turns cut" in fitted[2]["content"]
    assert fit_messages(messages[:4], 10_000) == messages[:4]
