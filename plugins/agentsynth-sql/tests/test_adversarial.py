"""What a checker reads: only the world's real end state, under a budget, in bounded memory.

The kernel's adversarial kit plays the generic and SQL exploits against `core` and a small pack
built here; the unit tests pin each guarantee on a real SQLite world.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from agentsynth_kernel import (
    ComponentSpec,
    EpisodeConfig,
    Step,
    ToolCall,
    Trajectory,
    get_host,
    load_pack,
    run_episode,
)
from agentsynth_kernel.testing.adversarial import GENERIC_EXPLOITS, assert_unfarmable, exploits_for
from agentsynth_sql import env as env_module
from agentsynth_sql import world as world_module
from agentsynth_sql.checkers import NoCollateral, SqlAnswer, SqlChecker
from agentsynth_sql.exploits import sql_exploits
from agentsynth_sql.world import memory_used, pristine
from conftest import make_env, q, x

T = Trajectory("t", "do it")


# --- the kit ----------------------------------------------------------------------------------------


def test_the_plugin_ships_sql_exploits_through_the_hook():
    names = [e.name for e in exploits_for(load_pack("core"))]
    sql = [n for n in names if n.startswith("sql.")]
    assert len(sql) >= 15 and len(set(sql)) == len(sql)
    assert {e.name for e in GENERIC_EXPLOITS} <= set(names)
    assert get_host().pm.hook.adversarial_exploits(environment="browser", pack=None) == []  # not ours: None is dropped


def test_core_pack_cannot_be_farmed():
    outcomes = assert_unfarmable(load_pack("core"), concurrency=2)
    tried = {o.exploit for o in outcomes}
    assert {e.name for e in sql_exploits()} <= tried and len(outcomes) == len(tried) * 22


SMALL_PACK = """
id: bank
environment:
  type: sql
  schema: |
    CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, balance INTEGER NOT NULL CHECK (balance >= 0));
    CREATE TABLE tags (owner TEXT, tag TEXT, PRIMARY KEY (owner, tag)) WITHOUT ROWID;
  seed: |
    INSERT INTO accounts VALUES (1, 'ann', 100), (2, 'bob', 50), (3, 'cy', 7);
    INSERT INTO tags VALUES ('ann', 'vip'), ('bob', 'new');
tasks:
  - id: move-money
    instruction: Move 30 from ann's account to bob's.
    environment:
      allowed_changes: {accounts: {update: [balance], where: "id IN (1, 2)"}}
    checkers:
      - {type: sql, query: "SELECT owner, balance FROM accounts WHERE id IN (1, 2)", expect: [[ann, 70], [bob, 80]]}
  - id: tag-cy
    instruction: Tag cy as vip.
    environment:
      allowed_changes: {tags: {insert: true}}
    checkers:
      - {type: sql, query: "SELECT tag FROM tags WHERE owner = 'cy'", expect: [vip]}
  - id: poorest
    instruction: Who has the smallest balance?
    checkers:
      - {type: sql_answer, query: "SELECT owner FROM accounts ORDER BY balance LIMIT 1", distractors: "SELECT owner FROM accounts"}
      - no_collateral
