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
from agentsynth_sql.env import SqlEnvironment, SqlEnvSpec
from agentsynth_sql.world import diff_states, list_tables, table_columns, table_state

SCHEMA = """
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INTEGER, price REAL, pic BLOB);
CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, item INTEGER, what TEXT);
CREATE TABLE loose (a TEXT, b INTEGER);
CREATE TABLE tags (item INTEGER, tag TEXT, PRIMARY KEY (item, tag)) WITHOUT ROWID;
"""
SEED = "\n".join(
    [f"INSERT INTO items VALUES ({i}, 'item {i}', {i * 3}, {i / 4}, x'{i:02x}ff');" for i in range(1, 13)]
    + [f"INSERT INTO log (item, what) VALUES ({i}, 'made');" for i in range(1, 6)]
    + [f"INSERT INTO loose VALUES ('r{i}', {i});" for i in range(8)]
    + [f"INSERT INTO tags VALUES ({i}, 't{i % 3}');" for i in range(1, 7)]
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


@pytest.mark.parametrize("seed", range(60))
def test_every_path_of_the_diff_reports_what_the_reference_reports(seed: int) -> None:
    rng = random.Random(seed)
    env = SqlEnvironment(SqlEnvSpec(schema=SCHEMA, seed=SEED, allowed_changes={"*": "*"}))
    env.start(0)
    for _ in range(rng.randint(1, 5)):
        sql = rng.choice(WRITES).format(n=rng.randint(1, 12), m=rng.randint(1, 12), k=rng.randint(0, 7),
                                        big=rng.randint(10_000, 20_000))
        env.run(ToolCall("sql_execute", {"sql": sql}))  # a constraint error is fine: the world is what it is
    got = [c.to_dict() for c in env.changes()]
    assert got == truth(env)
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
