"""Attacks on the "live" end state: checkers reading the agent's own connection.

When the agent changed rows but ran no DDL and no ANALYZE and holds no open transaction, the checks
read its connection (``query_only``, its value cap lifted) instead of a copy. The premise: then the
main database *is* the world, nothing of the agent's can stand in for a world table, and no session
state of the agent's changes what a query returns. Each test plays what an RL policy could try against
that premise (and, where cheap, against the copy path) and passes when the world is safe: the checks
read the true end state (what ``serialize()`` into a fresh connection reads) or the attempt is denied.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from typing import Any

import pytest

from agentsynth_kernel import (
    ComponentSpec,
    EpisodeConfig,
    ToolCall,
    Trajectory,
    get_host,
    load_pack,
    run_episode,
)
from agentsynth_sql.checkers import NoCollateral, SqlChecker
from agentsynth_sql.env import SqlEnvironment, SqlEnvSpec
from agentsynth_sql.world import (
    SCHEMA_OPS,
    catalog,
    diff_states,
    list_tables,
    table_columns,
    table_state,
)

T = Trajectory("t", "do it")

SCHEMA = """
CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL UNIQUE, balance INTEGER NOT NULL CHECK (balance >= 0));
CREATE TABLE ledger (id INTEGER PRIMARY KEY, account_id INTEGER REFERENCES "ACCOUNTS"(id) ON DELETE CASCADE ON UPDATE CASCADE,
                     amount INTEGER NOT NULL);
CREATE TABLE notes (id INTEGER PRIMARY KEY, owner TEXT REFERENCES Accounts(owner) ON UPDATE SET NULL ON DELETE SET NULL,
                    body TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, account_id INTEGER, total INTEGER);
CREATE TABLE tags (owner TEXT, tag TEXT, PRIMARY KEY (owner, tag)) WITHOUT ROWID;
CREATE VIEW rich AS SELECT owner FROM accounts WHERE balance > 60;
"""
SEED = """
INSERT INTO accounts VALUES (1, 'ann', 100), (2, 'bob', 50), (3, 'cy', 0), (4, 'Dee', 70);
INSERT INTO ledger (account_id, amount) VALUES (1, 100), (2, 50), (4, 70);
INSERT INTO notes (owner, body) VALUES ('ann', 'hi'), ('bob', 'yo');
INSERT INTO orders (account_id, total) VALUES (1, 10), (2, 20);
INSERT INTO tags VALUES ('ann', 'vip'), ('bob', 'new');
"""

# What every check below is compared on: plain reads whose result a session setting could change
# (LIKE's case, the order of an unordered scan, the rows a trigger or a temp object would shadow).
PROBES = (
    "SELECT * FROM accounts ORDER BY id",
    "SELECT id FROM accounts",  # no ORDER BY: reverse_unordered_selects would flip it
    "SELECT owner FROM accounts WHERE owner LIKE 'd%'",  # case_sensitive_like would drop 'Dee'
    "SELECT count(*), sum(amount) FROM ledger",
    "SELECT * FROM notes ORDER BY id",
    "SELECT * FROM orders ORDER BY id",
    "SELECT * FROM tags",
    "SELECT * FROM rich ORDER BY owner",
    "SELECT name, seq FROM sqlite_sequence ORDER BY name",
)


def make(**params: Any) -> SqlEnvironment:
    params.setdefault("allowed_changes", {"*": "*"})
    env = SqlEnvironment(SqlEnvSpec(schema=SCHEMA, seed=SEED, **params))
    env.start(0)
    return env


def x(env: SqlEnvironment, sql: str, **kw: Any):
    return env.run(ToolCall("sql_execute", {"sql": sql, **kw}))


def q(env: SqlEnvironment, sql: str, **kw: Any):
    return env.run(ToolCall("sql_query", {"sql": sql, **kw}))


def fresh(env: SqlEnvironment) -> sqlite3.Connection:
    """The truth: the main database's bytes in a new connection (no session, no temp schema)."""
    assert env.conn is not None
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.deserialize(env.conn.serialize(name="main"))
    return conn


def true_changes(env: SqlEnvironment, conn: sqlite3.Connection) -> set[str]:
    snap = env.snapshot
    assert snap is not None
    tables = list_tables(conn)
    end = table_state(conn, tables)
    cols = {t: table_columns(conn, t) for t in tables}
    return {c.describe() for c in diff_states(snap.state, end, snap.columns, cols)}


def reads_truth(env: SqlEnvironment, *, live: bool | None = None) -> sqlite3.Connection:
    """Run the checks (probes and the diff) and assert they read what a fresh connection reads; on the
    live path, also the premise itself: no object of the agent's, read-only, no open transaction."""
    end = env.end_state()
    assert env.snapshot is not None and env.conn is not None
    if live is not None:
        assert (end is env.conn) is live, "expected the checks to read the " + ("live connection" if live else "copy")
    if end is env.conn:
        assert catalog(env.conn) == env.snapshot.catalog
        assert env.conn.execute("SELECT count(*) FROM temp.sqlite_master").fetchone() == (0,)
        assert env.conn.execute("PRAGMA query_only").fetchone() == (1,)
        assert not env.conn.in_transaction
    truth = fresh(env)
    for sql in PROBES:
        try:
            truth.execute(sql).fetchall()
        except sqlite3.OperationalError:  # a table the agent dropped, text it stored that is not UTF-8
            with pytest.raises(sqlite3.OperationalError):
                env.query(sql)  # a checker reading it fails (its verdict: failed)
            continue
        if end is env.conn:  # the same schema and statistics: the same plans, rows in the same order
            assert env.query(sql) == truth.execute(sql).fetchall(), sql
        elif sql.startswith("SELECT * FROM rich") and not end.execute("SELECT 1 FROM sqlite_master "
                                                                      "WHERE name = 'rich'").fetchall():
            continue  # the agent replaced the view: the copy drops it
        else:  # the copy has dropped the agent's indexes: an unordered scan may run in another order
            assert sorted(env.query(sql)) == sorted(truth.execute(sql).fetchall()), sql
    got = {c.describe() for c in env.changes() if c.op not in SCHEMA_OPS}
    truth.text_factory = lambda b: b.decode("utf-8", "replace")
    assert got == true_changes(env, truth)
    truth.text_factory = str
    return truth


