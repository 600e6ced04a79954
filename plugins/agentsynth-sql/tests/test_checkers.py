"""The sql and no_collateral checkers, and the collateral-damage check on by default."""

from __future__ import annotations

import pytest

from agentsynth_kernel import Trajectory
from agentsynth_sql.checkers import NoCollateral, SqlChecker
from conftest import make_env, x

T = Trajectory("t", "do it")


def check(checker, env):
    return checker.evaluate(env, T)


@pytest.mark.parametrize("query,expect,op,ok", [
    ("SELECT balance FROM accounts WHERE id = 1", 100, "eq", True),
    ("SELECT balance FROM accounts WHERE id = 1", 100.0, "eq", True),
    ("SELECT balance FROM accounts WHERE id = 1", 99, "eq", False),
    ("SELECT balance FROM accounts WHERE id = 99", None, "eq", True),  # no row = NULL
    ("SELECT owner FROM accounts", ["cy", "ann", "bob"], "eq", True),  # order-insensitive
    ("SELECT owner FROM accounts", ["ann", "bob"], "eq", False),
    ("SELECT id, owner FROM accounts WHERE id < 3", [[2, "bob"], [1, "ann"]], "eq", True),
    ("SELECT owner FROM accounts", ["bob"], "contains", True),
    ("SELECT owner FROM accounts", ["dan"], "contains", False),
    ("SELECT owner FROM accounts", "dan", "not_contains", True),
    ("SELECT owner FROM accounts", ["ann"], "not_contains", False),
    ("SELECT sum(balance) FROM accounts", 100, "gt", True),
    ("SELECT sum(balance) FROM accounts", 150, "le", True),
    ("SELECT sum(balance) FROM accounts", 150, "lt", False),
    ("SELECT avg(balance) FROM accounts", 50, "approx", True),
    ("SELECT balance FROM accounts WHERE id = 1", 0, "ne", True),
])
def test_sql_checker_ops(files, query, expect, op, ok):
    env = make_env(files)
    verdict = check(SqlChecker(query, expect, op=op), env)
    assert verdict.passed is ok, verdict.detail
    assert verdict.score == float(ok)


def test_ordered_comparison(files):
    env = make_env(files)
    assert check(SqlChecker("SELECT id FROM accounts ORDER BY id", [1, 2, 3], ordered=True), env).passed
    assert not check(SqlChecker("SELECT id FROM accounts ORDER BY id", [3, 2, 1], ordered=True), env).passed


def test_checker_configuration_errors():
    with pytest.raises(ValueError, match="needs 'expect'"):
        SqlChecker("SELECT 1")
    with pytest.raises(ValueError, match="op: expected one of"):
        SqlChecker("SELECT 1", 1, op="like")
    with pytest.raises(ValueError, match="compares one value"):
        SqlChecker("SELECT 1", [1], op="gt")


def test_bad_checker_query_fails_with_the_reason(files):
    env = make_env(files)
    verdict = check(SqlChecker("SELECT nope FROM accounts", 1), env)
    assert not verdict.passed and "no such column" in verdict.detail
    verdict = check(SqlChecker("SELECT id FROM accounts", 1), env)
    assert not verdict.passed and "expected one value" in verdict.detail


def test_checker_needs_the_sql_environment():
    with pytest.raises(TypeError, match="needs the 'sql' environment"):
        SqlChecker("SELECT 1", 1).evaluate(object(), T)


def test_collateral_is_checked_by_default_and_shows_the_diff(files):
    env = make_env(files, allowed_changes={"accounts": {"update": ["balance"], "where": "id = 1"}})
    x(env, "UPDATE accounts SET balance = 90 WHERE id = 1")
    x(env, "UPDATE accounts SET owner = 'BOB' WHERE id = 2")  # not allowed: other row, other column
    x(env, "DELETE FROM ledger WHERE account_id = 2")  # not allowed: other table
    verdict = check(SqlChecker("SELECT balance FROM accounts WHERE id = 1", 90), env)
    assert not verdict.passed
    assert "unexpected changes outside allowed_changes (2)" in verdict.detail
    assert "update accounts row 2: owner: 'bob' -> 'BOB'" in verdict.detail
    assert "delete ledger row 2: id=2, account_id=2, amount=50" in verdict.detail
    assert {c["op"] for c in verdict.data["unexpected"]} == {"update", "delete"}
    second = check(NoCollateral(), env)  # a second checker of the same episode refers to the first
    assert not second.passed and "listed above" in second.detail


def test_allowed_changes_pass(files):
    env = make_env(files, allowed_changes={"accounts": {"update": ["balance"], "where": "id = 1"},
                                           "ledger": {"insert": True}})
    x(env, "UPDATE accounts SET balance = 90 WHERE id = 1; INSERT INTO ledger (account_id, amount) VALUES (1, -10)")
    assert check(SqlChecker("SELECT balance FROM accounts WHERE id = 1", 90), env).passed
    verdict = check(NoCollateral(), env)
    assert verdict.passed and "2 allowed change(s)" in verdict.detail


