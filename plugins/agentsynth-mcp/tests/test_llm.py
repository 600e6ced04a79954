"""A model in the loop: the kernel's `llm` policy against a scripted OpenAI-compatible server on
127.0.0.1, acting in the mcp-tickets pack's MCP servers. Checks that the MCP tool schemas reach the
model as OpenAI tools, and that tool results (a resource read, an isError) come back to it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

from agentsynth_kernel.testing import ScriptedLLMServer, reply, tool_calls

TASKS = {
    "Customers cannot pay": [("search_tickets", {"query": "checkout"}),
                             ("update_ticket", {"ticket_id": 6, "priority": "urgent", "status": "in_progress"})],
    "The Wi-Fi in meeting room B": [("close_ticket", {"ticket_id": 5, "resolution": "fixed"}),  # isError
                                    ("read_resource", {"uri": "team://oncall"}),
                                    ("update_ticket", {"ticket_id": 5, "status": "open", "assignee": "dave"})],
}


def model(request):
    messages = request["messages"]
    user = next(m["content"] for m in messages if m["role"] == "user")
    plan = next(calls for prefix, calls in TASKS.items() if user.startswith(prefix))
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if turn >= len(plan):
        return reply("All done.")
    name, args = plan[turn]
    return tool_calls((name, args, f"call_{turn}"))


def test_llm_policy_drives_mcp_servers(tmp_path):
    with ScriptedLLMServer(handler=model) as server:
        spec = {
            "pack": "mcp-tickets",
            "only": ["escalate-checkout", "reopen-oncall"],
            "policy": {"type": "llm", "model": "hosted_vllm/scripted", "api_base": server.base_url,
                       "api_key_env": "SCRIPTED_KEY", "max_turns": 6, "cache": False},
        }
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "SCRIPTED_KEY": "sk-test"}
        proc = subprocess.run([sys.executable, "-m", "agentsynth_kernel", "run", "spec.yaml", "--no-store",
                               "--json", "-"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
        requests = [r.json for r in server.requests]
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["counts"] == {"passed": 2, "failed": 0, "error": 0}, report["results"]

    # the MCP tools, with their JSON schemas, are the model's tools
    tools = {t["function"]["name"]: t["function"] for t in requests[0]["tools"]}
    assert {"get_ticket", "update_ticket", "close_ticket", "read_resource"} <= set(tools)
    resolution = tools["close_ticket"]["parameters"]["properties"]["resolution"]
    assert resolution["enum"] == ["fixed", "duplicate", "wontfix", "invalid"]
    assert tools["get_ticket"]["parameters"]["required"] == ["ticket_id"]

    # results come back as tool messages: the isError text and the resource the model read
    tool_texts = [m["content"] for r in requests for m in r["messages"] if m["role"] == "tool"]
    assert any("already closed" in text for text in tool_texts)
    assert any("on-call engineer: dave" in text for text in tool_texts)