def agent_rules_back(env: SqlEnvironment) -> None:
    """After a check the agent's connection is its own again: writable, under its own value cap."""
    assert env.conn is not None
    assert env.conn.execute("PRAGMA query_only").fetchone() == (0,)
    assert env.conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == env.spec.max_value_bytes


# --- what the agent cannot see after a check on its connection ----------------------------------------


SECRET = "SELECT balance FROM accounts WHERE owner = 'cy' AND balance > 4 /* the checker's secret */"


@pytest.mark.parametrize("ddl_first", [False, True], ids=["live", "copy"])
@pytest.mark.parametrize("peek", [
    "SELECT sql FROM sqlite_stmt",
    "SELECT count(*) FROM sqlite_stmt WHERE sql LIKE '%secret%'",
    "SELECT count(*) FROM main.SQLITE_STMT",
    "SELECT group_concat(sql) FROM (SELECT * FROM sqlite_stmt)",
    "SELECT (SELECT count(*) FROM sqlite_stmt)",
    "WITH s AS MATERIALIZED (SELECT 1 FROM sqlite_stmt) SELECT count(*) FROM s",
    "CREATE TEMP VIEW peek AS SELECT 1 AS one FROM sqlite_stmt; SELECT count(*) FROM peek",
])
def test_the_checkers_sql_is_not_shown_to_the_agent_after_a_check(ddl_first, peek):
    """sqlite_stmt (compiled in: ENABLE_STMTVTAB) lists every statement prepared on a connection,
    and Python's statement cache keeps the checkers' on the agent's connection after a live check:
    in an RL loop with a reward per step the agent would read the checkers' queries."""
    env = make()
    if ddl_first:
        x(env, "CREATE TEMP TABLE scratch (a)")
    x(env, "UPDATE accounts SET balance = 5 WHERE id = 3")
    assert SqlChecker(SECRET, 5).evaluate(env, T).passed
    assert NoCollateral().evaluate(env, T).passed
    for tool in (x, q):
        seen = tool(env, peek)
        assert "secret" not in seen.content and "accounts" not in seen.content
        assert seen.error and ("sqlite_stmt" in seen.content or tool is q and "read-only" in seen.content), seen.content


# --- session state the agent might change --------------------------------------------------------------


@pytest.mark.parametrize("attack", [
    "PRAGMA case_sensitive_like = 1", "PRAGMA reverse_unordered_selects = 1", "PRAGMA query_only = 0",
    "PRAGMA foreign_keys = 0", "PRAGMA recursive_triggers = 1", "PRAGMA defer_foreign_keys = 1",
    "PRAGMA writable_schema = 1", "PRAGMA legacy_alter_table = 1", "PRAGMA cell_size_check = 1",
    "PRAGMA temp_store = FILE", "PRAGMA cache_size = 1", "PRAGMA automatic_index = 0", "PRAGMA trusted_schema = 1",
    "PRAGMA main.user_version = 7", "PRAGMA schema_version = 99", "PRAGMA analysis_limit = 1", "PRAGMA optimize",
    "PRAGMA soft_heap_limit = 1", "PRAGMA hard_heap_limit = 1", "PRAGMA threads = 4", "PRAGMA count_changes = 1",
    "PRAGMA short_column_names = 0", "PRAGMA full_column_names = 1", "PRAGMA encoding = 'UTF-16'",
    "PRAGMA ignore_check_constraints = 1", "PRAGMA journal_mode = OFF", "PRAGMA locking_mode = EXCLUSIVE",
    "SELECT * FROM pragma_case_sensitive_like(1)", "SELECT * FROM pragma_reverse_unordered_selects(1)",
    "SELECT * FROM pragma_query_only(0)", "SELECT * FROM pragma_foreign_keys(0)",
    "SELECT * FROM pragma_recursive_triggers(1)", "SELECT * FROM pragma_optimize", "SELECT * FROM pragma_optimize(2)",
    "SELECT * FROM pragma_analysis_limit(1)", "SELECT * FROM pragma_cache_size(1)", "SELECT * FROM pragma_user_version(7)",
    "SELECT * FROM pragma_writable_schema(1)", "SELECT * FROM pragma_automatic_index(0)",
    "ATTACH ':memory:' AS other", "VACUUM", "VACUUM INTO '/tmp/agentsynth-live-vacuum.db'",
    "SELECT load_extension('x')", "SELECT fts3_tokenizer('simple')",
])
def test_no_session_state_changes_what_a_live_check_reads(attack):
    env = make()
    x(env, "UPDATE accounts SET balance = 6 WHERE id = 3")
    for tool in (x, q):
        tool(env, attack)
        tool(env, f"UPDATE accounts SET balance = balance + 1 WHERE id = 3; {attack}")
    live = not env.sandbox.schema_touched and not env.sandbox.analyzed
    reads_truth(env, live=live)
    assert env.query("SELECT 'abc' LIKE 'ABC'") == [(1,)]  # case_sensitive_like is off
    assert env.query("PRAGMA reverse_unordered_selects") == [(0,)]
    assert env.query("PRAGMA recursive_triggers") == [(0,)]
    assert env.query("PRAGMA query_only") == [(1,)]


