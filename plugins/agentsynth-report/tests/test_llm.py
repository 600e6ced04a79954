"""An LLM policy, through the kernel's llm client and a real OpenAI-compatible server on 127.0.0.1
with scripted answers: in the playground (step by step) and in a stored run (tokens in the report)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from agentsynth_kernel.testing import ScriptedLLMServer, reply, tool_calls
from conftest import Page, Server, agentsynth

SCRIPT = [
    ("sql_query", {"sql": "SELECT id FROM customers WHERE name = 'Maya Chen'"}),
    ("sql_execute", {"sql": "UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6"}),
]


def _agent(request: Any) -> Any:
    """A scripted model for core's update-email: one call per turn, then a final answer."""
    done = sum(1 for m in request["messages"] if m.get("role") == "tool")
    if done < len(SCRIPT):
        return tool_calls(SCRIPT[done], usage=(300 + 50 * done, 20), delay=0.3)
    return reply("Updated Maya Chen's email.", usage=(420, 12))


def test_the_playground_drives_an_llm_step_by_step(server: Server, page: Page) -> None:
    with ScriptedLLMServer(handler=_agent) as llm:
        p = page.page
        p.goto(server.url + "/playground")
        p.wait_for_selector("#pg-task option", state="attached")
        p.select_option("#pg-pack", "core")
        p.select_option("#pg-task", "update-email")
        p.select_option("#pg-policy", "llm")
        p.fill("#pg-llm", f"llm,model=hosted_vllm/scripted,api_base={llm.base_url},cache=false")
        p.click("#pg-run")
        counts = []
        deadline = time.monotonic() + 60
        while not p.locator("#pg-verdict .final").count():
            assert time.monotonic() < deadline, p.locator("#pg-status").inner_text()
            counts.append(p.locator("#pg-out li.step").count())
            time.sleep(0.05)
        assert p.locator("#pg-verdict .final").inner_text() == "verdict: passed"
        assert any(0 < c < 3 for c in counts), counts  # steps were on the page before the verdict
        text = p.locator("#pg-out").inner_text()
        assert "UPDATE customers SET email" in text and "Updated Maya Chen's email." in text
        first = llm.requests[0].json
        assert {t["function"]["name"] for t in first["tools"]} == {"sql_query", "sql_execute"}
        assert len(llm.requests) == 3
        page.shot("serve-playground-llm")
        assert page.errors == []


def test_a_stored_llm_run_reports_tokens_and_the_calls(tmp_path: Path, page: Page,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTED_VLLM_API_KEY", "sk-test")
    with ScriptedLLMServer(handler=_agent) as llm:
        policy = f"llm,model=hosted_vllm/scripted,api_base={llm.base_url},cache=false"
        done = agentsynth("bench", "--pack", "core", "--policy", policy, "--only", "update-email", "--trials", "2",
                          "--run-dir", str(tmp_path / "llm"), "-q")
        assert done.returncode == 0, done.stderr
    out = tmp_path / "r.html"
    assert agentsynth("report", str(tmp_path / "llm"), "-o", str(out)).returncode == 0
    html = out.read_text()
    assert "sk-test" not in html  # the key is never written
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', html, re.S).group(1))
    run = data["runs"][0]
    assert run["policy_label"] == "llm:hosted_vllm/scripted"
    assert run["pass1"]["rate"] == 1.0
    assert run["usage"]["prompt_tokens"] == 2 * (300 + 350 + 420) and run["usage"]["requests"] == 6
    p = page.page
    p.goto(out.as_uri())
    p.wait_for_selector("body[data-ready]")
    assert "2,244" in p.locator("#summary").inner_text()  # tokens: 2 x (1070 prompt + 52 completion)
    p.locator("#tasks button.cell").first.click()
    p.wait_for_selector("#viewer.open .episode li.step")
    assert "UPDATE customers SET email" in p.locator("#viewer").inner_text()
    assert page.errors == []
