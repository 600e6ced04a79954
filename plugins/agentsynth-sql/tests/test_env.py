"""The sql environment: tools, rendering, isolation, snapshots, and the sandbox."""

from __future__ import annotations

import sqlite3
import time

import pytest

from agentsynth_kernel import ToolCall
from agentsynth_sql import world
from agentsynth_sql.env import SqlEnvironment, SqlEnvSpec
from conftest import make_env, q, x


def test_reset_shows_tables_and_tools_have_json_schemas(files):
    env = make_env(files)
    first = env.start(0)
    assert "accounts(id INTEGER PK, owner TEXT, balance INTEGER) -- 3 rows" in first.content
    assert first.data == {"tables": ["accounts", "ledger"]}
    tools = {t.name: t for t in env.tool_specs()}
    assert set(tools) == {"sql_query", "sql_execute"}
    assert tools["sql_query"].parameters["required"] == ["sql"]
    assert (tools["sql_query"].read_only, tools["sql_execute"].read_only) == (True, False)
    env.shutdown()


def test_query_renders_rows_and_keeps_structured_data(files):
    env = make_env(files)
    obs = q(env, "SELECT id, owner FROM accounts WHERE balance > ? ORDER BY id", params=[10])
    assert not obs.error
    assert obs.content.splitlines() == ["id | owner", "1 | ann", "2 | bob", "(2 rows)"]
    assert obs.data == {"columns": ["id", "owner"], "rows": [[1, "ann"], [2, "bob"]], "truncated": False}