# --- objects the agent might create without the authorizer noticing ------------------------------------


@pytest.mark.parametrize("ddl", [
    "CREATE TEMP TABLE accounts AS SELECT id, owner, 999 AS balance FROM main.accounts",
    "CREATE TABLE temp.accounts (id INTEGER PRIMARY KEY, owner TEXT, balance INTEGER)",
    "CREATE TEMP VIEW accounts AS SELECT 1 AS id, 'x' AS owner, 999 AS balance",
    "CREATE TEMP VIEW ledger AS SELECT 1 AS id, 1 AS account_id, 0 AS amount",
    "CREATE TEMP TRIGGER t AFTER UPDATE ON main.accounts BEGIN UPDATE accounts SET balance = 999; END",
    "CREATE TEMP TABLE notes AS SELECT * FROM main.notes WHERE 0",
    "CREATE VIRTUAL TABLE temp.ledger USING fts5(amount)",
    "CREATE VIRTUAL TABLE docs USING fts5(body)",
    "CREATE TABLE sneaky AS SELECT * FROM accounts",
    "CREATE TABLE IF NOT EXISTS accounts (id INTEGER PRIMARY KEY)",  # a no-op: still counts as DDL
    "CREATE TABLE accounts (id)",  # fails after the authorizer allowed it
    "CREATE TABLE big AS SELECT randomblob(5000000) AS b",  # fails when it runs
    "CREATE INDEX IF NOT EXISTS by_balance ON accounts(balance)",
    "DROP VIEW rich; CREATE VIEW rich AS SELECT owner FROM accounts",
    "ALTER TABLE notes RENAME TO notes_old; ALTER TABLE notes_old RENAME TO notes",
    "ALTER TABLE accounts RENAME COLUMN balance TO balance",
    "ALTER TABLE notes ADD COLUMN extra TEXT",
    "ALTER TABLE notes RENAME COLUMN body TO text",
    "REINDEX", "ANALYZE", "ANALYZE accounts",
    "UPDATE accounts SET balance = 1 WHERE id = 1; CREATE TEMP TABLE later (a)",  # temp first used mid-script
    "SAVEPOINT s; CREATE TEMP TABLE t1 (a); ROLLBACK TO s; RELEASE s",  # created, then undone
])
def test_any_ddl_sends_the_checks_to_a_copy_that_reads_the_truth(ddl):
    env = make(max_value_bytes=1_000_000)
    x(env, "UPDATE accounts SET balance = 7 WHERE id = 3")
    x(env, ddl)
    x(env, "UPDATE accounts SET balance = 8 WHERE id = 3")
    reads_truth(env, live=False)


@pytest.mark.parametrize("attack", [
    "INSERT INTO sqlite_master VALUES ('table', 'x', 'x', 0, 'CREATE TABLE x (a)')",
    "INSERT INTO sqlite_temp_master VALUES ('view', 'accounts', 'accounts', 0, 'CREATE VIEW accounts AS SELECT 1')",
    "INSERT INTO temp.sqlite_master VALUES ('view', 'accounts', 'accounts', 0, 'CREATE VIEW accounts AS SELECT 1')",
    "UPDATE sqlite_master SET sql = replace(sql, 'balance > 60', 'balance > 0') WHERE name = 'rich'",
    "DELETE FROM sqlite_master WHERE name = 'rich'",
    "INSERT INTO temp.accounts VALUES (9, 'z', 1)",
    "DROP INDEX IF EXISTS nothing_here",  # nothing to drop: nothing happens (the authorizer is not asked)
    "DROP TABLE IF EXISTS temp.accounts; DROP VIEW IF EXISTS temp.accounts",
    "INSERT INTO sqlite_dbpage VALUES (1, zeroblob(4096))",
    "INSERT INTO dbstat VALUES ('accounts')",
    "SELECT * FROM json_each('[1]'); SELECT * FROM pragma_table_info('accounts')",
])
def test_no_object_appears_without_ddl(attack):
    env = make()
    x(env, "UPDATE accounts SET balance = 9 WHERE id = 3")
    x(env, attack)
    q(env, attack)
    q(env, "CREATE TEMP TABLE accounts AS SELECT 1 AS id")  # sql_query: denied, nothing is created
    reads_truth(env, live=True)


@pytest.mark.parametrize("write", [
    "UPDATE sqlite_sequence SET seq = 1000 WHERE name = 'orders'",
    "DELETE FROM sqlite_sequence",
    "INSERT INTO sqlite_sequence VALUES ('accounts', 5)",
    "INSERT OR REPLACE INTO main.SQLITE_SEQUENCE (rowid, name, seq) SELECT rowid, name, 0 FROM sqlite_sequence",
    "WITH s AS (SELECT 1) UPDATE sqlite_sequence SET seq = 0",
])
def test_sqlite_sequence_is_not_the_agents_to_write(write):
    """An AUTOINCREMENT counter is world state the diff never reads (sqlite_% tables are not the
    world's tables): an agent resetting it would make the next rows reuse ids, unseen. SQLite keeps
    it itself, without asking the authorizer; an explicit write is denied."""
    env = make()
    x(env, "INSERT INTO orders (account_id, total) VALUES (3, 30)")  # SQLite's own update of the counter
    obs = x(env, write)
    assert obs.error and "sqlite_sequence" in obs.content, obs.content
    assert fresh(env).execute("SELECT name, seq FROM sqlite_sequence").fetchall() == [("orders", 3)]
    reads_truth(env, live=True)
    x(env, "INSERT INTO orders (account_id, total) VALUES (3, 40)")
    assert env.query("SELECT max(id) FROM orders") == [(4,)]


