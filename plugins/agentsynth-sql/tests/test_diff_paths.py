"""The collateral diff's fast paths report exactly what the reference diff reports.

``SqlEnvironment.changes`` pairs the start and end scans of a rowid table row by row when every row
that differs kept its rowid (updates, and rows inserted after the last one), and keys only the rows
not in both scans otherwise. Whatever path a table takes, the list of changes (in order, with every
field) must be what :func:`diff_states` makes from both states read whole: random write scripts over
rowid, AUTOINCREMENT and WITHOUT ROWID tables, with blobs and long text, checked against it.
"""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import pytest

from agentsynth_kernel import ToolCall
from agentsynth_sql import env as env_module
from agentsynth_sql.env import SqlEnvironment, SqlEnvSpec
from agentsynth_sql.world import diff_states, list_tables, table_columns, table_state

SCHEMA = """
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER, price REAL, pic BLOB);
CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, item INTEGER, what TEXT);
CREATE TABLE loose (a TEXT, b INTEGER);
CREATE TABLE tags (item INTEGER, tag TEXT, PRIMARY KEY (item, tag)) WITHOUT ROWID;
CREATE TABLE owners (id INTEGER PRIMARY KEY, name TEXT UNIQUE);
CREATE TABLE pets (id INTEGER PRIMARY KEY, owner INTEGER REFERENCES owners(id) ON DELETE CASCADE ON UPDATE CASCADE,
                   name TEXT, UNIQUE (owner, name) ON CONFLICT REPLACE);
CREATE TABLE spare (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER, price REAL, pic BLOB);
"""
SEED = "\n".join(
    [f"INSERT INTO items VALUES ({i}, 'item {i}', {i * 3}, {i / 4}, x'{i:02x}ff');" for i in range(1, 13)]
    + [f"INSERT INTO log (item, what) VALUES ({i}, 'made');" for i in range(1, 6)]
    + [f"INSERT INTO loose VALUES ('r{i}', {i});" for i in range(8)]
    + [f"INSERT INTO tags VALUES ({i}, 't{i % 3}');" for i in range(1, 7)]
    + [f"INSERT INTO owners VALUES ({i}, 'o{i}');" for i in range(1, 5)]
    + [f"INSERT INTO pets (owner, name) VALUES ({1 + i % 4}, 'p{i}');" for i in range(10)]
)

WRITES = (
    "UPDATE items SET qty = qty + 1 WHERE id = {n}",
    "UPDATE items SET name = 'renamed {n}', price = price * 2 WHERE id IN ({n}, {m})",
    "UPDATE items SET pic = randomblob(300) WHERE id = {n}",
    "UPDATE items SET name = printf('%.600c', 'x') WHERE id = {m}",
    "UPDATE items SET qty = qty WHERE id = {n}",  # no value changes
    "UPDATE items SET qty = '7' WHERE id = {n}",  # the same digits as text
    "INSERT INTO items (name, qty) VALUES ('new {n}', {n})",
    "INSERT INTO items (id, name) VALUES ({big}, 'far')",
    "INSERT INTO items (id, name) VALUES ({n} + 100, 'gap')",
    "DELETE FROM items WHERE id = {n}",
    "DELETE FROM items WHERE id = (SELECT max(id) FROM items)",
    "UPDATE items SET id = id + 1000 WHERE id = {m}",  # a row moves to another rowid
    "INSERT OR REPLACE INTO items (id, name) VALUES ({n}, 'replaced')",
    "INSERT INTO log (item, what) VALUES ({n}, 'sold')",
    "DELETE FROM log WHERE item = {m}",
    "UPDATE loose SET b = b + 10 WHERE a = 'r{k}'",
    "INSERT INTO loose VALUES ('extra', {n})",
    "DELETE FROM loose WHERE b = {k}",
    "INSERT INTO tags VALUES ({n}, 'fresh')",
    "UPDATE tags SET tag = 'moved' WHERE item = {k}",
    "DELETE FROM tags WHERE item = {m}",
    "DELETE FROM items",  # the truncate shortcut, where SQLite may take it
    "DELETE FROM log",
    "REPLACE INTO items (id, name) VALUES ({n}, 'rep')",
    "INSERT INTO items (id, name, qty) VALUES ({n}, 'up', 1) ON CONFLICT(id) DO UPDATE SET qty = excluded.qty + 5",
    "UPDATE OR REPLACE items SET id = {m} WHERE id = {n}",  # deletes row {m}, moves row {n}
    "DELETE FROM items WHERE id = {m}; UPDATE items SET id = {m} WHERE id = {n}",  # a move into a freed rowid
    "INSERT INTO spare SELECT * FROM items",  # the transfer shortcut
    "INSERT INTO items SELECT id + 500, name, qty, price, pic FROM items WHERE id < {k}",
    "DELETE FROM owners WHERE id = {k} % 4 + 1",  # cascades to pets
    "UPDATE owners SET id = id + 10 WHERE id = {k} % 4 + 1",  # cascades to pets
    "INSERT INTO pets (owner, name) VALUES (1, 'p{k}')",  # may replace a row (the UNIQUE's ON CONFLICT)
    "UPDATE pets SET name = 'p{n}' WHERE id = {m}",
    "SAVEPOINT s; UPDATE items SET qty = -1; DELETE FROM pets; ROLLBACK TO s; RELEASE s",
    "BEGIN; UPDATE items SET name = 'never' WHERE id = {n}",  # left open: rolled back at the end
    "UPDATE items SET qty = 1 WHERE id = {n}; UPDATE items SET qty = {n} * 3 WHERE id = {n}",  # and back
)


