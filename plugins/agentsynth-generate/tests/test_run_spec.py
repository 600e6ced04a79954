"""``generate: {type: generate, ...}`` in a run spec (agentsynth run), the generator component, and the budget."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from helpers import agentsynth

from agentsynth_generate import generate_records
from agentsynth_kernel import ComponentSpec, build, get_host
from agentsynth_kernel.testing import reply, tool_calls
from conftest import WEATHER_TOOLS, base


def sql_agent(request: dict[str, Any]) -> Any:
    if any(m["role"] == "tool" for m in request["messages"]):
        return reply("Added.")
    return tool_calls(("sql_execute", {"sql": "INSERT INTO notes (body) VALUES ('buy milk')"}))


def test_agentsynth_run_with_a_generate_section(model: Any, tmp_path: Path) -> None:
    m, server = model
    m.agent = sql_agent
    (tmp_path / "gen.yaml").write_text(textwrap.dedent(f"""\
        name: notes-gen
        environment:
          type: sql
          schema: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);"
          collateral: false
        tasks:
          - id: add-note
            instruction: "Add a note saying 'buy milk'."
            checkers:
              - {{type: sql, query: "SELECT COUNT(*) FROM notes WHERE body = 'buy milk'", expect: 1}}
        policy: {{type: llm, model: openai/scripted, api_base: "{server.base_url}"}}
        seed: 5
        generate:
          type: generate
          n: 2
          cache: false
          out: data/notes.jsonl
        """))
    proc = agentsynth("run", "gen.yaml", "--json", "report.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in (tmp_path / "data" / "notes.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["add-note-0-single_agent", "add-note-1-single_agent"]
    assert all(r["verification"]["world"]["status"] == "passed" and r["model"] == "openai/scripted" for r in rows)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["stages"]["world"]["passed"] == 2
    # without out:, --run-dir holds the records
    spec = (tmp_path / "gen.yaml").read_text().replace("  out: data/notes.jsonl\n", "")
    (tmp_path / "gen2.yaml").write_text(spec)
    proc = agentsynth("run", "gen2.yaml", "--run-dir", "rd", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    again = [json.loads(x) for x in (tmp_path / "rd" / "trajectories.jsonl").read_text().splitlines()]
    assert [(r["id"], r["messages"]) for r in again] == [(r["id"], r["messages"]) for r in rows]
    assert again[0]["provenance"]["pack_hash"] != rows[0]["provenance"]["pack_hash"]  # another spec file


def test_bad_generate_parameters_name_the_spec_and_key(model: Any, tmp_path: Path) -> None:
    m, server = model
    (tmp_path / "gen.yaml").write_text(textwrap.dedent("""\
        environment: {type: sql, schema: "CREATE TABLE t (x INT);"}
        tasks: [{id: t, instruction: x, checkers: [{type: sql, query: "SELECT 1", expect: 1}]}]
        generate: {type: generate, model: openai/x, nn: 3, mode: [solo]}
        """))
    proc = agentsynth("run", "gen.yaml", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "gen.yaml (generate:)" in proc.stderr and "nn" in proc.stderr and "Traceback" not in proc.stderr


async def test_the_generator_component(model: Any) -> None:
    m, server = model
    component = build("generator", ComponentSpec("generate", base(server, tools=WEATHER_TOOLS, query=["Weather?"], n=2)),
                      host=get_host())
    records = [r async for r in component.generate()]
    assert [r["id"] for r in records] == ["q0-0-single_agent", "q0-1-single_agent"]


def test_budget_stop_keeps_what_was_accepted(model: Any, tmp_path: Path, tools_file: Path) -> None:
    m, server = model
    out = tmp_path / "out.jsonl"
    proc = agentsynth("generate", "--tools", str(tools_file), "-q", "Weather in Lisbon?", "-n", "50", "--model",
                      "openai/scripted", "--api-base", server.base_url, "--no-cache", "--budget-tokens", "3000",
                      "-o", str(out), "--json", str(tmp_path / "r.json"), "--quiet")
    assert proc.returncode == 3, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["stopped"].startswith("budget") and 0 < report["accepted"] < 50
    assert len(out.read_text().splitlines()) == report["accepted"]


def test_generate_records_reports_the_stage_counts_for_a_mixed_batch(model: Any) -> None:
    m, server = model
    m.agent = lambda r: (tool_calls(("nope", {})) if "Oslo" in r["messages"][1]["content"] else m.default_agent(r))
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?", "Weather in Oslo?"]))
    assert (report["accepted"], report["rejected"]) == (1, 1)
    assert report["stages"]["format"] == {"entered": 2, "passed": 1, "rejected": {"unknown_tool": 1}, "pass_rate": 0.5}
    assert report["llm_requests_per_accepted"] == report["llm_requests"] / 1