@pytest.mark.parametrize("script", [
    "CREATE TABLE t9 (a); UPDATE sqlite_sequence SET seq = 0",  # DDL in the statement before
    "CREATE TEMP TRIGGER z AFTER UPDATE ON main.accounts BEGIN UPDATE sqlite_sequence SET seq = 0; END; "
    "UPDATE accounts SET balance = 1 WHERE id = 3",  # a trigger's body, fired later
])
def test_sqlite_sequence_is_not_written_alongside_ddl(script):
    env = make()
    obs = x(env, script)
    assert obs.error and "sqlite_sequence" in obs.content, obs.content
    assert fresh(env).execute("SELECT seq FROM sqlite_sequence").fetchall() == [(2,)]
    reads_truth(env, live=False)


def test_ddl_still_keeps_sqlite_sequence_itself():
    env = make()
    for ddl in ("ALTER TABLE orders RENAME TO purchases", "DROP TABLE purchases",
                "CREATE TABLE temp.t (id INTEGER PRIMARY KEY AUTOINCREMENT); INSERT INTO t DEFAULT VALUES; DROP TABLE t"):
        obs = x(env, ddl)
        assert not obs.error, (ddl, obs.content)
    assert fresh(env).execute("SELECT count(*) FROM sqlite_sequence").fetchone() == (0,)
    reads_truth(env, live=False)


STATS_SCHEMA = SCHEMA + "CREATE INDEX by_balance ON accounts(balance);"
UNORDERED = "SELECT id FROM accounts WHERE balance >= 0 AND owner >= ''"  # two indexes to choose from


def test_statistics_written_by_hand_send_the_checks_to_a_copy():
    """In a world shipped with sqlite_stat1 the statistics are rows the agent can write. The live
    connection keeps the statistics it loaded, so its plans (and the order of unordered rows) are no
    longer what the world's bytes make: the checks read a copy, as after an ANALYZE."""
    env = SqlEnvironment(SqlEnvSpec(schema=STATS_SCHEMA, seed=SEED + "ANALYZE;", allowed_changes={"*": "*"}))
    env.start(0)
    x(env, "UPDATE accounts SET balance = 1 WHERE id = 3")
    assert not x(env, "UPDATE sqlite_stat1 SET stat = '1000000 1000000' WHERE idx = 'by_balance'").error
    assert env.conn is not None
    truth = fresh(env)
    assert env.conn.execute(UNORDERED).fetchall() != truth.execute(UNORDERED).fetchall()  # the stale plan
    assert env.end_state() is not env.conn
    assert env.query(UNORDERED) == truth.execute(UNORDERED).fetchall()
    reads_truth(env, live=False)
    assert not x(env, "ANALYZE accounts").error  # an ANALYZE rewrites them itself: not denied


@pytest.mark.parametrize("write", ["DELETE FROM sqlite_stat1", "INSERT INTO main.SQLITE_STAT1 VALUES ('tags', NULL, '9')",
                                   "REPLACE INTO Sqlite_Stat1 SELECT * FROM sqlite_stat1"])
def test_any_write_of_the_statistics_counts_as_an_analyze(write):
    env = SqlEnvironment(SqlEnvSpec(schema=STATS_SCHEMA, seed=SEED + "ANALYZE;", allowed_changes={"*": "*"}))
    env.start(0)
    x(env, "UPDATE accounts SET balance = 2 WHERE id = 3")
    assert not x(env, write).error
    assert env.sandbox.analyzed
    reads_truth(env, live=False)


# --- text the agent stores that is not UTF-8 ----------------------------------------------------------


@pytest.mark.parametrize("ddl_first", [False, True], ids=["live", "copy"])
@pytest.mark.parametrize("plant", [
    "UPDATE notes SET body = CAST(x'ff00fe' AS TEXT) WHERE id = 1",
    "UPDATE notes SET body = upper(randomblob(64)) WHERE id = 2",
    "INSERT INTO tags VALUES (CAST(x'c3' AS TEXT), 'x')",  # a WITHOUT ROWID table's key
    "UPDATE accounts SET owner = CAST(x'80' AS TEXT) WHERE id = 3",
])
def test_text_that_is_not_utf8_fails_the_checks_and_never_crashes_them(plant, ddl_first):
    """Python raises on TEXT that is not UTF-8. A crashing collateral check is the checker's error, and
    an errored episode is left out of pass rates and RL rewards: an agent that cannot solve a task would
    plant such text to go unscored. The diff reads it with its bad bytes replaced: a change, not a crash."""
    env = make(allowed_changes={"accounts": {"update": ["balance"]}})
    if ddl_first:
        x(env, "CREATE TEMP TABLE scratch (a)")
    assert not x(env, plant).error
    verdicts = [NoCollateral().evaluate(env, T), SqlChecker("SELECT count(*) FROM accounts", 4).evaluate(env, T)]
    assert [v.passed for v in verdicts] == [False, False]
    assert "\ufffd" in verdicts[0].detail
    reads_truth(env, live=not ddl_first)


def test_text_that_is_not_utf8_is_keyed_alike_by_the_diff_and_the_rules():
    env = make(allowed_changes={"tags": {"insert": True, "where": "tag = 'x'"}})
    assert not x(env, "INSERT INTO tags VALUES (CAST(x'c3' AS TEXT), 'x')").error
    assert NoCollateral().evaluate(env, T).passed
    assert [c.key for c in env.changes()] == [("\ufffd", "x")]


