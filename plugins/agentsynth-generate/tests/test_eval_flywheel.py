"""agentsynth eval (six dimensions) and agentsynth flywheel (failures -> aimed data)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from helpers import agentsynth

from agentsynth_generate import generate_records
from agentsynth_kernel.testing import reply, tool_calls
from conftest import WEATHER_TOOLS, base


def _write(rows: list[dict[str, Any]], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _call(cid: str, name: str, args: Any) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def test_eval_scores_six_dimensions(model: Any, tmp_path: Path) -> None:
    m, server = model
    records, _ = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"]))
    sloppy = {"id": "sloppy", "tools": WEATHER_TOOLS, "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("a", "get_weather", {"city": 3}),
                                                            _call("b", "get_weather", {"city": "Oslo"})]},
        {"role": "tool", "tool_call_id": "a", "content": "error: bad city"},
        {"role": "tool", "tool_call_id": "b", "content": "rain"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c", "get_weather", {"city": "Oslo"})]},
        {"role": "tool", "tool_call_id": "c", "content": "rain"},
        {"role": "assistant", "content": "Rain."}]}
    path = _write([records[0], sloppy], tmp_path / "in.jsonl")
    proc = agentsynth("eval", str(path), "--model", "openai/scripted", "--api-base", server.base_url, "--no-cache",
                      "-o", str(tmp_path / "scored.jsonl"), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    scored = [json.loads(x) for x in (tmp_path / "scored.jsonl").read_text().splitlines()]
    good, bad = (s["eval"]["scores"] for s in scored)
    assert set(good) == {"task_completion", "tool_selection", "argument_validity", "grounding", "efficiency", "communication"}
    assert (good["argument_validity"], good["efficiency"]) == (1.0, 1.0)
    # one schema-invalid call of three; one errored and one repeated of three
    assert (bad["argument_validity"], bad["efficiency"]) == (round(2 / 3, 4), round(1 / 3, 4))
    assert scored[1]["eval"]["weak"] == ["efficiency"] and scored[1]["eval"]["passed"] is False
    assert report["failing_by_dimension"] == {"efficiency": 1} and report["pass_rate"] == 0.5
    assert report["dimensions"]["task_completion"] == 0.9


def test_eval_failures_and_bad_files(model: Any, tmp_path: Path) -> None:
    m, server = model
    m.grader = lambda r: reply("great job!")
    path = _write([{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}],
                  tmp_path / "in.jsonl")
    proc = agentsynth("eval", str(path), "--model", "openai/scripted", "--api-base", server.base_url, "--no-cache",
                      "--json", "-", "--quiet")
    assert proc.returncode == 4 and json.loads(proc.stdout)["failed"] == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n{"nothing": 1}\n')
    proc = agentsynth("eval", str(bad), "--model", "openai/x")
    assert proc.returncode == 2 and f"{bad}: line 2: expected 'messages'" in proc.stderr


def test_flywheel_from_eval_output_aims_at_weak_dimensions(model: Any, tmp_path: Path) -> None:
    m, server = model
    records, _ = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?", "Weather in Porto?"]))
    source = _write(records, tmp_path / "data.jsonl")
    m.grader = lambda r: reply(json.dumps({"task_completion": 1, "tool_selection": 1, "grounding": 1, "communication": 1}))
    # unscored input: flywheel scores it first; here every trajectory passes, so there is nothing to aim at
    proc = agentsynth("flywheel", "--from", str(source), "--model", "openai/scripted", "--api-base", server.base_url,
                      "--no-cache", "-o", str(tmp_path / "new.jsonl"), "--json", "-", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["mined"]["targets"] == 0
    m.grader = lambda r: reply(json.dumps({"task_completion": 0.2, "tool_selection": 1, "grounding": 0.9,
                                           "communication": 0.9}))
    proc = agentsynth("flywheel", "--from", str(source), "--model", "openai/scripted", "--api-base", server.base_url,
                      "--no-cache", "-n", "2", "-o", str(tmp_path / "new.jsonl"), "--json", "-", "--quiet")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["mined"]["by_dimension"] == {"task_completion": 2} and report["mined"]["targets"] == 2
    new = [json.loads(x) for x in (tmp_path / "new.jsonl").read_text().splitlines()]
    assert len(new) == 4 and all(r["metadata"]["aimed_at"] == ["task_completion"] for r in new)
    assert {r["query"] for r in new} == {"Weather in Lisbon?", "Weather in Porto?"}
    assert all(r["grounding"] == "simulated" for r in new)  # the failing records' own catalog


def test_flywheel_from_rejected_records(model: Any, tmp_path: Path, tools_file: Path) -> None:
    m, server = model
    m.agent = lambda r: tool_calls(("nope", {})) if not any(x["role"] == "tool" for x in r["messages"]) else reply("x")
    proc = agentsynth("generate", "--tools", str(tools_file), "-q", "Weather in Lisbon?", "--model", "openai/scripted",
                      "--api-base", server.base_url, "--no-cache", "--rejected", str(tmp_path / "rej.jsonl"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    m.agent = m.default_agent
    proc = agentsynth("flywheel", "--from", str(tmp_path / "rej.jsonl"), "--model", "openai/scripted", "--api-base",
                      server.base_url, "--no-cache", "-n", "1", "-o", str(tmp_path / "fixed.jsonl"), "--json", "-", "--quiet")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["mined"]["by_kind"] == {"format:unknown_tool": 1}
    (row,) = [json.loads(x) for x in (tmp_path / "fixed.jsonl").read_text().splitlines()]
    assert row["metadata"]["aimed_at"] == ["format:unknown_tool"]


def test_flywheel_from_a_bench_run_regenerates_failed_tasks_in_the_world(model: Any, tmp_path: Path) -> None:
    m, server = model
    pack = tmp_path / "notes"
    pack.mkdir()
    (pack / "pack.yaml").write_text(textwrap.dedent("""\
        id: notes
        environment:
          type: sql
          schema: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);"
          collateral: false
        tasks:
          - id: add-note
            instruction: "Add a note saying 'buy milk'."
            checkers:
              - {type: sql, query: "SELECT COUNT(*) FROM notes WHERE body = 'buy milk'", expect: 1}
        """))
    proc = agentsynth("bench", "--pack", str(pack), "--policy", "noop", "--run-dir", str(tmp_path / "run"), "--quiet")
    assert (tmp_path / "run" / "run.sqlite").is_file(), proc.stderr
    m.agent = lambda r: (reply("Added.") if any(x["role"] == "tool" for x in r["messages"]) else
                         tool_calls(("sql_execute", {"sql": "INSERT INTO notes (body) VALUES ('buy milk')"})))
    proc = agentsynth("flywheel", "--run", str(tmp_path / "run"), "--pack", str(pack), "--model", "openai/scripted",
                      "--api-base", server.base_url, "--no-cache", "-n", "2", "-o", str(tmp_path / "new.jsonl"),
                      "--json", "-", "--quiet")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["mined"]["by_kind"] == {"checker:sql": 1}, report
    assert report["generate"]["stages"]["world"]["passed"] == 2
    rows = [json.loads(x) for x in (tmp_path / "new.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["fw-add-note-0-single_agent", "fw-add-note-1-single_agent"]