def test_row_limit_truncates_and_says_so(files):
    env = make_env(files, row_limit=2)
    obs = q(env, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT i FROM n")
    assert obs.data["truncated"] is True and obs.data["rows"] == [[1], [2]]
    assert "first 2 rows shown" in obs.content


def test_execute_several_statements_and_rowcounts(files):
    env = make_env(files)
    obs = x(env, "UPDATE accounts SET balance = balance - 10 WHERE id = 1; "
                 "INSERT INTO ledger (account_id, amount) VALUES (1, -10); SELECT 'a;b' AS s")
    assert not obs.error, obs.content
    assert obs.content.split("\n\n")[:2] == ["ok: 1 row(s) affected", "ok: 1 row(s) affected"]
    assert "a;b" in obs.content  # the ';' inside a string literal does not split the script
    assert env.query("SELECT balance FROM accounts WHERE id = 1") == [(90,)]


def test_bad_sql_is_an_error_observation_not_an_exception(files):
    env = make_env(files)
    for call in (
        ToolCall("sql_query", {"sql": "SELEC nonsense"}),
        ToolCall("sql_query", {"sql": "SELECT * FROM nope"}),
        ToolCall("sql_execute", {"sql": "UPDATE accounts SET balance = -5 WHERE id = 1"}),  # CHECK constraint
        ToolCall("sql_execute", {"sql": "INSERT INTO ledger (account_id, amount) VALUES (99, 1)"}),  # foreign key
        ToolCall("sql_query", {"sql": ""}),
        ToolCall("sql_query", {}),
        ToolCall("sql_query", {"sql": "SELECT ?", "params": "x"}),
        ToolCall("sql_query", {"sql": "SELECT 1; SELECT ?", "params": [1]}),
        ToolCall("sql_query", {"sql": "SELECT ?", "params": [[1, 2]]}),
    ):
        obs = env.run(call)
        assert obs.error, call
        assert obs.content.startswith("error:")
    assert env.query("SELECT balance FROM accounts WHERE id = 1") == [(100,)]


def test_partial_script_failure_reports_what_was_applied(files):
    env = make_env(files)
    obs = x(env, "UPDATE accounts SET owner = 'ANN' WHERE id = 1; UPDATE nope SET a = 1")
    assert obs.error and "statement 2 of 2" in obs.content and "statements 1-1 were applied" in obs.content


def test_episodes_are_isolated_copies_of_one_snapshot(files):
    a, b = make_env(files), make_env(files)
    x(a, "DELETE FROM ledger")
    assert b.query("SELECT count(*) FROM ledger") == [(2,)]
    a.start(1)  # a reset is a fresh copy again
    assert a.query("SELECT count(*) FROM ledger") == [(2,)]
    assert a.snapshot is b.snapshot


def test_seed_script_runs_once_per_config(files, monkeypatch):
    make_env(files)
    (files / "seed.sql").unlink()  # a rebuild would fail now: the cached snapshot must be reused
    assert make_env(files).query("SELECT count(*) FROM accounts") == [(3,)]
    env = SqlEnvironment(SqlEnvSpec(schema="schema.sql", seed=None), base_dir=files)  # another config
    env.start(0)
    assert env.query("SELECT count(*) FROM accounts") == [(0,)]
    assert len(world._cache) == 2  # each distinct config was built once
    monkeypatch.setattr(world, "RECHECK_S", 0.0)  # files are looked at again after a while ...
    again = SqlEnvironment(SqlEnvSpec(schema="schema.sql", seed="seed.sql"), base_dir=files)
    with pytest.raises(FileNotFoundError):  # ... so a deleted or edited seed file is noticed
        again.start(0)


def test_an_edited_seed_file_gives_a_new_snapshot(files, monkeypatch):
    monkeypatch.setattr(world, "RECHECK_S", 0.0)
    assert make_env(files).query("SELECT count(*) FROM accounts") == [(3,)]
    (files / "seed.sql").write_text("INSERT INTO accounts VALUES (1, 'solo', 1);")
    assert make_env(files).query("SELECT count(*) FROM accounts") == [(1,)]


def test_seed_from_a_real_sqlite_file(files):
    env = SqlEnvironment(SqlEnvSpec(seed="world.db"), base_dir=files)
    env.start(0)
    assert env.query("SELECT owner FROM accounts ORDER BY id") == [("ann",), ("bob",), ("cy",)]
    x(env, "DELETE FROM ledger")
    check = sqlite3.connect(files / "world.db")  # the file on disk is never touched
    assert check.execute("SELECT count(*) FROM ledger").fetchone() == (2,)
    check.close()


def test_open_transaction_is_rolled_back_at_the_end(files):
    env = make_env(files)
    assert not x(env, "BEGIN").error
    x(env, "DELETE FROM ledger")
    assert env.changes() == []  # never committed
    assert "rolled back" in env.notes[0]


def test_reset_reuse_and_close(files):
    env = make_env(files)
    env.shutdown()
    obs = q(env, "SELECT 1")
    assert obs.error and "not running" in obs.content


def test_spec_errors_are_clear():
    from agentsynth_kernel import SpecError, structure

    with pytest.raises(SpecError, match="give 'schema'"):
        structure({}, SqlEnvSpec, source="p.yaml", prefix="environment")
    with pytest.raises(SpecError, match=r"environment.row_limit: expected an integer"):
        structure({"schema": "x", "row_limit": "many"}, SqlEnvSpec, source="p.yaml", prefix="environment")
    with pytest.raises(SpecError, match=r"allowed_changes.orders.update: expected a list"):
        structure({"schema": "x", "allowed_changes": {"orders": {"update": 3}}}, SqlEnvSpec, source="p",
                  prefix="environment")
    with pytest.raises(SpecError, match=r"environment.allowed_change: unknown key \(did you mean 'allowed_changes'"):
        structure({"schema": "x", "allowed_change": {}}, SqlEnvSpec, source="p", prefix="environment")


def test_missing_seed_file_is_named(files):
    env = SqlEnvironment(SqlEnvSpec(schema="schema.sql", seed="missing.sql"), base_dir=files)
    with pytest.raises(FileNotFoundError, match="seed: file not found: .*missing.sql"):
        env.start(0)


# --- the sandbox ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sql", [
    "ATTACH DATABASE '{tmp}/other.db' AS other",
    "DETACH DATABASE main",
    "VACUUM INTO '{tmp}/copy.db'",
    "SELECT load_extension('/tmp/evil.so')",
    "PRAGMA writable_schema = ON",
    "PRAGMA journal_mode = OFF",
    "PRAGMA foreign_keys = OFF",
    "PRAGMA temp_store_directory = '/tmp'",
    "PRAGMA mmap_size = 1000000",
])
def test_authorizer_denies_escapes(files, sql):
    env = make_env(files)
    obs = x(env, sql.format(tmp=files))
    assert obs.error and obs.content.startswith("error: denied:"), obs.content
    assert not (files / "other.db").exists() and not (files / "copy.db").exists()
    assert env.conn.execute("PRAGMA foreign_keys").fetchall() == [(1,)]  # the agent's session is unchanged