@pytest.mark.parametrize("ddl_first", [False, True], ids=["live", "copy"])
@pytest.mark.parametrize(("where", "plant"), [
    ("CASE WHEN id > 2 THEN json_extract(body, '$.ok') = 1 END", "INSERT INTO notes (body) VALUES ('{not json')"),
    ("abs(id) > 0", "INSERT INTO notes (id, body) VALUES (-9223372036854775808, 'x')"),
    ("length(replace(body, 'x', body)) > 0", "INSERT INTO notes (body) VALUES (printf('%.900000c', 'x'))"),
    ("CASE WHEN owner LIKE '{%' THEN json_extract(owner, '$') IS NULL ELSE tag LIKE 'v%' END",
     "INSERT INTO tags VALUES ('{', 'vip')"),  # a WITHOUT ROWID table
])
def test_rows_that_make_an_allowed_changes_rule_fail_are_not_allowed_and_crash_nothing(where, plant, ddl_first):
    """A rule's ``where`` runs on the end state for inserts. Rows the agent made so that it raises
    (malformed JSON, an integer overflow, a value too big) would crash every collateral check, an
    errored episode left out of pass rates and rewards: the rule allows none of them instead."""
    table = "tags" if "owner" in where else "notes"
    env = make(allowed_changes={table: {"insert": True, "where": where}})
    if ddl_first:
        x(env, "CREATE TEMP TABLE scratch (a)")
    good = "INSERT INTO tags VALUES ('cy', 'vip')" if table == "tags" else "INSERT INTO notes (body) VALUES ('{\"ok\": 1}')"
    assert not x(env, good).error
    assert NoCollateral().evaluate(env, T).passed  # the rule allows a good row
    obs = x(env, plant)
    assert not obs.error, obs.content
    verdicts = [NoCollateral().evaluate(env, T), SqlChecker("SELECT count(*) FROM accounts", 4).evaluate(env, T)]
    assert [v.passed for v in verdicts] == [False, False]
    assert all(c["table"] == table and c["op"] == "insert" for c in verdicts[0].data["unexpected"])
    reads_truth(env, live=not ddl_first)


UTF8_PACK = """
id: bad-text
environment:
  type: sql
  schema: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"
  seed: "INSERT INTO notes VALUES (1, 'hi');"
tasks:
  - id: count
    instruction: How many notes are there?
    checkers:
      - {type: sql, query: "SELECT count(*) FROM notes", expect: 2}
"""


def test_an_episode_whose_agent_plants_bad_text_is_failed_not_unscored(tmp_path):
    (tmp_path / "pack.yaml").write_text(UTF8_PACK)
    pack = load_pack(str(tmp_path))
    plant = {"tool": "sql_execute", "arguments": {"sql": "UPDATE notes SET body = CAST(x'ff' AS TEXT)"}}
    config = EpisodeConfig(ComponentSpec("scripted", {"actions": [plant, {"answer": "one"}]}), timeout=60)
    result = asyncio.run(run_episode(get_host(), pack, pack.tasks[0], 0, 0, config))
    assert result.status == "failed", (result.error_kind, result.error)
    assert "update notes row 1" in " ".join(v.detail for v in result.verdicts)


# --- transactions the agent leaves open -----------------------------------------------------------------


@pytest.mark.parametrize("script", [
    "BEGIN; UPDATE accounts SET balance = 0",
    "BEGIN IMMEDIATE; DELETE FROM ledger",
    "BEGIN EXCLUSIVE; INSERT INTO orders (account_id, total) VALUES (1, 1)",
    "SAVEPOINT a; UPDATE accounts SET balance = 0",
    "SAVEPOINT a; SAVEPOINT b; UPDATE accounts SET balance = 0; RELEASE b",
    "BEGIN; SAVEPOINT a; UPDATE accounts SET balance = 0; RELEASE a",
    "SAVEPOINT a; UPDATE accounts SET balance = 0; ROLLBACK TO a; UPDATE accounts SET balance = 1",
    "BEGIN DEFERRED; DELETE FROM accounts WHERE id = 1; UPDATE notes SET body = 'x'",
])
def test_an_open_transaction_never_reaches_a_live_check(script):
    env = make()
    x(env, "UPDATE accounts SET balance = 11 WHERE id = 3")  # committed
    for part in script.split("; "):
        x(env, part)
    assert env.conn is not None and env.conn.in_transaction
    truth = reads_truth(env, live=True)
    assert truth.execute("SELECT balance FROM accounts ORDER BY id").fetchall() == [(100,), (50,), (11,), (70,)]
    assert "rolled back" in " ".join(env.notes)
    assert not x(env, "UPDATE accounts SET balance = 12 WHERE id = 3").error  # the agent goes on, autocommit
    assert not env.conn.in_transaction
    reads_truth(env, live=True)


def test_a_commit_refused_by_a_deferred_foreign_key_leaves_nothing_for_a_live_check():
    schema = SCHEMA + "CREATE TABLE refs (id INTEGER PRIMARY KEY, account_id REFERENCES accounts(id) DEFERRABLE INITIALLY DEFERRED);"
    env = SqlEnvironment(SqlEnvSpec(schema=schema, seed=SEED, allowed_changes={"*": "*"}))
    env.start(0)
    x(env, "UPDATE accounts SET balance = 11 WHERE id = 3")
    x(env, "BEGIN")
    assert not x(env, "INSERT INTO refs VALUES (1, 99)").error  # checked at COMMIT
    refused = x(env, "COMMIT")
    assert refused.error and "FOREIGN KEY" in refused.content
    assert env.conn is not None and env.conn.in_transaction  # still open after the refused COMMIT
    truth = reads_truth(env, live=True)
    assert truth.execute("SELECT count(*) FROM refs").fetchone() == (0,)


