"""The llm policy drives a composite world over a real OpenAI-compatible server on 127.0.0.1:
the namespaced tool names go out in the request as OpenAI function names, and the model's
(parallel) calls of two worlds come back to the right children."""

from __future__ import annotations

import asyncio

import yaml

from agentsynth_kernel import execute, get_host, load_run_spec
from agentsynth_kernel.testing import ScriptedLLMServer, conversation_handler, reply, tool_calls
from packs import COUNTER_KV, both_task

SCRIPT = [
    tool_calls(("c__inc", {"by": 3}), ("kv__put", {"key": "done", "value": "yes"}), ("inc", {"by": 3}),
               content="Both worlds at once."),
    reply("counter at 3 and done stored"),
]


def test_an_llm_policy_works_both_worlds_in_one_turn(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSYNTH_LLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SCRIPTED_TEST_KEY", "sk-test-not-a-secret-1234")
    with ScriptedLLMServer(handler=conversation_handler(SCRIPT)) as server:
        spec = {"environment": COUNTER_KV, "tasks": [both_task()],
                "policy": {"type": "llm", "model": "openai/scripted-model", "api_base": server.base_url,
                           "api_key_env": "SCRIPTED_TEST_KEY", "max_turns": 4, "timeout": 5, "max_retries": 0}}
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
        run_spec, pack = load_run_spec(tmp_path / "spec.yaml")
        report = asyncio.run(execute(run_spec, pack, host=get_host(), run_dir=tmp_path / "run"))
        requests = list(server.requests)
    [result] = report.results
    assert result.status == "passed", result.why
    sent = [t["function"]["name"] for t in requests[0].json["tools"]]
    assert sent == ["c__inc", "c__get", "kv__put", "kv__get"]
    calls = [(s.action.name, s.invalid, s.turn) for s in result.trajectory.steps if hasattr(s.action, "name")]
    assert calls == [("c__inc", False, 0), ("kv__put", False, 0), ("inc", True, 0)]  # the bare name is refused
    tool_messages = [m for m in requests[1].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages][:2] == ["counter is 3", "stored"]