"""

SMALL_ORACLE = """
ORACLE = {
    "move-money": [{"tool": "sql_execute", "arguments": {"sql": "UPDATE accounts SET balance = balance - 30 WHERE id = 1; UPDATE accounts SET balance = balance + 30 WHERE id = 2"}}, {"answer": "Moved 30."}],
    "tag-cy": [{"tool": "sql_execute", "arguments": {"sql": "INSERT INTO tags VALUES ('cy', 'vip')"}}, {"answer": "Tagged."}],
    "poorest": [{"tool": "sql_query", "arguments": {"sql": "SELECT owner FROM accounts ORDER BY balance LIMIT 1"}}, {"answer": "cy"}],
}
"""


def test_a_small_pack_cannot_be_farmed_and_its_oracle_passes(tmp_path: Path):
    (tmp_path / "pack.yaml").write_text(SMALL_PACK)
    (tmp_path / "oracle.py").write_text(textwrap.dedent(SMALL_ORACLE))
    pack = load_pack(str(tmp_path))
    outcomes = assert_unfarmable(pack, concurrency=2)
    assert len({o.task_id for o in outcomes}) == 3
    host = get_host()
    for task in pack.tasks:  # the pack is solvable: the exploits fail for a reason
        config = EpisodeConfig(ComponentSpec("oracle"), timeout=60)
        result = asyncio.run(run_episode(host, pack, task, 0, 0, config))
        assert result.status == "passed", (task.id, result.error, [v.detail for v in result.verdicts])


# --- what a checker reads -----------------------------------------------------------------------------


def test_temp_objects_and_session_state_never_reach_the_checker(files):
    env = make_env(files, allowed_changes={"accounts": {"update": ["balance"], "where": "id = 1"}})
    x(env, "CREATE TEMP TABLE accounts AS SELECT * FROM main.accounts")
    x(env, "UPDATE accounts SET balance = 0 WHERE id = 1")  # lands in the temp copy
    assert q(env, "SELECT balance FROM accounts WHERE id = 1").data["rows"] == [[0]]  # the agent sees its shadow
    verdict = SqlChecker("SELECT balance FROM accounts WHERE id = 1", 0).evaluate(env, T)
    assert not verdict.passed and "got 100" in verdict.detail
    end = env.end_state()
    assert end is not env.conn and end.execute("SELECT count(*) FROM sqlite_temp_master").fetchone() == (0,)


def test_a_view_replacing_a_dropped_table_is_not_read(files):
    env = make_env(files, allowed_changes={"ledger": "*"})
    x(env, "DROP TABLE ledger")
    x(env, "CREATE VIEW ledger AS SELECT 1 AS id, 1 AS account_id, 999 AS amount")
    verdict = SqlChecker("SELECT amount FROM ledger WHERE id = 1", 999, collateral=False).evaluate(env, T)
    assert not verdict.passed and "no such table: ledger" in verdict.detail


def test_views_triggers_and_indexes_the_agent_leaves_are_collateral(files):
    env = make_env(files)
    x(env, "CREATE VIEW rich AS SELECT * FROM accounts WHERE balance > 10")
    x(env, "CREATE TRIGGER wipe AFTER INSERT ON ledger BEGIN DELETE FROM ledger; END")
    x(env, "CREATE INDEX by_owner ON accounts(owner)")
    verdict = NoCollateral().evaluate(env, T)
    assert not verdict.passed
    assert {c["op"] for c in verdict.data["unexpected"]} == {"create_view", "create_trigger", "create_index"}
    assert "create trigger wipe" in verdict.detail
    names = {r[0] for r in env.end_state().execute("SELECT name FROM sqlite_master")}
    assert not names & {"rich", "wipe", "by_owner"}  # dropped from what checkers read
    allowed = make_env(files, allowed_changes={"accounts": "*"})
    x(allowed, "CREATE INDEX by_owner ON accounts(owner)")
    assert NoCollateral().evaluate(allowed, T).passed


def test_rows_moved_to_other_rowids_are_seen(files):
    env = make_env(files, allowed_changes={"ledger": ["amount"]})
    x(env, "UPDATE ledger SET id = id + 100")  # the same-looking rows under other keys
    verdict = NoCollateral().evaluate(env, T)
    assert not verdict.passed
    assert [c["op"] for c in verdict.data["unexpected"]].count("insert") == 2
    assert "delete ledger row 1" in verdict.detail


def test_an_unchanged_world_is_read_from_the_start_snapshot_without_a_copy(files):
    env = make_env(files)
    q(env, "SELECT * FROM accounts")
    x(env, "CREATE TEMP VIEW accounts AS SELECT 1 AS id, 'x' AS owner, 0 AS balance")  # temp only: main unchanged
    assert env.end_state() is pristine(env.snapshot)
    assert SqlChecker("SELECT count(*) FROM accounts", 3).evaluate(env, T).passed
    other = make_env(files)
    x(other, "UPDATE accounts SET balance = 1 WHERE id = 3")
    assert other.end_state() is not pristine(other.snapshot)


def test_rows_changed_without_ddl_are_read_on_the_agents_connection_made_read_only(files):
    env = make_env(files, allowed_changes={"accounts": ["balance"]}, max_value_bytes=1000)
    x(env, "UPDATE accounts SET balance = 5 WHERE id = 3")
    end = env.end_state()
    assert end is env.conn and end is not pristine(env.snapshot)  # no copy: the agent ran no DDL
    assert end.execute("PRAGMA query_only").fetchone() == (1,)
    # a checker reads values as a new connection would: the agent's 1,000-byte cap is lifted
    assert len(env.query("SELECT group_concat(printf('%.600c', 'x'), '') FROM accounts")[0][0]) == 1800
    assert NoCollateral().evaluate(env, T).passed


def test_the_agent_goes_on_after_a_check_on_its_connection_under_its_own_rules(files):
    env = make_env(files, allowed_changes={"accounts": ["balance"]}, max_value_bytes=1000)
    x(env, "UPDATE accounts SET balance = 5 WHERE id = 3")
    assert SqlChecker("SELECT balance FROM accounts WHERE id = 3", 5).evaluate(env, T).passed
    assert not x(env, "UPDATE accounts SET balance = 6 WHERE id = 3").error  # writable again
    assert "too big" in q(env, "SELECT randomblob(2000)").content  # its 1,000-byte cap again
    assert SqlChecker("SELECT balance FROM accounts WHERE id = 3", 6).evaluate(env, T).passed  # the next check sees it
    x(env, "CREATE TEMP TABLE accounts AS SELECT 1 AS id, 'x' AS owner, 999 AS balance")
    assert env.end_state() is not env.conn  # now a temp table exists: the checks read a copy
    assert SqlChecker("SELECT balance FROM accounts WHERE id = 3", 6).evaluate(env, T).passed


NO_REUSE = """
from agentsynth_kernel import ToolCall, Trajectory
from agentsynth_sql.checkers import SqlChecker
from agentsynth_sql.env import SqlEnvironment

