"""multi_agent (tagged hand-offs, one conversation or per role), code_execution in the real Python
sandbox, --vary-modes, and a registered judge as the semantic stage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import agentsynth

from agentsynth_generate import generate_records
from agentsynth_kernel import JudgeResult, get_host, hookimpl
from agentsynth_kernel.testing import reply, tool_calls
from conftest import WEATHER_TOOLS, base


def test_multi_agent_tags_every_message_with_its_agent(model: Any) -> None:
    m, server = model
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"], mode=["multi_agent"]))
    (record,) = records
    assert record["agents"] == ["system", "user", "planner", "executor", "tool", "executor", "reviewer"]
    named = [msg.get("name") for msg in record["messages"] if msg["role"] == "assistant"]
    assert named == ["planner", "executor", "executor", "reviewer"]
    assert record["messages"][2]["content"].startswith("1. Call get_weather")
    assert record["messages"][-1]["content"].startswith("APPROVE")
    assert report["requests_by_purpose"]["planner"] == 1 and report["requests_by_purpose"]["reviewer"] == 1


def test_reviewer_sends_it_back_once_then_approves(model: Any) -> None:
    m, server = model
    m.reviewer = lambda r: (reply("APPROVE: fixed") if "Reviewer feedback" in json.dumps(r) or m.calls["reviewer"] > 1
                            else reply("REVISE: also give the temperature"))
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"], mode=["multi_agent"]))
    (record,) = records
    assert record["agents"].count("reviewer") == 2 and record["metadata"]["review"] == "approved"
    m.calls.clear()
    m.reviewer = lambda r: reply("REVISE: never good enough")
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"], mode=["multi_agent"]))
    assert report["stages"]["format"]["rejected"] == {"not_approved": 1}


def test_per_role_export(model: Any, tmp_path: Path, tools_file: Path) -> None:
    m, server = model
    out = tmp_path / "roles.jsonl"
    proc = agentsynth("generate", "--tools", str(tools_file), "-q", "Weather in Lisbon?", "-m", "multi_agent",
                      "--per-role", "--model", "openai/scripted", "--api-base", server.base_url, "--no-cache",
                      "-o", str(out), "--quiet")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["role"] for r in rows] == ["planner", "executor", "reviewer"]
    planner, executor, reviewer = rows
    assert [x["role"] for x in planner["messages"]] == ["system", "user", "assistant"] and planner["tools"] == []
    assert [x["role"] for x in executor["messages"]] == ["system", "user", "user", "assistant", "tool", "assistant"]
    assert executor["messages"][2]["content"].startswith("[planner] 1.")
    assert reviewer["messages"][-1]["content"].startswith("APPROVE")
    assert any(x["content"].startswith("[executor]") for x in reviewer["messages"] if x["role"] == "user")


def test_code_execution_runs_in_the_python_sandbox(model: Any) -> None:
    m, server = model

    def coder(request: dict[str, Any]) -> Any:
        tool = [x for x in request["messages"] if x["role"] == "tool"]
        if tool:
            return reply(f"The sum is {tool[-1]['content'].split()[0] if tool[-1]['content'] else '?'}.")
        return tool_calls(("python_exec", {"code": "print(sum(range(10**5)))"}), content="I will compute it.")

    m.coder = coder
    records, report = generate_records(base(server, query=["Sum the integers below 100000."], mode=["code_execution"]))
    assert report["accepted"] == 1, report
    (record,) = records
    assert record["grounding"] == "world" and record["mode"] == "code_execution"
    assert "4999950000" in record["messages"][3]["content"]  # computed by the sandbox; the model never wrote it
    assert record["tools"][0]["function"]["name"] == "python_exec"


def test_code_that_fails_is_rejected_from_the_real_traceback(model: Any) -> None:
    m, server = model
    m.coder = lambda r: (reply("done") if any(x["role"] == "tool" for x in r["messages"])
                         else tool_calls(("python_exec", {"code": "1/0"})))
    records, report = generate_records(base(server, query=["Divide."], mode=["code_execution"]))
    assert records == [] and report["stages"]["execution"]["rejected"] == {"tool_error": 1}


def test_code_execution_that_writes_no_code_is_rejected(model: Any) -> None:
    m, server = model
    m.coder = lambda r: reply("The answer is 4999950000.")  # a claim, not a computation
    records, report = generate_records(base(server, query=["Sum."], mode=["code_execution"]))
    assert report["stages"]["format"]["rejected"] == {"no_code": 1}


def test_vary_modes_cycles_through_every_mode(model: Any) -> None:
    m, server = model
    m.coder = lambda r: (reply("ok") if any(x["role"] == "tool" for x in r["messages"])
                         else tool_calls(("python_exec", {"code": "print(2 + 2)"})))
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?", "Hotel in Oslo"],
                                            n=4, vary_modes=True))
    assert report["planned"] == 8
    assert report["metrics"]["modes"] == {"back": 2, "code_execution": 2, "multi_agent": 2, "single_agent": 2}
    assert {r["grounding"] for r in records if r["mode"] == "code_execution"} == {"world"}
    assert {r["grounding"] for r in records if r["mode"] != "code_execution"} == {"simulated"}


class StrictJudge:
    """A judge registered by a throw-away plugin: passes only answers that mention a temperature."""

    def score(self, trajectory: Any, verdicts: Any) -> JudgeResult:
        ok = "C" in (trajectory.final_answer or "")
        return JudgeResult(score=1.0 if ok else 0.2, dimensions={"correctness": 1.0 if ok else 0.0, "efficiency": 0.8},
                           rationale="mentions a temperature" if ok else "no temperature")


class JudgePlugin:
    @hookimpl
    def register_judges(self, register: Any) -> None:
        register("strict_test_judge", StrictJudge)


@pytest.fixture
def strict_judge() -> Any:
    host = get_host()
    host.add_plugin(JudgePlugin(), "strict-judge-test")
    yield
    host.remove_plugin("strict-judge-test")


def test_a_registered_judge_is_the_semantic_stage(model: Any, strict_judge: Any) -> None:
    m, server = model
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"],
                                            judge="strict_test_judge"))
    (record,) = records
    assert record["verification"]["semantic"]["judge"] == "strict_test_judge"
    assert report["metrics"]["judge"] == {"records": 1, "mean_score": 1.0,
                                          "dimensions": {"correctness": 1.0, "efficiency": 0.8}}
    assert m.calls.get("semantic", 0) == 0  # the judge decided, not the rubric prompt
    m.agent = lambda r: reply("no idea") if any(x["role"] == "tool" for x in r["messages"]) else m.default_agent(r)
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"],
                                            judge={"type": "strict_test_judge"}))
    assert report["stages"]["semantic"]["rejected"] == {"judge_failed": 1}
