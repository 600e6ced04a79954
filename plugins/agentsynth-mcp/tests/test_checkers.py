"""mcp_call / mcp_file / mcp_sql on a real server's end state, plus the JSON path they use."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest

from agentsynth_kernel import ToolCall, Trajectory
from agentsynth_mcp import McpEnvironment, McpSpec, jsonpath
from agentsynth_mcp.checkers import Expectation, McpCall, McpFile, McpSql

TRAJ = Trajectory("t", "do it")


@pytest.fixture
async def env(tmp_path, toy):
    world = tmp_path / "world"
    world.mkdir()
    conn = sqlite3.connect(world / "app.db")
    conn.executescript("CREATE TABLE t (id INTEGER, name TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b');")
    conn.commit()
    conn.close()
    (world / "data.json").write_text(json.dumps({"items": [{"id": 1}, {"id": 2}], "ok": True}))
    env = McpEnvironment(McpSpec(command=sys.executable, args=[str(toy)], world="world"), base_dir=tmp_path)
    await env.reset(seed=0)
    yield env
    await env.close()


async def test_mcp_call_checks_tool_results_and_resources(env):
    await env.step(ToolCall("bump", {}))
    await env.step(ToolCall("write_note", {"name": "out.txt", "text": "line one\nline two\n"}))

    async def verdict(**params):
        return await McpCall(**params).check(env, TRAJ)

    v = await verdict(tool="add", arguments={"a": 2, "b": 3}, equals=5)
    assert v.passed and v.checker == "mcp_call" and v.score == 1.0
    assert not (await verdict(tool="add", arguments={"a": 2, "b": 3}, equals=6)).passed
    assert (await verdict(tool="add", arguments={"a": 2, "b": 3}, equals="5")).passed  # "5" == 5 from YAML
    assert (await verdict(tool="item", arguments={"name": "n"}, path="$.tags[1]", equals="y")).passed
    assert (await verdict(tool="item", arguments={"name": "n"}, path="tags", length=2)).passed
    assert (await verdict(tool="item", arguments={"name": "n"}, path="$.tags", contains="x")).passed
    missing = await verdict(tool="item", arguments={"name": "n"}, path="$.colour", equals="red")
    assert not missing.passed and "no key 'colour'" in missing.detail
    assert (await verdict(tool="item", arguments={"name": "n"}, path="$.colour", exists=False)).passed
    assert (await verdict(tool="echo", arguments={"text": "Hello World"}, regex="^hello", ignore_case=True)).passed
    assert not (await verdict(tool="echo", arguments={"text": "Hello World"}, regex="^hello")).passed
    # a tool error fails the check, unless an error is what is expected
    failed = await verdict(tool="fail", arguments={"reason": "r"})
    assert not failed.passed and "refused: r" in failed.detail
    assert (await verdict(tool="fail", is_error=True, contains="refused")).passed
    assert not (await verdict(tool="echo", arguments={"text": "x"}, is_error=True)).passed
    # no comparison: the call only has to succeed
    assert (await verdict(tool="read_note", arguments={"name": "out.txt"})).passed
    # resources, read on a fresh server over the world: the agent's in-memory state is not the world's
    assert (await verdict(resource="toy://counter", equals=0)).passed
    assert (await verdict(resource="toy://data", path="$.items[*].name", equals=["a", "b"])).passed
    unknown = await verdict(resource="toy://nope", equals=1)
    assert not unknown.passed and "failed" in unknown.detail


async def test_mcp_file_and_mcp_sql_read_the_world_copy(env):
    await env.step(ToolCall("write_note", {"name": "report.csv", "text": "id,name\n1,a\n2,b\n"}))
    assert (await McpFile("report.csv", lines=3, contains=["1,a", "2,b"]).check(env, TRAJ)).passed
    assert (await McpFile("report.csv", regex=r"^id,name").check(env, TRAJ)).passed
    assert (await McpFile("report.csv", equals="id,name\n1,a\n2,b").check(env, TRAJ)).passed
    wrong = (await McpFile("report.csv", lines=2).check(env, TRAJ))
    assert not wrong.passed and "3 non-empty lines, expected 2" in wrong.detail
    assert not (await McpFile("absent.csv").check(env, TRAJ)).passed
    assert (await McpFile("absent.csv", exists=False).check(env, TRAJ)).passed
    assert not (await McpFile("report.csv", exists=False).check(env, TRAJ)).passed
    assert (await McpFile("data.json", json_path="$.items[1].id", equals=2).check(env, TRAJ)).passed
    assert (await McpFile("data.json", json_path="$.ok", equals=True).check(env, TRAJ)).passed
    assert not (await McpFile("report.csv", json_path="$.x", equals=1).check(env, TRAJ)).passed

    assert (await McpSql("app.db", "SELECT count(*) FROM t", equals=2).check(env, TRAJ)).passed
    assert (await McpSql("app.db", "SELECT id FROM t", equals=[2, 1]).check(env, TRAJ)).passed  # unordered by default
    assert not (await McpSql("app.db", "SELECT id FROM t", equals=[2, 1], ordered=True).check(env, TRAJ)).passed
    assert (await McpSql("app.db", "SELECT id, name FROM t", equals=[[1, "a"], [2, "b"]]).check(env, TRAJ)).passed
    assert (await McpSql("app.db", "SELECT * FROM t WHERE id > 1", rows=1).check(env, TRAJ)).passed
    bad = (await McpSql("app.db", "SELECT nope FROM t", equals=1).check(env, TRAJ))
    assert not bad.passed and "no such column" in bad.detail
    # read-only: a checker cannot change the world
    ro = (await McpSql("app.db", "DELETE FROM t", rows=0).check(env, TRAJ))
    assert not ro.passed and "readonly" in ro.detail.replace("-", "")
    assert not (await McpSql("missing.db", "SELECT 1", equals=1).check(env, TRAJ)).passed


async def test_checkers_on_a_non_mcp_environment_fail_with_a_reason():
    class Other:
        pass

    v = await McpCall(tool="x").check(Other(), TRAJ)
    assert not v.passed and "not an MCP environment" in v.detail
    assert "no world directory" in (await McpFile("f").check(Other(), TRAJ)).detail
    assert "no world directory" in (await McpSql("d.db", "SELECT 1", equals=1).check(Other(), TRAJ)).detail


def test_checker_arguments_are_validated():
    with pytest.raises(ValueError, match="exactly one of 'tool' or 'resource'"):
        McpCall()
    with pytest.raises(ValueError, match="exactly one"):
        McpCall(tool="a", resource="r")
    with pytest.raises(ValueError, match="invalid JSON path"):
        McpCall(tool="a", path="$..[")
    with pytest.raises(ValueError, match="'equals' or 'rows'"):
        McpSql("d.db", "SELECT 1")


def test_jsonpath():
    doc = {"a": {"b": [{"c": 1}, {"c": 2}]}, "key with space": 3, "0": "zero"}
    assert jsonpath.get(doc, "$.a.b[1].c") == 2
    assert jsonpath.get(doc, "a.b.0.c") == 1
    assert jsonpath.get(doc, "$.a.b[-1].c") == 2
    assert jsonpath.get(doc, "$.a.b[*].c") == [1, 2]
    assert jsonpath.get(doc, "$['key with space']") == 3
    assert jsonpath.get(doc, "$") == doc
    with pytest.raises(jsonpath.PathError, match=r"\$.a.b has no index 5"):
        jsonpath.get(doc, "$.a.b[5]")
    with pytest.raises(jsonpath.PathError, match="is not an object"):
        jsonpath.get(doc, "$.a.b[0].c.d")
    with pytest.raises(ValueError):
        jsonpath.parse("$.a..b[")


def test_expectation_semantics():
    assert Expectation(equals=[1, 2]).compare([1, 2])[0]
    assert not Expectation(equals=True).compare(1)[0]  # true is not 1
    assert Expectation(equals=1.0).compare(1)[0]
    assert Expectation(contains=[2]).compare([1, 2])[0]  # membership for non-string needles
    assert Expectation(contains="B", ignore_case=True).compare("abc")[0]
    ok, why = Expectation(length=3).compare([1])
    assert not ok and "length is 1, expected 3" in why