def test_authorizer_allows_introspection(files):
    env = make_env(files)
    assert "owner" in q(env, "PRAGMA table_info(accounts)").content
    assert not q(env, "PRAGMA foreign_keys").error
    assert not q(env, "SELECT name FROM sqlite_master").error
    assert not q(env, "PRAGMA foreign_key_list(ledger)").error


@pytest.mark.parametrize("sql", [
    "DELETE FROM ledger", "UPDATE accounts SET balance = 0", "INSERT INTO ledger VALUES (9, 1, 1)",
    "CREATE TABLE t (a)", "DROP TABLE ledger", "BEGIN", "ALTER TABLE accounts ADD COLUMN x",
    "CREATE TEMP TABLE t AS SELECT 1",
])
def test_sql_query_is_read_only(files, sql):
    env = make_env(files)
    obs = q(env, sql)
    assert obs.error and "read-only" in obs.content
    assert env.changes() == []
    assert not x(env, sql).error  # the same statement is fine through sql_execute


def test_read_only_mode_survives_the_statement_cache(files):
    env = make_env(files)
    assert not x(env, "UPDATE accounts SET balance = balance + 1 WHERE id = 3").error
    obs = q(env, "UPDATE accounts SET balance = balance + 1 WHERE id = 3")  # same text, now through sql_query
    assert obs.error and "read-only" in obs.content
    assert env.query("SELECT balance FROM accounts WHERE id = 3") == [(1,)]


def test_runaway_query_is_interrupted_and_the_world_keeps_working(files):
    env = make_env(files, query_budget=200_000)
    started = time.perf_counter()
    obs = q(env, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n")
    assert time.perf_counter() - started < 5
    assert obs.error and obs.content.startswith("error: interrupted:") and "200,000" in obs.content
    obs = x(env, "INSERT INTO ledger (account_id, amount) "
                 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT 1, i FROM n")
    assert obs.error and "interrupted" in obs.content
    assert env.query("SELECT count(*) FROM ledger") == [(2,)]  # the interrupted insert left nothing behind
    assert q(env, "SELECT count(*) FROM accounts").data["rows"] == [[3]]


@pytest.mark.parametrize("sql,why", [
    ("SELECT length(randomblob(100000000))", "too big"),
    ("SELECT length(zeroblob(50000000))", "too big"),
    ("SELECT length(hex(randomblob(9000000)))", "too big"),
    ("SELECT " + " + ".join(["1"] * 400_000), "too"),
])
def test_memory_bombs_are_refused(files, sql, why):
    env = make_env(files)
    obs = q(env, sql)
    assert obs.error and why in obs.content.lower(), obs.content[:200]
    assert not q(env, "SELECT 1").error


def test_split_statements_handles_triggers_comments_and_strings():
    sql = """-- a comment; with a semicolon
    CREATE TRIGGER t AFTER INSERT ON a BEGIN UPDATE b SET x = 1; UPDATE c SET y = 'p;q'; END;
    SELECT 'x;y';
    /* only a comment */
    """
    parts = world.split_statements(sql)
    assert len(parts) == 2
    assert parts[0].rstrip().endswith("END") and parts[1] == "SELECT 'x;y'"


async def test_protocol_methods_are_async_and_need_no_worker_thread(files):
    import inspect
    import threading

    env = SqlEnvironment(SqlEnvSpec(schema="schema.sql", seed="seed.sql"), base_dir=files)
    for name in ("reset", "tools", "step", "close"):
        assert inspect.iscoroutinefunction(getattr(env, name)), name
    first = await env.reset(3)
    assert "accounts" in first.content and len(await env.tools()) == 2
    obs = await env.step(ToolCall("sql_query", {"sql": "SELECT count(*) FROM ledger"}))
    assert obs.data["rows"] == [[2]]
    # a sync checker of another plugin may read the world from a worker thread
    seen = []
    worker = threading.Thread(target=lambda: seen.append(env.query("SELECT count(*) FROM accounts")))
    worker.start()
    worker.join()
    assert seen == [[(3,)]]
    await env.close()
    assert env.conn is None
