"""The http checker (a request of its own, JSON path + equals / contains / matches / exists) and
the rest_db checker (the app's SQLite file, read directly)."""

from __future__ import annotations

import re

import pytest

from agentsynth_kernel import ToolCall, Trajectory, get_host
from agentsynth_rest.checkers import contains, same
from agentsynth_rest.jsonpath import JsonPath
from conftest import TICKETS, rest_env

TRAJ = Trajectory("t", "x")


def checker(name, **params):
    return get_host().get("checker", name).factory(**params)


def test_json_paths():
    doc = {"items": [{"id": 1, "tag": "a", "n": {"v": 3}}, {"id": 2, "tag": "b", "n": {"v": 5}}], "total": 2,
           "odd key": True}
    assert JsonPath("$.total").find(doc) == [2]
    assert JsonPath("$.items[1].tag").find(doc) == ["b"]
    assert JsonPath("$.items[-1].id").find(doc) == [2]
    assert JsonPath("$.items[*].id").find(doc) == [1, 2]
    assert JsonPath("$['odd key']").find(doc) == [True]
    assert JsonPath("$.items[?(@.tag == 'b')].id").find(doc) == [2]
    assert JsonPath("$.items[?(@.n.v >= 4)].id").find(doc) == [2]
    assert JsonPath("$.items[?(@.id == true)]").find(doc) == []  # booleans never equal numbers
    assert JsonPath("$.missing.x").find(doc) == [] and JsonPath("$.items[7]").find(doc) == []
    assert JsonPath("$.items[0]").single and not JsonPath("$.items[*]").single
    for bad in ("items", "$.items[", "$.a[?(@.b == nope)]"):
        with pytest.raises(ValueError, match="json_path"):
            JsonPath(bad)


def test_type_aware_comparisons():
    assert same(1, 1.0) and not same(True, 1) and not same("1", 1) and same([1, {"a": 2}], [1.0, {"a": 2}])
    assert not same([1, 2], [2, 1]) and same(0.1 + 0.2, 0.3, tolerance=1e-9)
    assert contains("abc", "b") and contains([1, 2, 3], [3, 1]) and not contains([1, 2], [4])
    assert contains([{"id": 1, "x": 2}], {"id": 1}) and contains({"a": 1, "b": 2}, {"a": 1})
    assert not contains({"a": 1}, {"a": 2}) and not contains(5, 5)


async def test_the_http_checker_reads_the_world_through_its_own_request():
    env = rest_env(app="hostile.py:create_app", openapi="hostile.yaml", max_response_bytes=256)
    await env.reset(4)
    await env.step(ToolCall("increment", {"by": 2}))
    cases = [
        (dict(path="/counter", json_path="$.value", equals=6), True),
        (dict(path="/counter", json_path="$.value", equals=6.0), True),
        (dict(path="/counter", json_path="$.value", equals="6"), False),
        (dict(path="/counter", json_path="$.items[*].tag", equals=["a", "b"]), True),
        (dict(path="/counter", json_path="$.items[?(@.id == 2)].tag", contains="b"), True),
        (dict(path="/counter", json_path="$.items[0].tag", matches="[a-c]"), True),
        (dict(path="/counter", json_path="$.items[0].tag", matches="b"), False),
        (dict(path="/counter", json_path="$.nope", exists=False), True),
        (dict(path="/counter", json_path="$.nope", equals=1), False),
        (dict(path="/counter", status=200), True),
        (dict(path="/teapot", status=418), True),
        (dict(path="/teapot", json_path="$.detail", contains="tea"), False),  # an error status fails by default
        (dict(path="/echo", method="POST", body={"k": 1}, json_path="$.body", equals='{"k": 1}'), True),
        (dict(path="/echo", method="POST", query={"q": "z"}, json_path="$.query", equals="q=z"), True),
        (dict(path="/huge", status=200, json_path="$", exists=True), False),  # 100 MB, cut at 8 MB, so not JSON
    ]
    for params, expected in cases:
        verdict = await checker("http", **params).check(env, TRAJ)
        assert verdict.passed is expected, (params, verdict.detail)
    # the checker reads more than the agent is shown (max_check_bytes, not max_response_bytes)
    assert (await env.step(ToolCall("echo", {"body": {"note": "n" * 400}}))).data.get("json") is None
    assert (await checker("http", method="POST", path="/echo", body={"note": "n" * 400}, json_path="$.body",
                          contains="nnn").check(env, TRAJ)).passed
    # the checker's own client: the agent's may be closed, redirected or gone
    await env.client.aclose()
    assert (await checker("http", path="/counter", json_path="$.value", equals=6).check(env, TRAJ)).passed
    await env.close()


def test_bad_checker_parameters_are_errors():
    with pytest.raises(ValueError, match="give one of equals / contains / matches / exists"):
        checker("http", path="/a", equals=1, contains=1)
    with pytest.raises(ValueError, match="expected a path starting with '/'"):
        checker("http", path="http://elsewhere/", status=200)
    with pytest.raises(ValueError, match="needs 'equals'"):
        checker("rest_db", query="SELECT 1")
    with pytest.raises(ValueError, match="expected a SELECT query"):
        checker("rest_db", query="DELETE FROM tickets", equals=0)


async def test_rest_db_reads_the_apps_database_read_only():
    env = rest_env(base_dir=TICKETS, app="app.py:create_app")
    await env.reset(0)
    await env.step(ToolCall("deleteTicket", {"ticket_id": 13}))
    assert checker("rest_db", db="tickets.db", query="SELECT count(*) FROM tickets", equals=19).check(env, TRAJ).passed
    rows = checker("rest_db", db="tickets.db", query="SELECT id FROM tickets WHERE requester LIKE 'spam%'",
                   equals=[[18], [14]])
    assert rows.check(env, TRAJ).passed
    assert checker("rest_db", db="tickets.db", query="SELECT id FROM tickets WHERE requester LIKE 'spam%' ORDER BY id",
                   equals=[[14], [18]], ordered=True).check(env, TRAJ).passed
    assert not checker("rest_db", db="tickets.db", query="SELECT id FROM tickets WHERE requester LIKE 'spam%'",
                       equals=[[18], [14]], ordered=True).check(env, TRAJ).passed
    verdict = checker("rest_db", db="missing.db", query="SELECT 1", equals=1).check(env, TRAJ)
    assert not verdict.passed and "does not exist" in verdict.detail
    with pytest.raises(ValueError, match="inside the world's directory"):
        checker("rest_db", db="../../etc/passwd", query="SELECT 1", equals=1)
    verdict = checker("rest_db", db="tickets.db", query="WITH x AS (SELECT 1) DELETE FROM tickets", equals=0).check(
        env, TRAJ)  # opened read-only: a failed check, and the table is whole
    assert not verdict.passed and re.search("readonly|read-only|attempt to write", verdict.detail), verdict.detail
    assert checker("rest_db", db="tickets.db", query="SELECT count(*) FROM tickets", equals=19).check(env, TRAJ).passed
    slow = checker("rest_db", db="tickets.db", check_seconds=0.2, equals=0,
                   query="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
    verdict = slow.check(env, TRAJ)
    assert not verdict.passed and "ran past 0.2 s" in verdict.detail
    await env.close()