def test_a_statement_cut_at_the_row_limit_is_not_left_running():
    env = make(row_limit=2)
    x(env, "UPDATE accounts SET balance = balance + 1 RETURNING id")  # four rows written, two shown
    seen = q(env, "SELECT * FROM ledger")
    assert seen.data["truncated"]
    assert env.conn is not None
    running = env.conn.execute("SELECT count(*) FROM sqlite_stmt WHERE busy AND sql NOT LIKE '%sqlite_stmt%'")
    assert running.fetchone() == (0,)
    reads_truth(env, live=True)
    assert env.query("SELECT sum(balance) FROM accounts") == [(224,)]


# --- checkers cannot write, and the agent's rules come back ---------------------------------------------


@pytest.mark.parametrize("write", [
    "DELETE FROM accounts RETURNING id", "INSERT INTO tags VALUES ('cy', 'x') RETURNING tag",
    "UPDATE orders SET total = 0 RETURNING id", "CREATE TEMP TABLE t AS SELECT 1 AS a",
    "INSERT INTO ledger (account_id, amount) SELECT id, 1 FROM accounts RETURNING id",
])
def test_a_checker_cannot_write_through_the_live_connection(write):
    env = make()
    x(env, "UPDATE accounts SET balance = 13 WHERE id = 3")
    before = fresh(env).serialize()
    assert env.end_state() is env.conn
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        env.query(write)
    assert fresh(env).serialize() == before and not env.conn.in_transaction
    reads_truth(env, live=True)
    assert not x(env, "UPDATE accounts SET balance = 14 WHERE id = 3").error
    agent_rules_back(env)


def test_a_statement_a_checker_prepared_is_authorized_again_for_the_agent():
    """Python keeps the checkers' statements in the agent's connection's cache; the same text sent by
    the agent is prepared again under the sandbox (setting the authorizer expires every statement)."""
    env = make()
    x(env, "UPDATE accounts SET balance = 15 WHERE id = 3")
    write = "DELETE FROM notes WHERE id = 2 RETURNING id"
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        env.query(write)
    denied = q(env, write)
    assert denied.error and "read-only" in denied.content
    assert fresh(env).execute("SELECT count(*) FROM notes").fetchone() == (2,)
    env.sandbox.written.discard("notes")
    assert not x(env, write).error
    assert "notes" in env.sandbox.written  # seen by the authorizer: the diff reads the table
    reads_truth(env, live=True)


def test_checks_and_steps_interleave_under_each_ones_rules():
    """A reward per step: each check reads the truth on a read-only connection with the cap lifted,
    and each step after it runs writable under the agent's own cap."""
    env = make(max_value_bytes=1000)
    for step in range(6):
        assert not x(env, f"UPDATE accounts SET balance = {20 + step} WHERE id = 3").error
        agent_rules_back(env)
        assert "too big" in q(env, "SELECT randomblob(2000)").content
        assert SqlChecker("SELECT balance FROM accounts WHERE id = 3", 20 + step).evaluate(env, T).passed
        assert env.conn is not None and env.conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) > 1000
        assert len(env.query("SELECT group_concat(printf('%.600c', 'x'), '') FROM accounts")[0][0]) == 2400
        reads_truth(env, live=True)
        if step == 3:
            assert not q(env, "SELECT 1").error  # a read-only step between checks
            agent_rules_back(env)
            reads_truth(env, live=True)
    x(env, "CREATE TEMP TABLE accounts AS SELECT id, owner, 999 AS balance FROM main.accounts")
    reads_truth(env, live=False)
    assert env.query("SELECT balance FROM accounts WHERE id = 3") == [(25,)]


# --- the diff sees every table the agent's writes reached -----------------------------------------------


@pytest.mark.parametrize("write", [
    "DELETE FROM accounts WHERE id = 1",  # ON DELETE CASCADE, declared on "ACCOUNTS"
    "UPDATE accounts SET id = 10 WHERE id = 1",  # ON UPDATE CASCADE
    "UPDATE accounts SET owner = 'ANN' WHERE id = 1",  # ON UPDATE SET NULL, declared on Accounts
    "INSERT OR REPLACE INTO accounts VALUES (2, 'bob', 1)",  # REPLACE deletes, cascading
    "UPDATE OR REPLACE accounts SET owner = 'ann' WHERE id = 2",  # deletes ann's row: cascades to ledger
    "INSERT INTO accounts VALUES (2, 'zed', 1) ON CONFLICT(id) DO UPDATE SET owner = 'bobby'",
    "DELETE FROM accounts",
    "REPLACE INTO tags VALUES ('ann', 'vip')",
])
def test_writes_through_foreign_key_actions_and_replace_reach_the_diff(write):
    env = make(allowed_changes={"accounts": "*"})
    assert not x(env, write).error
    reads_truth(env, live=True)
    assert not NoCollateral().evaluate(env, T).passed or write.startswith(("INSERT INTO accounts", "REPLACE"))


def test_writes_a_world_trigger_makes_reach_the_diff():
    schema = SCHEMA + """
    CREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT);
    CREATE TRIGGER log AFTER UPDATE ON accounts BEGIN INSERT INTO audit (what) VALUES ('update ' || new.id); END;
    CREATE TRIGGER instead INSTEAD OF DELETE ON rich BEGIN UPDATE orders SET total = 0; END;
    """
    env = SqlEnvironment(SqlEnvSpec(schema=schema, seed=SEED, allowed_changes={"accounts": "*"}))
    env.start(0)
    x(env, "UPDATE accounts SET balance = 3 WHERE id = 3")
    x(env, "DELETE FROM rich")
    reads_truth(env, live=True)
    unexpected = {(c.table, c.op) for c in env.unexpected_changes()}
    assert unexpected == {("audit", "insert"), ("orders", "update")}