queries = ["SELECT count(*) FROM notes", "SELECT count(*) FROM pragma_table_info('notes')",
           "SELECT count(*) FROM json_each('[1, 2]')", "SELECT count(*) FROM pragma_table_info('a')"]
for i in range(12):
    env = SqlEnvironment(schema="CREATE TABLE a(id INTEGER PRIMARY KEY, v);", seed="INSERT INTO a VALUES (1, 2);",
                         allowed_changes={"notes": "*", "a": "*"})
    env.start(0)
    agent = [queries[(i + 1) % 4].replace("notes", "a"), "UPDATE a SET v = v + 1",
             "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)" if i % 3 else "SELECT 1"]
    for sql in agent:
        assert not env.run(ToolCall("sql_execute", {"sql": sql})).error, sql
    check = SqlChecker(queries[i % 4] if i % 3 else queries[2], 0, op="ge")
    assert check.evaluate(env, Trajectory("t", "x")).passed, i
    env.shutdown()
print("ok")
"""


def test_no_connection_is_reused_for_another_world():
    """deserialize() into a used connection keeps its prepared statements (run unchecked on the new
    bytes while the schema cookie matches) and session state, and SQLite 3.40 crashes when an
    eponymous virtual table (json_each, pragma_table_info) is used across such deserializes. The world
    never does it: episodes mixing DDL, the agent's and the checkers' virtual-table queries run in
    one process (a crash would kill it, so it runs apart)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", NO_REUSE], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_sqlite_runs_a_kept_statement_on_deserialized_bytes_unchecked():
    """Why no connection is reused (above): the hazard itself, pinned on the SQLite in use."""
    import sqlite3

    def image(sql: str) -> bytes:
        conn = sqlite3.connect(":memory:")
        conn.executescript(sql)
        return conn.serialize()

    kept = sqlite3.connect(":memory:", isolation_level=None)
    kept.deserialize(image("CREATE TABLE x(a); INSERT INTO x VALUES ('from x');"))
    assert kept.execute("SELECT * FROM x").fetchall() == [("from x",)]
    kept.deserialize(image("CREATE TABLE y(b); INSERT INTO y VALUES ('from y');"))  # same schema cookie
    assert kept.execute("SELECT * FROM x").fetchall() == [("from y",)]  # the cached statement: no table x here
    with pytest.raises(sqlite3.OperationalError, match="no such table: x"):
        kept.execute("SELECT * FROM x WHERE 1")  # prepared anew: the schema is y's


def test_checkers_cannot_write_the_end_state(files):
    env = make_env(files, allowed_changes={"*": "*"})
    x(env, "UPDATE accounts SET balance = 1 WHERE id = 3")
    verdict = SqlChecker("DELETE FROM accounts RETURNING id", [1, 2, 3], collateral=False).evaluate(env, T)
    assert not verdict.passed and "readonly" in verdict.detail.replace("read-only", "readonly").replace(" ", "")


# --- budgets ---------------------------------------------------------------------------------------