def truth(env: SqlEnvironment) -> list[dict[str, Any]]:
    """The reference: both states read whole and diffed by diff_states."""
    assert env.conn is not None and env.snapshot is not None
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.deserialize(env.conn.serialize(name="main"))
    tables = list_tables(conn)
    end = table_state(conn, tables)
    cols = {t: table_columns(conn, t) for t in tables}
    conn.close()
    return [c.to_dict() for c in diff_states(env.snapshot.state, end, env.snapshot.columns, cols)]


@pytest.mark.parametrize("row_log", [True, False], ids=["row-log", "whole-scans"])
@pytest.mark.parametrize("seed", range(80))
def test_every_path_of_the_diff_reports_what_the_reference_reports(seed: int, row_log: bool,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if not row_log:
        monkeypatch.setattr(env_module, "watch_rows", lambda conn, limit: None)  # the diff scans whole tables
    rng = random.Random(seed)
    env = SqlEnvironment(SqlEnvSpec(schema=SCHEMA, seed=SEED, allowed_changes={"*": "*"}))
    env.start(0)
    assert env.rows is None  # nothing is logged before the first writing call
    for _ in range(rng.randint(1, 5)):
        sql = rng.choice(WRITES).format(n=rng.randint(1, 12), m=rng.randint(1, 12), k=rng.randint(0, 7),
                                        big=rng.randint(10_000, 20_000))
        env.run(ToolCall("sql_execute", {"sql": sql}))  # a constraint error is fine: the world is what it is
    assert (env.rows is not None) is row_log, "this SQLite has a pre-update hook: the row log must be on"
    got = [c.to_dict() for c in env.changes()]
    assert got == truth(env)
    env.shutdown()


def test_the_row_log_sees_every_kind_of_row_change() -> None:
    """What SQLite's hook reports for each way a row can change (the diff reads only these rows)."""
    env = SqlEnvironment(SqlEnvSpec(schema=SCHEMA, seed=SEED, allowed_changes={"*": "*"}))
    env.start(0)
    for sql in ("DELETE FROM log", "REPLACE INTO items (id, name) VALUES (3, 'rep')",
                "UPDATE OR REPLACE items SET id = 5 WHERE id = 4", "DELETE FROM owners WHERE id = 2",
                "INSERT INTO pets (owner, name) VALUES (1, 'p0')", "INSERT INTO spare SELECT * FROM items"):
        env.run(ToolCall("sql_execute", {"sql": sql}))
    assert env.rows is not None
    logged = env.rows.tables
    assert logged["log"] == {1, 2, 3, 4, 5}  # no truncate shortcut past the hook
    assert {3, 4, 5} <= logged["items"]  # the replaced row, the moved row's old and new rowid
    # the cascade's pets (2, 6, 10), the pet the new one replaced (1) and the new one (10 again)
    assert logged["owners"] == {2} and logged["pets"] == {1, 2, 6, 10}
    assert len(logged["spare"]) == 11  # the transfer shortcut
    assert [c.to_dict() for c in env.changes()] == truth(env)
    env.shutdown()


def test_appended_rows_and_updates_are_reported_in_key_order() -> None:
    env = SqlEnvironment(SqlEnvSpec(schema=SCHEMA, seed=SEED, allowed_changes={"*": "*"}))
    env.start(0)
    for sql in ("UPDATE items SET qty = 0 WHERE id IN (2, 11)", "INSERT INTO items (id, name) VALUES (100, 'a')",
                "INSERT INTO items (id, name) VALUES (13, 'b')"):
        assert not env.run(ToolCall("sql_execute", {"sql": sql})).error
    got = [(c.op, c.key) for c in env.changes()]
    assert got == [("insert", 100), ("update", 11), ("insert", 13), ("update", 2)]  # keys in repr order
    assert [c.to_dict() for c in env.changes()] == truth(env)
    env.shutdown()


def test_foreign_key_dependents_are_found_whatever_case_the_references_clause_spells() -> None:
    from agentsynth_sql.world import snapshot_for

    schema = """
    CREATE TABLE parent (id INTEGER PRIMARY KEY);
    CREATE TABLE kids (pid INTEGER REFERENCES "PARENT"(id) ON DELETE CASCADE, n TEXT, PRIMARY KEY (pid, n)) WITHOUT ROWID;
    """
    snap = snapshot_for(schema, "INSERT INTO parent VALUES (1), (2); INSERT INTO kids VALUES (1, 'a'), (2, 'b');")
    assert snap.affected({"parent"}) == {"parent", "kids"}
    env = SqlEnvironment(SqlEnvSpec(schema=schema, seed="INSERT INTO parent VALUES (1), (2); "
                                    "INSERT INTO kids VALUES (1, 'a'), (2, 'b');", allowed_changes={"parent": "*"}))
    env.start(0)
    assert not env.run(ToolCall("sql_execute", {"sql": "DELETE FROM parent WHERE id = 1"})).error
    assert {(c.table, c.op) for c in env.unexpected_changes()} == {("kids", "delete")}
    env.shutdown()


@pytest.mark.parametrize("row_log", [True, False], ids=["row-log", "whole-scans"])
def test_a_generated_column_does_not_hide_the_change_of_the_column_after_it(row_log: bool,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``SELECT *`` returns generated columns and ``PRAGMA table_info`` leaves them out: labelled from
    table_info, the value after a generated column went unlabelled and its change unseen."""
    if not row_log:
        monkeypatch.setattr(env_module, "watch_rows", lambda conn, limit: None)
    schema = ("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, g AS (a * 2), b TEXT);"
              "CREATE TABLE w (k TEXT, g AS (upper(k)) STORED, v INTEGER, PRIMARY KEY (k, v)) WITHOUT ROWID;")
    env = SqlEnvironment(SqlEnvSpec(schema=schema, seed="INSERT INTO t (id, a, b) VALUES (1, 1, 'x');"
                                    "INSERT INTO w (k, v) VALUES ('p', 1)", allowed_changes={"t": ["a"]}))
    env.start(0)
    assert not env.run(ToolCall("sql_execute", {"sql": "UPDATE t SET b = 'changed' WHERE id = 1"})).error
    assert not env.run(ToolCall("sql_execute", {"sql": "UPDATE w SET v = 2"})).error
    got = [(c.table, c.op, c.key, c.columns) for c in env.unexpected_changes()]
    assert got == [("t", "update", 1, ("b",)), ("w", "delete", ("p", 1), ()), ("w", "insert", ("p", 2), ())]
    assert [c.to_dict() for c in env.changes()] == truth(env)
    env.shutdown()
