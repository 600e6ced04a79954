"""`pack import --from agentsynth-ai`: an agentsynth-ai scenario pack (tests/data/agentsynth_ai, a
reconstruction of that project's format) becomes a pack whose oracle's statements run unchanged
through the compat `sql_query` tool; what cannot be converted is reported; bad input is a
path-qualified error; `pack validate` explains the answer-only task and the weak checks."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from agentsynth_kernel import (
    ComponentSpec,
    RunSpec,
    SpecError,
    ToolCall,
    Trajectory,
    execute,
    get_host,
    load_pack,
    validate_pack,
)
from agentsynth_kernel.cli import cli
from agentsynth_sql.compat import AgentsynthAiSql, SqlCompatEnvironment, SqlCompatSpec
from agentsynth_sql.import_agentsynth_ai import convert, drive_oracle

DATA = Path(__file__).parent / "data" / "agentsynth_ai"
PACK = DATA / "support.yaml"


@pytest.fixture
def imported(tmp_path: Path):
    report = convert(PACK, tmp_path / "support")
    return report, load_pack(tmp_path / "support")


def test_the_pack_converts_and_reports_what_it_could_not(imported):
    report, pack = imported
    assert report.tasks == 6 and [t.id for t in pack.tasks] == [
        "close-ticket", "reassign-bo", "count-open-tickets", "escalate-refund", "best-region", "audit-log-readonly"]
    assert any("webhook-status" in s and "'rest' world" in s for s in report.skipped)
    assert any("http check (GET '/status/webhooks')" in d for d in report.dropped)
    assert [a.split(":")[0] for a in report.answer_only] == ["count-open-tickets"]
    assert pack.metadata["imported_from"]["not_converted"] == report.skipped + report.dropped
    lines = report.lines()
    assert lines[0].endswith("6 task(s)") and any(line.startswith("not converted: [6] (webhook-status)") for line in lines)


def test_fields_map_to_the_same_meaning(imported):
    _, pack = imported
    tasks = {t.id: t for t in pack.tasks}
    assert pack.environment.type == "sql_compat"
    close = tasks["close-ticket"]
    assert close.tier == "easy" and close.max_steps == 6 and close.split == "test"
    assert [c.type for c in close.checkers] == ["agentsynth_ai_sql", "agentsynth_ai_sql", "answer_contains"]
    assert close.checkers[0].params == {"type": "agentsynth_ai_sql", "query": "SELECT status FROM tickets WHERE id=3",
                                        "equals": [["closed"]]} or close.checkers[0].params["equals"] == [["closed"]]
    assert tasks["reassign-bo"].metadata == {"domain": "support"} and tasks["reassign-bo"].max_steps == 8
    refund = tasks["escalate-refund"].checkers[1]
    assert refund.type == "called_tool" and refund.params["tool"] == "sql_query"
    assert refund.params["arguments"]["query"].startswith("INSERT INTO refunds")
    assert tasks["best-region"].checkers[1].params == {"regex": "APAC", "case_sensitive": True}
    assert tasks["count-open-tickets"].checkers[1].params == {"regex": "2|two"}  # any_of: one of them suffices
    assert pack.task_environment(tasks["audit-log-readonly"]).params["read_only"] is True
    # the default world of agentsynth-ai (its sales table) when a scenario names none
    assert "CREATE TABLE sales" in pack.task_environment(tasks["best-region"]).params["schema"]


def test_the_oracle_passes_and_its_statements_run_unchanged(imported):
    _, pack = imported
    run = asyncio.run(execute(RunSpec(policy=ComponentSpec("oracle"), concurrency=2, timeout=30), pack))
    assert {r.task_id: r.status for r in run.results} == {t.id: "passed" for t in pack.tasks}
    close = next(r for r in run.results if r.task_id == "close-ticket")
    call = close.trajectory.tool_calls[0]
    assert call == ToolCall("sql_query", {"query": "UPDATE tickets SET status='closed' WHERE id=3"}, id=call.id)
    assert "1 row(s) affected" in close.trajectory.steps[0].observation.content


def test_validate_explains_the_answer_only_task_and_the_weak_checks(imported):
    _, pack = imported
    _, gates = validate_pack(pack.base_dir, concurrency=2, timeout=30)
    gate = {g.name: g for g in gates}
    assert {n for n, g in gate.items() if g.status == "pass"} >= {"schema", "unique-ids", "oracle", "determinism",
                                                                  "floors"}
    assert gate["world-state-checkers"].problems == [
        "task 'count-open-tickets': no checker reads the world's end state (only called_tool, answer_contains, "
        "which read the trajectory); add one that checks the outcome"]
    farmed = {p.split("'")[1] for p in gate["robustness"].problems}
    # the source pack's weak spots, made visible: an answer-only task, a check that always holds
    # (COUNT(*) = 20 of an untouched table) next to a one-word answer, and a non_empty COUNT(*)
    assert farmed == {"count-open-tickets", "best-region", "audit-log-readonly"}


def test_the_compat_world_is_the_sql_world_behind_one_tool(tmp_path):
    env = SqlCompatEnvironment(SqlCompatSpec(schema="CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)",
                                             seed="INSERT INTO t VALUES (1, 'a');"), base_dir=tmp_path)
    env.start(0)
    assert [t.name for t in env.tool_specs()] == ["sql_query"]
    assert not env.run(ToolCall("sql_query", {"query": "UPDATE t SET v='b' WHERE id=1"})).error
    assert "b" in env.run(ToolCall("sql_query", {"query": "SELECT v FROM t"})).content
    assert env.run(ToolCall("sql_execute", {"sql": "DELETE FROM t"})).error  # not a tool here
    assert env.run(ToolCall("sql_query", {"query": "  "})).error
    outside = tmp_path / "outside.db"
    attach = env.run(ToolCall("sql_query", {"query": f"ATTACH DATABASE '{outside}' AS x"}))
    assert attach.error and not outside.exists()  # the sql world's sandbox still decides
    env.shutdown()
    ro = SqlCompatEnvironment(SqlCompatSpec(schema="CREATE TABLE t (id INTEGER)", read_only=True))
    ro.start(0)
    denied = ro.run(ToolCall("sql_query", {"query": "INSERT INTO t VALUES (1)"}))
    assert denied.error and "read-only" in denied.content
    sneaky = ro.run(ToolCall("sql_query", {"query": "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x"}))
    assert sneaky.error  # starts with WITH, but the world's read-only sandbox refuses the write
    assert ro.query("SELECT count(*) FROM t") == [(0,)]
    ro.shutdown()


def _world(**spec):
    env = SqlCompatEnvironment(SqlCompatSpec(schema="CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)",
                                             seed="INSERT INTO t VALUES (1, 'a'), (2, 'b');", **spec))
    env.start(0)
    return env


def test_agentsynth_ai_sql_check_semantics():
    env = _world(allowed_changes={"t": ["v"]})
    traj = Trajectory("t", "i")
    assert AgentsynthAiSql("SELECT v FROM t ORDER BY id", equals=[["a"], ["b"]]).check(env, traj).passed
    assert not AgentsynthAiSql("SELECT v FROM t ORDER BY id DESC", equals=[["a"], ["b"]]).check(env, traj).passed
    assert AgentsynthAiSql("SELECT v FROM t", contains="'b'").check(env, traj).passed
    assert not AgentsynthAiSql("SELECT v FROM t WHERE id=9", non_empty=True).check(env, traj).passed
    bad = AgentsynthAiSql("SELECT nope FROM t", non_empty=True).check(env, traj)
    assert not bad.passed and "query failed" in bad.detail
    env.run(ToolCall("sql_query", {"query": "CREATE TRIGGER trap AFTER INSERT ON t BEGIN DELETE FROM t; END"}))
    sabotaged = AgentsynthAiSql("SELECT v FROM t ORDER BY id", equals=[["a"], ["b"]]).check(env, traj)
    assert not sabotaged.passed and "create trigger trap" in sabotaged.detail
    env.shutdown()
    with pytest.raises(ValueError, match="needs 'equals'"):
        AgentsynthAiSql("SELECT 1")


def test_the_oracle_driver_speaks_agentsynth_ai(tmp_path):
    pack = load_pack(convert(PACK, tmp_path / "p").pack_dir)
    refund = next(t for t in pack.tasks if t.id == "escalate-refund")
    actions = drive_oracle(DATA / "support_oracle.py", refund)
    assert [a.get("tool") for a in actions] == ["sql_query", "sql_query", None]
    assert actions[-1] == {"answer": "Refunded 19.5 on order 12 (duplicate charge)."}
    broken = tmp_path / "broken_oracle.py"
    broken.write_text("def solve(observation, gym):\n    return 42\n")
    with pytest.raises(ValueError, match="returned int 42 at step 0"):
        drive_oracle(broken, refund)


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        convert(path, tmp_path / "out")
    assert err.value.source == str(path)
    assert not (tmp_path / "out").exists()
    return err.value.messages


def test_malformed_packs_get_path_qualified_errors(tmp_path):
    assert _problems(tmp_path, "id: x\ntask: y\n") == [
        "expected a list of scenarios at the top level (an agentsynth-ai pack), got a mapping"]
    messages = _problems(tmp_path, """