VTAB_SCHEMA = """
CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT);
CREATE VIRTUAL TABLE docs USING fts4(body);
CREATE VIRTUAL TABLE boxes USING rtree(id, x0, x1);
"""
VTAB_SEED = "INSERT INTO accounts VALUES (1, 'ann'); INSERT INTO docs VALUES ('hello'); INSERT INTO boxes VALUES (1, 0, 1);"


@pytest.mark.parametrize("write", [
    "INSERT INTO docs VALUES ('bye')", "DELETE FROM docs", "INSERT INTO boxes VALUES (2, 0, 5)",
    "INSERT INTO docs(docs) VALUES ('optimize')",
])
def test_writes_through_a_worlds_virtual_tables_reach_the_diff(write):
    env = SqlEnvironment(SqlEnvSpec(schema=VTAB_SCHEMA, seed=VTAB_SEED, allowed_changes={"accounts": "*"}))
    env.start(0)
    x(env, "UPDATE accounts SET owner = 'ANN'")
    obs = x(env, write)
    assert env.end_state() is env.conn
    got = {c.describe() for c in env.changes()}
    assert got == true_changes(env, fresh(env))
    assert NoCollateral().evaluate(env, T).passed is (obs.error or got == {"update accounts row 1: owner: 'ann' -> 'ANN'"})


def test_a_shadow_table_written_directly_is_seen_through_it():
    env = SqlEnvironment(SqlEnvSpec(schema=VTAB_SCHEMA, seed=VTAB_SEED, allowed_changes={"docs": "*"}))
    env.start(0)
    assert not x(env, "UPDATE docs_content SET c0body = 'forged'").error
    assert {c.describe() for c in env.changes()} == {"update docs_content row 1: c0body: 'hello' -> 'forged'"}
    verdict = NoCollateral().evaluate(env, T)  # the table the agent wrote is reported (not only the one it feeds)
    assert not verdict.passed and "docs_content" in verdict.detail


@pytest.mark.parametrize("ddl_first", [False, True], ids=["live", "copy"])
@pytest.mark.parametrize("corrupt", ["DELETE FROM boxes_node", "UPDATE boxes_node SET data = x'00'"])
def test_a_virtual_table_the_agent_broke_is_collateral_and_crashes_nothing(corrupt, ddl_first):
    """Writing a virtual table's shadow tables directly can leave it unreadable ("undersize RTree
    blobs"): a diff scanning it (after DDL, or in a world with triggers) crashed, a checker's error and
    the episode unscored. It is reported as a change no rule but '*' allows."""
    env = SqlEnvironment(SqlEnvSpec(schema=VTAB_SCHEMA, seed=VTAB_SEED, allowed_changes={"accounts": "*"}))
    env.start(0)
    if ddl_first:
        x(env, "CREATE TEMP TABLE scratch (a)")
    assert not x(env, corrupt).error
    with pytest.raises(sqlite3.DatabaseError):
        fresh(env).execute("SELECT * FROM boxes").fetchall()
    verdicts = [NoCollateral().evaluate(env, T), SqlChecker("SELECT count(*) FROM boxes", 1).evaluate(env, T)]
    assert [v.passed for v in verdicts] == [False, False]
    ops = {(c.table, c.op) for c in env.unexpected_changes()}
    assert ("boxes_node", "update" if "UPDATE" in corrupt else "delete") in ops
    assert (("boxes", "unreadable_table") in ops) is ddl_first  # only a full diff reads the virtual table itself
    if ddl_first:
        assert "table boxes no longer reads: undersize RTree blobs" in verdicts[0].detail


@pytest.mark.parametrize("read", [
    "SELECT * FROM json_each('[1, 2]')", "SELECT name FROM pragma_table_info('accounts')",
    "SELECT body FROM docs WHERE docs MATCH 'hello'", "SELECT body FROM d5 WHERE d5 MATCH 'hello'",
])
def test_virtual_tables_read_through_sql_query(read):
    """The first use of a virtual table makes SQLite ask the authorizer for an UPDATE of sqlite_master
    (its own): sql_query denied it as a write, and fts5 reads PRAGMA data_version on every use. (An
    rtree table still cannot be read through sql_query: it prepares its INSERT into its shadow table
    when it connects, which the authorizer cannot tell from the agent's.)"""
    env = SqlEnvironment(SqlEnvSpec(schema=VTAB_SCHEMA + "CREATE VIRTUAL TABLE d5 USING fts5(body);",
                                    seed=VTAB_SEED + "INSERT INTO d5 VALUES ('hello');", allowed_changes={"d5": "*"}))
    env.start(0)
    for tool in (q, x):
        obs = tool(env, read)
        assert not obs.error, obs.content
    assert not x(env, "INSERT INTO d5 VALUES ('bye')").error
    assert "may not be modified" in q(env, "UPDATE sqlite_master SET sql = 'x' WHERE name = 'accounts'").content
    assert "may not be modified" in q(env, "DELETE FROM sqlite_master").content
    assert not env.sandbox.schema_touched and "sqlite_master" not in env.sandbox.written
    assert "insert d5 row 2: body='bye'" in {c.describe() for c in env.changes()}


# --- memory and time in a live check ----------------------------------------------------------------------


