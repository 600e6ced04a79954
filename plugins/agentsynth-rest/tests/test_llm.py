"""The llm policy drives the tickets API over a real OpenAI-compatible server on 127.0.0.1: the
operations go out as OpenAI function schemas, the model's calls come back as real HTTP requests,
and the backend decides."""

from __future__ import annotations

import asyncio

import yaml

from agentsynth_kernel import execute, get_host, load_run_spec
from agentsynth_kernel.testing import ScriptedLLMServer, conversation_handler, reply, tool_calls

SCRIPT = [
    tool_calls(("listTickets", {"q": "VPN drops every hour"}), content="Let me find both tickets."),
    tool_calls(("updateTicket", {"ticket_id": 4, "status": "closed"}),
               ("addComment", {"ticket_id": 4, "author": "helpdesk", "body": "Duplicate of #1"}),
               ("updateTicket", {"ticket_id": "4/../1", "status": "closed"})),
    reply("Closed #4 as a duplicate of #1."),
]


def test_an_llm_policy_solves_a_task_through_the_api(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSYNTH_LLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SCRIPTED_TEST_KEY", "sk-test-not-a-secret-1234")
    with ScriptedLLMServer(handler=conversation_handler(SCRIPT)) as server:
        spec = {"pack": "tickets", "only": ["close-duplicate"],
                "policy": {"type": "llm", "model": "openai/scripted-model", "api_base": server.base_url,
                           "api_key_env": "SCRIPTED_TEST_KEY", "max_turns": 5, "timeout": 5, "max_retries": 0}}
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
        run_spec, pack = load_run_spec(tmp_path / "spec.yaml")
        report = asyncio.run(execute(run_spec, pack, host=get_host(), run_dir=tmp_path / "run"))
        requests = list(server.requests)
    [result] = report.results
    tools = {t["function"]["name"]: t["function"] for t in requests[0].json["tools"]}
    assert "resetDatabase" not in tools and len(tools) == 11
    assert tools["updateTicket"]["parameters"]["required"] == ["ticket_id"]
    observations = [s.observation.content for s in result.trajectory.steps if s.observation is not None]
    assert observations[0].startswith("HTTP 200 OK") and '"total": 2' in observations[0]
    # refused before any request: the tool's schema says integer (the kernel checks it for llm policies)
    assert observations[3].startswith("error:") and "ticket_id" in observations[3] and "4/../1" in observations[3]
    # the traversal attempt was an error, not a crash; the two real calls did the work: the backend passes
    assert result.status == "passed", result.why
    tool_messages = [m for m in requests[2].messages if m["role"] == "tool"]
    assert len(tool_messages) == 4
