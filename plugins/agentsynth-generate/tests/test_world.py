"""Grounding in a real world: every call runs in a fresh SQLite world per item, a pack's task is then
replayed in another fresh world and its checkers decide; an agent that only claims success is rejected."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import agentsynth

from agentsynth_generate import generate_records
from agentsynth_kernel.testing import reply, tool_calls
from conftest import base


@pytest.fixture
def notes_pack(tmp_path: Path) -> Path:
    pack = tmp_path / "notes"
    pack.mkdir()
    (pack / "pack.yaml").write_text(textwrap.dedent("""\
        id: notes
        system_prompt: "House rule: every note is one short line."
        environment:
          type: sql
          schema: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);"
          seed: "INSERT INTO notes (body) VALUES ('first');"
          collateral: false
        tasks:
          - id: add-note
            instruction: "Add a note saying 'buy milk'."
            checkers:
              - {type: sql, query: "SELECT COUNT(*) FROM notes WHERE body = 'buy milk'", expect: 1}
        """))
    return pack


def sql_agent(statement: str, tool: str = "sql_execute") -> Any:
    def agent(request: dict[str, Any]) -> Any:
        if any(m["role"] == "tool" for m in request["messages"]):
            return reply("Added the note.")
        return tool_calls((tool, {"sql": statement}), content="I will insert the note.")
    return agent


def test_a_pack_task_runs_for_real_and_its_checkers_decide(model: Any, notes_pack: Path) -> None:
    m, server = model
    m.agent = sql_agent("INSERT INTO notes (body) VALUES ('buy milk')")
    records, report = generate_records(base(server, pack=str(notes_pack)))
    (record,) = records
    assert record["grounding"] == "world" and m.calls.get("simulator", 0) == 0
    world = record["verification"]["world"]
    assert world["status"] == "passed" and world["verdicts"][0]["passed"] is True
    assert record["query"] == "Add a note saying 'buy milk'." and record["id"] == "add-note-0-single_agent"
    assert {t["function"]["name"] for t in record["tools"]} == {"sql_query", "sql_execute"}
    assert report["stages"]["world"] == {"entered": 1, "passed": 1, "rejected": {}, "pass_rate": 1.0}
    # the world's rules reach the agent and the training conversation
    assert record["messages"][0]["content"].endswith("House rule: every note is one short line.")


@pytest.mark.parametrize(("attack", "stage", "reason"), [
    ("claims_done", "format", "no_tool_call"), ("reads_only", "world", "checker_failed"),
    ("wrong_row", "world", "checker_failed"), ("inserts_twice", "world", "checker_failed")])
def test_trajectories_that_do_not_do_the_task_are_rejected(model: Any, notes_pack: Path, attack: str, stage: str,
                                                           reason: str) -> None:
    m, server = model
    m.agent = {
        "claims_done": lambda r: reply("Done! I added the note 'buy milk'."),
        "reads_only": sql_agent("SELECT * FROM notes", tool="sql_query"),
        "wrong_row": sql_agent("INSERT INTO notes (body) VALUES ('buy milk later')"),
        "inserts_twice": sql_agent("INSERT INTO notes (body) VALUES ('buy milk'); INSERT INTO notes (body) VALUES ('buy milk')"),
    }[attack]
    records, report = generate_records(base(server, pack=str(notes_pack)))
    assert records == []
    assert report["stages"][stage]["rejected"] == {reason: 1}, report["stages"]


def test_a_failing_statement_is_rejected_at_execution_from_the_real_error(model: Any, notes_pack: Path) -> None:
    m, server = model
    m.agent = sql_agent("INSERT INTO nowhere VALUES (1)")
    records, report = generate_records(base(server, pack=str(notes_pack)))
    assert report["stages"]["execution"]["rejected"] == {"tool_error": 1}


def test_free_queries_on_a_world_run_for_real_but_are_not_called_checked(model: Any, notes_pack: Path) -> None:
    m, server = model
    m.agent = sql_agent("SELECT body FROM notes", tool="sql_query")
    records, report = generate_records(base(server, pack=str(notes_pack), query=["List my notes"]))
    (record,) = records
    tool_message = record["messages"][3]
    assert tool_message["role"] == "tool" and "first" in tool_message["content"]  # from the real database
    assert record["verification"]["world"].startswith("no_checkers")
    assert report["stages"]["world"]["entered"] == 0


def test_each_item_gets_a_fresh_world(model: Any, notes_pack: Path) -> None:
    m, server = model
    m.agent = sql_agent("INSERT INTO notes (body) VALUES ('buy milk')")
    records, report = generate_records(base(server, pack=str(notes_pack), n=3))
    assert report["accepted"] == 3  # a shared world would hold 2, then 3 'buy milk' rows and fail the checker


def test_world_from_an_environment_spec(model: Any, tmp_path: Path) -> None:
    m, server = model
    m.agent = sql_agent("SELECT 6 * 7 AS answer", tool="sql_query")
    records, report = generate_records(base(server, world={"type": "sql", "schema": "CREATE TABLE t (x INT);"},
                                            query=["What is six times seven?"]), base_dir=tmp_path)
    assert "42" in records[0]["messages"][3]["content"]


def test_back_translation_on_a_world_executes_the_chain(model: Any, notes_pack: Path, tmp_path: Path) -> None:
    m, server = model
    rejected = tmp_path / "rejected.jsonl"
    proc = agentsynth("generate", "--pack", str(notes_pack), "-m", "back", "-n", "3", "--model", "openai/scripted",
                      "--api-base", server.base_url, "--no-cache", "--rejected", str(rejected), "--json", "-", "--quiet")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # the sampler's SQL names a table this world does not have: the real database says so, and the stage reports it
    assert report["stages"]["execution"]["rejected"] == {"tool_error": 3}
    rows = [json.loads(x) for x in rejected.read_text().splitlines()]
    assert all("no such table: orders" in r["rejected"]["detail"] and r["grounding"] == "world" for r in rows)
    assert m.calls.get("simulator", 0) == 0


def test_unknown_world_type_is_a_clear_error(model: Any, tmp_path: Path) -> None:
    from agentsynth_kernel import SpecError

    m, server = model
    with pytest.raises(SpecError, match=r"world.type: unknown environment 'sqll' \(did you mean 'sql'\?\)"):
        generate_records(base(server, world={"type": "sqll"}, query=["x"]))
    with pytest.raises(SpecError, match="no such pack"):
        generate_records(base(server, pack=str(tmp_path / "missing"), query=["x"]))


class HangingWorld:
    """A world whose tool never returns in time (a stand-in for a hung server or a runaway process)."""

    def __init__(self, seconds: float = 3.0) -> None:
        self.seconds = seconds

    def reset(self, seed: int) -> Any:
        from agentsynth_kernel import Observation

        return Observation("")

    def tools(self) -> list[Any]:
        from agentsynth_kernel import ToolSpec

        return [ToolSpec("wait", "Waits.", {"type": "object", "properties": {}})]

    def step(self, call: Any) -> Any:
        import time

        from agentsynth_kernel import Observation

        time.sleep(self.seconds)
        return Observation("finally")

    def close(self) -> None:
        pass


class HangingPlugin:
    from agentsynth_kernel import hookimpl

    @hookimpl
    def register_environments(self, register: Any) -> None:
        register("hanging_test_world", HangingWorld)


def test_an_item_that_hangs_in_its_world_times_out_and_the_run_goes_on(model: Any) -> None:
    from agentsynth_kernel import get_host

    m, server = model
    host = get_host()
    host.add_plugin(HangingPlugin(), "hanging-world-test")
    try:
        m.agent = lambda r: (reply("done") if any(x["role"] == "tool" for x in r["messages"]) else
                             tool_calls(("wait", {})) if "slow" in r["messages"][1]["content"] else reply("no tool"))
        records, report = generate_records(base(server, world={"type": "hanging_test_world"}, item_timeout=0.5,
                                                query=["be slow", "be quick"]))
    finally:
        host.remove_plugin("hanging-world-test")
    assert report["incomplete"] == 1 and "q0-0-single_agent: timed out after 0.5s" in report["errors"][0]
    assert report["stages"]["format"]["rejected"] == {"no_tool_call": 1}  # the next item still ran


def test_back_translation_on_a_pack_task_is_not_checked_by_that_task(model: Any, tmp_path: Path) -> None:
    m, server = model
    pack = tmp_path / "shop"
    pack.mkdir()
    (pack / "pack.yaml").write_text(textwrap.dedent("""\
        id: shop
        environment:
          type: sql
          schema: "CREATE TABLE orders (id INTEGER PRIMARY KEY, total INT);"
          seed: "INSERT INTO orders (total) VALUES (5), (7);"
          collateral: false
        tasks:
          - id: add-order
            instruction: "Add an order of 9."
            checkers:
              - {type: sql, query: "SELECT COUNT(*) FROM orders WHERE total = 9", expect: 1}
        """))

    def back(request: dict[str, Any]) -> Any:
        chain = json.loads(request["messages"][1]["content"].split("\nThe request should")[0])
        sql = chain[0]["arguments"]["sql"]
        return reply(json.dumps({"query": f"Please run {sql} on the shop database", "answer": "There are 2 orders."}))

    m.back = back
    records, report = generate_records(base(server, pack=str(pack), mode=["back"], n=4))
    # a sampled call that the real database refuses (e.g. bind parameters the SQL has no place for) is rejected
    assert report["accepted"] >= 1 and report["accepted"] + report["stages"]["execution"]["rejected"].get("tool_error", 0) == 4
    for record in records:
        assert record["verification"]["world"].startswith("not_checked (back-translation")
        assert record["grounding"] == "world"
    assert report["stages"]["world"]["entered"] == 0