@pytest.mark.parametrize("ddl_first", [False, True], ids=["live", "copy"])
def test_a_check_over_big_values_stays_in_its_memory(ddl_first):
    """The checks lift the agent's value cap, to the memory a check may use: a value the checks build
    past it fails the checker at once (a value is built in one VM step, between two looks of the budget:
    replace(body, 'x', body) on the agent's 900 KB of 'x' would take 1 GB, the SQLite maximum)."""
    env = make(max_value_bytes=1_000_000, statement_memory=32 * 2**20, max_db_bytes=64 * 2**20)
    if ddl_first:
        x(env, "CREATE TEMP TABLE scratch (a)")
    for _ in range(10):
        obs = x(env, "INSERT INTO notes (owner, body) WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL "
                     "SELECT n + 1 FROM r LIMIT 100) SELECT NULL, printf('%.10000c', 'x') FROM r")
        assert not obs.error, obs.content
    assert not x(env, "INSERT INTO notes (owner, body) VALUES (NULL, printf('%.900000c', 'x'))").error
    end = env.end_state()
    assert (end is env.conn) is not ddl_first
    assert end.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == 32 * 2**20
    assert env.query("SELECT length(group_concat(body, '')) FROM notes") == [(10_900_004,)]  # over the agent's cap
    for sql in ("SELECT max(length(replace(body, 'x', body))) FROM notes",
                "SELECT length(group_concat(body, '')) FROM notes, (SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4)"):
        verdict = SqlChecker(sql, 1, collateral=False).evaluate(env, T)
        assert not verdict.passed and ("too big" in verdict.detail or "memory budget" in verdict.detail), verdict.detail
    x(env, "UPDATE accounts SET balance = 1 WHERE id = 3")
    agent_rules_back(env)
    assert "too big" in q(env, "SELECT randomblob(1000001)").content


# --- a policy that tries everything, with a check after every few steps --------------------------------


MOVES = [
    ("x", "UPDATE accounts SET balance = balance + 1 WHERE id = {n}"),
    ("x", "INSERT INTO orders (account_id, total) VALUES ({n}, {n})"),
    ("x", "DELETE FROM accounts WHERE id = {n}"),
    ("x", "INSERT OR REPLACE INTO accounts VALUES ({n}, 'p{n}', {n})"),
    ("x", "UPDATE accounts SET id = id + 10 WHERE id = {n}"),
    ("x", "INSERT INTO tags VALUES ('p{n}', 't{n}')"),
    ("x", "UPDATE notes SET body = upper(body)"),
    ("x", "BEGIN"), ("x", "COMMIT"), ("x", "ROLLBACK"), ("x", "SAVEPOINT s{n}"), ("x", "RELEASE s{n}"),
    ("x", "ROLLBACK TO s{n}"), ("x", "BEGIN; UPDATE accounts SET balance = 0"),
    ("x", "PRAGMA case_sensitive_like = 1"), ("x", "PRAGMA reverse_unordered_selects = 1"),
    ("x", "PRAGMA query_only = 0"), ("x", "SELECT * FROM pragma_reverse_unordered_selects(1)"),
    ("x", "SELECT sql FROM sqlite_stmt"), ("x", "UPDATE sqlite_sequence SET seq = 0"),
    ("x", "INSERT INTO sqlite_temp_master VALUES ('view', 'accounts', 'accounts', 0, 'CREATE VIEW accounts AS SELECT 1')"),
    ("x", "UPDATE accounts SET balance = -1"), ("x", "INSERT INTO notes (owner, body) VALUES ('nobody', 'fk')"),
    ("x", "INSERT INTO notes (body) SELECT randomblob(5000) FROM accounts"),
    ("x", "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r"),
    ("x", "UPDATE notes SET body = CAST(x'ff' AS TEXT) WHERE id = {n}"), ("x", "INSERT INTO orders DEFAULT VALUES"),
    ("x", "DELETE FROM sqlite_sequence"), ("x", "SELECT (SELECT count(*) FROM sqlite_stmt)"),
    ("x", "UPDATE accounts SET owner = owner || 'x' WHERE id = {n} RETURNING *"),
    ("q", "SELECT * FROM accounts"), ("q", "UPDATE accounts SET balance = 0"), ("q", "BEGIN"),
    ("q", "CREATE TEMP TABLE accounts AS SELECT 1 AS id"), ("q", "SELECT * FROM json_each('[1, 2]')"),
]
DDL_MOVES = [
    ("x", "CREATE TEMP TABLE accounts AS SELECT id, owner, 999 AS balance FROM main.accounts"),
    ("x", "CREATE TEMP TRIGGER t{n} AFTER UPDATE ON main.accounts BEGIN UPDATE orders SET total = 0; END"),
    ("x", "ANALYZE"), ("x", "DROP VIEW rich; CREATE VIEW rich AS SELECT owner FROM accounts"),
]


@pytest.mark.parametrize("seed", range(24))
def test_a_random_policy_never_makes_a_check_read_anything_but_the_truth(seed):
    rng = random.Random(seed)
    env = make(max_value_bytes=10_000, query_budget=200_000)
    for step in range(40):
        tool, sql = rng.choice(DDL_MOVES if rng.random() < 0.03 else MOVES)
        obs = (x if tool == "x" else q)(env, sql.format(n=rng.randint(1, 5)))
        assert "readonly database" not in obs.content, (step, sql, obs.content)
        agent_rules_back(env)
        if rng.random() < 0.3:
            end = env.end_state()
            assert env.conn is not None
            moved = env.conn.total_changes != env._start_marks[0]
            assert (end is env.conn) == (moved and not (env.sandbox.schema_touched or env.sandbox.analyzed))
            reads_truth(env)
    reads_truth(env)