- id: a
  task: t
  checker: []
  environment: {type: sql, schema: CREATE TABLE t (id INTEGER), table: t, rows: [[1], [1, 2]], readonly: true}
  checkers:
    - {kind: sqll, query: SELECT 1}
    - {kind: sql, query: SELECT 1, equals: 3}
    - {kind: called_tool}
    - {kind: answer, any_of: []}
- just text
- id: "bad id"
  task: t
- id: b
  task: t
  environment: {type: sql, schema: CREAT TABLE nope}
  checkers: [{kind: sql, query: SELECT 1, non_empty: true}]
  max_steps: 0
""")
    assert "[0].checker: unknown key (did you mean 'checkers'?); expected one of id, task, environment, checkers, " \
           "max_steps, metadata" in messages
    assert "[0] (a).environment.readonly: unknown key (did you mean 'read_only'?); expected one of type, schema, " \
           "table, rows, read_only" in messages
    assert "[0] (a).environment.rows[1]: 2 values, but rows[0] has 1" in messages
    assert any(m.startswith("[0] (a).checkers[0].kind: expected one of sql, http, called_tool, answer, "
                            "answer_contains, got str 'sqll' (did you mean 'sql'?)") for m in messages)
    assert "[0] (a).checkers[1].equals: expected a list of rows (lists), got int 3" in messages
    assert "[0] (a).checkers[2].name: expected a tool name, got nothing (null)" in messages
    assert "[0] (a).checkers[3].any_of: expected a list of strings, got a list" in messages
    assert "[1]: expected a scenario (a mapping with id, task, ...), got str 'just text'" in messages
    assert "[2].id: expected an id (letters, digits, '_', '-', '.'), got str 'bad id'" in messages
    assert any(m.startswith("[3] (b).environment.schema: does not load in SQLite:") for m in messages)
    assert "[3] (b).max_steps: expected an integer >= 1, got int 0" in messages


def test_other_bad_inputs(tmp_path):
    assert _problems(tmp_path, "- {id: a, task: t}\n- {id: a, task: u}\n")[-1] == "[1] (a).id: duplicate id (also [0])"
    assert _problems(tmp_path, "[]\n") == ["the pack has no scenarios"]
    only_http = _problems(tmp_path, "- {id: a, task: t, checkers: [{kind: http, path: /x, contains: y}]}\n")
    assert only_http[0].startswith("no scenario could be converted: [0] (a): no check left to decide it")
    assert "invalid YAML" in _problems(tmp_path, "- {id: a\n")[0]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(SpecError, match="already exists and is not empty"):
        convert(PACK, tmp_path / "full")


def test_json_packs_and_options(tmp_path):
    scenarios = yaml.safe_load(PACK.read_text())
    as_json = tmp_path / "support.json"
    as_json.write_text(json.dumps(scenarios))
    report = convert(as_json, tmp_path / "j", collateral=False, pack_id="support-json")
    pack = load_pack(tmp_path / "j")
    assert pack.id == "support-json" and report.tasks == 6
    assert pack.oracle is None and any("no oracle" in n for n in report.notes)
    assert all(pack.task_environment(t).params["collateral"] is False for t in pack.tasks)


def test_pack_import_is_a_subcommand_of_the_kernels_pack_group(tmp_path):
    """Through the real hook: the sql plugin's register_commands adds `import` to `pack`."""
    get_host()
    out = tmp_path / "cli-pack"
    result = CliRunner().invoke(cli, ["pack", "import", str(PACK), "--from", "agentsynth-ai", "-o", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "not converted: [6] (webhook-status)" in result.output and "answer-only: count-open-tickets" in result.output
    assert (out / "pack.yaml").is_file() and (out / "agentsynth_ai_oracle.py").is_file()
    bad = CliRunner().invoke(cli, ["pack", "import", str(PACK), "--from", "tau-bench", "-o", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "'tau-bench' is not 'agentsynth-ai'" in bad.output


def test_pack_import_from_the_command_line(tmp_path):
    """The real command line: the kernel's `pack` group loads plugin subcommands on a miss."""
    code = "import sys; from agentsynth_kernel.cli import main; sys.argv[0] = 'agentsynth'; main()"
    run = subprocess.run([sys.executable, "-c", code, "pack", "import", str(PACK), "--from", "agentsynth-ai",
                          "-o", str(tmp_path / "p")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {id: a, task: t, checkers: [{kind: sqll}]}\n")
    run = subprocess.run([sys.executable, "-c", code, "pack", "import", str(bad), "--from", "agentsynth-ai",
                          "-o", str(tmp_path / "q")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"error: {bad}: [0] (a).checkers[0].kind: expected one of" in run.stderr


def test_the_readme_section_runs(tmp_path, monkeypatch):
    """The commands of the README's "Packs from agentsynth-ai" section, in order, in-process."""
    import re
    import shlex

    text = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = text.split("## Packs from agentsynth-ai", 1)[1]
    lines = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1).strip().splitlines()
    assert [shlex.split(line)[1:3] for line in lines] == [["pack", "import"], ["pack", "validate"],
                                                          ["bench", "--pack"]]
    (tmp_path / "tests").symlink_to(Path(__file__).parent)
    monkeypatch.chdir(tmp_path)
    outputs = []
    for line in lines:
        result = CliRunner().invoke(cli, shlex.split(line)[1:], catch_exceptions=False)
        outputs.append(result)
    assert outputs[0].exit_code == 0, outputs[0].output
    # validate fails on purpose: the pack's answer-only task is named, with what to do
    assert outputs[1].exit_code == 1 and "count-open-tickets" in outputs[1].output
    assert "no checker reads the world's end state" in outputs[1].output
    assert outputs[2].exit_code == 0 and "pass@1 100.0%" in outputs[2].output


def test_a_pack_as_agentsynth_ai_saves_it_converts(tmp_path):
    """save_scenarios writes model_dump(): every field, defaults and nulls included."""
    dumped = [{
        "id": "close-ticket", "task": "Close ticket 3.", "max_steps": 8, "metadata": {},
        "environment": {"type": "sql", "schema": "CREATE TABLE tickets (id INTEGER PRIMARY KEY, status TEXT)",
                        "table": "tickets", "rows": [[3, "open"]], "read_only": False},
        "checkers": [
            {"kind": "sql", "query": "SELECT status FROM tickets WHERE id=3", "equals": [["closed"]],
             "contains": None, "non_empty": False},
            {"kind": "called_tool", "name": "sql_query", "args_contain": None, "min_times": 1},
            {"kind": "answer", "any_of": ["closed"], "case_sensitive": False},
        ],
    }]
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(dumped, indent=2))
    oracle = tmp_path / "saved_oracle.py"
    oracle.write_text("def solve(observation, gym):\n"
                      "    if gym.step_count == 0:\n"
                      "        return {'tool_name': 'sql_query', 'arguments': {'query': \"UPDATE tickets SET status='closed' "
                      "WHERE id=3\"}}\n"
                      "    return {'answer': 'Ticket 3 is closed.'}\n")
    report = convert(path, tmp_path / "out")
    assert report.tasks == 1 and not report.skipped and not report.dropped and not report.answer_only
    pack = load_pack(tmp_path / "out")
    assert [c.type for c in pack.tasks[0].checkers] == ["agentsynth_ai_sql", "called_tool", "answer_contains"]
    run = asyncio.run(execute(RunSpec(policy=ComponentSpec("oracle"), timeout=30), pack))
    assert run.results[0].status == "passed", run.results[0].why


def test_the_sql_worlds_exploits_reach_the_compat_world_and_fail(imported):
    """The sql world's attacks (shadow tables, triggers, uncommitted writes, ATTACH, runaway queries),
    spoken through sql_query(query), pass none of the tasks a sql check decides."""
    from agentsynth_kernel.testing.adversarial import assert_unfarmable, exploits_for

    _, pack = imported
    names = [e.name for e in exploits_for(pack)]
    assert sum(n.startswith("sql_compat.") for n in names) >= 15 and not any(n.startswith("sql.") for n in names)
    outcomes = assert_unfarmable(pack, tasks=["close-ticket", "reassign-bo", "escalate-refund"], concurrency=2,
                                 timeout=30)
    trap = [o for o in outcomes if o.exploit == "sql_compat.booby_trap_trigger"]
    assert trap and all("create trigger" in o.detail for o in trap), [o.detail for o in trap]