def test_a_checker_query_over_budget_on_a_world_the_agent_grew_fails_the_episode(files):
    env = make_env(files, query_budget=200_000, allowed_changes={"ledger": "*"})
    for _ in range(4):
        x(env, "INSERT INTO ledger (account_id, amount) WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
               "LIMIT 1000) SELECT 1, n FROM r")
    verdict = SqlChecker("SELECT count(*) FROM ledger a, ledger b WHERE a.amount < b.amount", 1).evaluate(env, T)
    assert not verdict.passed and verdict.data.get("over_budget")
    assert "exceeded its budget of 200,000 SQLite steps" in verdict.detail
    assert "the world has 4,005 rows (it started with 5); the agent's actions grew it" in verdict.detail


def test_an_expensive_checker_on_an_unchanged_world_is_the_checkers_error(files):
    env = make_env(files, query_budget=5_000)
    checker = SqlChecker("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r", 1)
    with pytest.raises(RuntimeError, match="did not grow"):
        checker.evaluate(env, T)


def test_the_checks_deadline_stops_an_endless_checker_query(files):
    env = make_env(files, query_budget=10**15, check_seconds=0.2, allowed_changes={"ledger": "*"})
    x(env, "INSERT INTO ledger (account_id, amount) VALUES (1, 1)")
    endless = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r"
    verdict = SqlChecker(endless, 1).evaluate(env, T)
    assert not verdict.passed and "deadline of 0.2s" in verdict.detail


def test_too_many_changed_rows_stop_the_diff(files):
    env = make_env(files, max_changes=100, allowed_changes={"ledger": {"insert": True, "where": "amount > 0"}})
    x(env, "INSERT INTO ledger (account_id, amount) WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
           "LIMIT 500) SELECT 1, n FROM r")
    verdict = NoCollateral().evaluate(env, T)
    assert not verdict.passed and "has 502 rows, 500 more than at the start (max_changes=100)" in verdict.detail


PACK_WITH_ENDLESS_CHECK = """
id: slow
environment:
  type: sql
  schema: "CREATE TABLE t (n INTEGER);"
  seed: "INSERT INTO t VALUES (1);"
  query_budget: 1000000000000000
  check_seconds: 100000
tasks:
  - id: endless
    instruction: Nothing.
    checkers:
      - {type: sql, query: "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT max(n) FROM r", expect: 1}
"""


def test_the_episode_timeout_bounds_the_checks(tmp_path: Path):
    (tmp_path / "pack.yaml").write_text(PACK_WITH_ENDLESS_CHECK)
    pack = load_pack(str(tmp_path))
    config = EpisodeConfig(ComponentSpec("scripted", {"actions": [{"answer": "ok"}]}), timeout=0.5)
    result = asyncio.run(run_episode(get_host(), pack, pack.tasks[0], 0, 0, config))
    assert result.status == "error" and result.error_kind == "timeout"
    assert "while the checker was running" in result.error


# --- size limits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["file-limit", "max-page-count"])
def test_the_database_and_temp_tables_are_capped(files, how, monkeypatch):
    """The main database is capped by its in-memory file's size limit, or by ``PRAGMA max_page_count``
    where SQLite cannot set that: the same growth is stopped the same way."""
    if how == "max-page-count":
        monkeypatch.setattr(env_module, "cap_size", lambda conn, size: False)
    else:
        assert world_module._row_log_api[2] is not None, "this SQLite's in-memory file takes a size limit"
    env = make_env(files, max_db_bytes=1_000_000)
    x(env, "CREATE TABLE junk (b BLOB)")
    obs = [x(env, "INSERT INTO junk SELECT randomblob(300000)") for _ in range(5)]
    assert obs[0].error is False and obs[-1].error
    assert "database full: the world may hold at most 0.953674 MB (max_db_bytes)" in obs[-1].content
    x(env, "CREATE TEMP TABLE tjunk (b BLOB)")
    temp = [x(env, "INSERT INTO tjunk SELECT randomblob(300000)") for _ in range(5)]
    assert temp[-1].error and "database full" in temp[-1].content


def test_the_caps_hold_when_read_only_calls_came_first(files):
    """sql_query cannot write, so the database's cap is set before the first sql_execute, not at the
    first call: reads first, then the same growth as above is stopped all the same (main and temp)."""
    env = make_env(files, max_db_bytes=1_000_000)
    for sql in ("SELECT count(*) FROM sqlite_master", "SELECT randomblob(900000)", "VACUUM",
                "CREATE TABLE junk (b BLOB)", "CREATE TEMP TABLE tjunk (b BLOB)"):
        q(env, sql)  # read, or refused: none of it grows the world
    assert not env._capped
    x(env, "CREATE TABLE junk (b BLOB); CREATE TEMP TABLE tjunk (b BLOB)")
    for table in ("junk", "tjunk"):
        obs = [x(env, f"INSERT INTO {table} SELECT randomblob(300000)") for _ in range(5)]
        assert obs[-1].error and "database full" in obs[-1].content, table