@pytest.mark.parametrize("allowed,sql,ok", [
    ({"ledger": "*"}, "DELETE FROM ledger", True),
    ({"ledger": {"insert": True}}, "DELETE FROM ledger", False),
    ({"ledger": {"delete": True, "where": "account_id = 2"}}, "DELETE FROM ledger WHERE account_id = 2", True),
    ({"ledger": {"delete": True, "where": "account_id = 2"}}, "DELETE FROM ledger", False),
    ({"ledger": {"insert": True, "where": "amount > 0"}}, "INSERT INTO ledger (account_id, amount) VALUES (1, 5)", True),
    ({"ledger": {"insert": True, "where": "amount > 0"}}, "INSERT INTO ledger (account_id, amount) VALUES (1, -5)", False),
    ({"accounts": ["owner"]}, "UPDATE accounts SET owner = upper(owner)", True),
    ({"accounts": ["owner"]}, "UPDATE accounts SET balance = 1", False),
    ({"accounts": {"update": "*"}}, "UPDATE accounts SET balance = 1, owner = 'z'", True),
    ({}, "CREATE TABLE extra (a)", False),
    ({"extra": "*"}, "CREATE TABLE extra (a); INSERT INTO extra VALUES (1)", True),
    ({"ledger": "*"}, "DROP TABLE ledger", True),
    ({}, "DROP TABLE ledger", False),
    ({"*": "*"}, "DROP TABLE ledger", True),
    ({}, "UPDATE accounts SET balance = balance WHERE id = 1", True),  # a no-op write is no change
])
def test_allowed_changes_rules(files, allowed, sql, ok):
    env = make_env(files, allowed_changes=allowed)
    obs = x(env, sql)
    assert not obs.error, obs.content
    verdict = check(NoCollateral(), env)
    assert verdict.passed is ok, verdict.detail


def test_collateral_can_be_switched_off(files):
    env = make_env(files, collateral=False)
    x(env, "DELETE FROM ledger; UPDATE accounts SET balance = 1 WHERE id = 2")
    assert check(SqlChecker("SELECT balance FROM accounts WHERE id = 2", 1), env).passed
    env = make_env(files)
    x(env, "DELETE FROM ledger; UPDATE accounts SET balance = 1 WHERE id = 2")
    assert check(SqlChecker("SELECT balance FROM accounts WHERE id = 2", 1, collateral=False), env).passed
    assert not check(SqlChecker("SELECT balance FROM accounts WHERE id = 2", 1), env).passed


def test_unchanged_world(files):
    env = make_env(files)
    verdict = check(NoCollateral(), env)
    assert verdict.passed and "the world is unchanged" in verdict.detail


def test_without_rowid_tables_are_diffed_by_primary_key(files):
    env = make_env(files, schema="CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;",
                   seed="INSERT INTO kv VALUES ('a', '1'), ('b', '2');",
                   allowed_changes={"kv": {"update": ["v"], "where": "k = 'a'"}})
    x(env, "UPDATE kv SET v = 'x'")
    verdict = check(NoCollateral(), env)
    assert not verdict.passed and "update kv row ('b',): v: '2' -> 'x'" in verdict.detail


@pytest.mark.parametrize("allowed,message", [
    ({"ledgr": {"insert": True}}, "allowed_changes.ledgr: no table 'ledgr' in the world (tables: accounts, ledger); "
     "use '*' for a table the task creates"),
    ({"ledger": {"delete": True, "where": "acount_id = 2"}},
     "allowed_changes.ledger.where: 'acount_id = 2': no such column: acount_id"),
])
def test_bad_allowed_changes_fail_at_reset_with_the_path(files, allowed, message):
    with pytest.raises(ValueError) as exc:
        make_env(files, allowed_changes=allowed)
    assert str(exc.value) == message


def test_cascades_and_triggers_are_seen_by_the_collateral_check(files):
    schema = """
    CREATE TABLE parent (id INTEGER PRIMARY KEY);
    CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id) ON DELETE CASCADE);
    CREATE TABLE other (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id));
    """
    seed = "INSERT INTO parent VALUES (1), (2); INSERT INTO child VALUES (10, 1), (11, 2);"
    env = make_env(files, schema=schema, seed=seed, allowed_changes={"parent": {"delete": True}})
    assert not x(env, "DELETE FROM parent WHERE id = 1").error
    verdict = check(NoCollateral(), env)
    assert not verdict.passed and "delete child row 10: id=10, parent_id=1" in verdict.detail
    assert "parent row" not in verdict.detail  # the allowed delete is not listed

    audit = schema + """
    CREATE TABLE log (msg TEXT);
    CREATE TRIGGER t AFTER INSERT ON parent BEGIN INSERT INTO log VALUES ('changed ' || new.id); END;
    """
    env = make_env(files, schema=audit, seed=seed, allowed_changes={"parent": {"insert": True}})
    assert not x(env, "INSERT INTO parent VALUES (3)").error
    verdict = check(NoCollateral(), env)
    assert not verdict.passed and "insert log row 3: msg='changed 3'" in verdict.detail


def test_a_table_written_back_to_its_start_state_is_no_change(files):
    env = make_env(files)
    x(env, "UPDATE accounts SET balance = balance + 5 WHERE id = 1; UPDATE accounts SET balance = balance - 5 WHERE id = 1")
    verdict = check(NoCollateral(), env)
    assert verdict.passed and "the world is unchanged" in verdict.detail