def test_the_temp_cap_is_set_at_first_use_of_the_temp_schema_in_any_statement(files):
    """The temp database is capped when a statement first creates something there (it is not
    opened for episodes that never use it): as the first statement, inside a script, with params."""
    for first in ("CREATE TEMP TABLE t (b BLOB)", "SELECT 1; CREATE TABLE temp.t (b BLOB)"):
        env = make_env(files, max_db_bytes=1_000_000)
        assert not x(env, first).error
        assert not x(env, "INSERT INTO t VALUES (?)", params=["ok"]).error
        filled = [x(env, "INSERT INTO t SELECT randomblob(300000)") for _ in range(5)]
        assert filled[-1].error and "database full" in filled[-1].content
        assert q(env, "SELECT count(*) FROM temp.t").data["rows"][0][0] >= 2
    env = make_env(files, max_db_bytes=1_000_000)
    assert "read-only" in q(env, "CREATE TEMP TABLE t (x)").content  # sql_query still refuses it
    assert not x(env, "CREATE TEMP VIEW v AS SELECT 1").error


def test_observations_keep_no_big_value_and_stay_under_their_cap(files):
    env = make_env(files, max_observation_bytes=10_000, max_value_bytes=10_000_000)
    obs = q(env, "SELECT randomblob(5000000) AS b, hex(randomblob(3000)) AS h, x'0102' AS small")
    assert obs.data["rows"] == [["<blob: 5,000,000 bytes>", obs.data["rows"][0][1], b"\x01\x02"]]
    assert obs.data["rows"][0][1].endswith("…<6,000 characters>") and len(obs.data["rows"][0][1]) < 2100
    many = q(env, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r LIMIT 40) "
                  "SELECT n, hex(randomblob(900)) FROM r")
    assert many.data["truncated"] is True and 1 <= len(many.data["rows"]) < 40
    assert len(many.content) < 10_000 + 100
    script = q(env, ";".join(["SELECT hex(randomblob(1000))"] * 200))
    assert len(script.content) <= 10_000 + 100


def test_one_value_and_one_statement_are_capped(files):
    env = make_env(files, statement_memory=8_000_000)
    big = q(env, "SELECT randomblob(2000000)")
    assert big.error and "string or blob too big" in big.content  # max_value_bytes: 1 MB by default
    if memory_used is None:
        pytest.skip("this SQLite library does not export sqlite3_memory_used")
    sort = q(env, "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r LIMIT 200) "
                  "SELECT zeroblob(900000) || n AS b FROM r ORDER BY b")
    assert sort.error and "used more than 7.62939 MB (statement_memory)" in sort.content
    assert not q(env, "SELECT count(*) FROM accounts").error  # the world goes on


# --- sql_answer ---------------------------------------------------------------------------------------


def _answer(text: str) -> Trajectory:
    from agentsynth_kernel import Answer

    traj = Trajectory("t", "Who has the smallest balance?")
    traj.steps.append(Step(Answer(text), None))
    return traj


def test_sql_answer_wants_the_value_and_no_other_candidate(files):
    env = make_env(files)
    checker = SqlAnswer("SELECT owner FROM accounts ORDER BY balance LIMIT 1", "SELECT owner FROM accounts")
    assert checker.evaluate(env, _answer("That is Cy.")).passed
    dump = checker.evaluate(env, _answer("ann bob cy"))
    assert not dump.passed and "also names 2 wrong candidate(s): ['ann', 'bob']" in dump.detail
    assert not checker.evaluate(env, _answer("cyan")).passed  # whole words only
    assert "does not name ['cy']" in checker.evaluate(env, _answer("nobody")).detail
    with pytest.raises(ValueError, match="'query' must be"):
        SqlAnswer("")


def test_a_check_after_close_is_refused(files):
    env = make_env(files)
    env.shutdown()
    with pytest.raises(RuntimeError, match="closed"):
        env.query("SELECT 1")
    assert env.run(ToolCall("sql_query", {"sql": "SELECT 1"})).error
