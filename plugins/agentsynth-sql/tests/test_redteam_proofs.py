"""Red team of the collateral check's proofs (``SqlEnvironment._proven``).

The claim under attack: whatever an agent runs through ``sql_execute`` / ``sql_query``, the unexpected
changes ``unexpected_changes()`` reports with the proofs are exactly those of the whole diff judged by
the rules, and both are the world's real unexpected changes. Every attempt is a test: an attack the
code defeats asserts the verdict (and that the proofs agree with the whole diff). The ``test_hole_*``
tests are the holes this red team found (a changed affinity rewritten by an UPDATE; a column named
rowid, oid or _rowid_; a generated column a seed declares through writable_schema), fixed in world.py:
each asserts the correct verdict.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_proven_verdicts import SCHEMA_ALL, SEED_ALL, judged, random_rules

from agentsynth_kernel import ToolCall
from agentsynth_sql.env import SqlEnvironment, SqlEnvSpec
from agentsynth_sql.world import CheckBudgetExceeded

Verdict = set[tuple[str, str, Any]]


def play(rules: dict[str, Any], script: list[str], *, schema: str = SCHEMA_ALL, seed: str = SEED_ALL,
         **spec: Any) -> SqlEnvironment:
    """An episode of ``script`` (``Q:`` before a statement sends it through sql_query)."""
    env = SqlEnvironment(SqlEnvSpec(schema=schema, seed=seed, allowed_changes=rules, **spec))
    env.start(0)
    for sql in script:
        run(env, sql)
    return env


def run(env: SqlEnvironment, sql: str) -> Any:
    tool = "sql_execute"
    if sql.startswith("Q:"):
        tool, sql = "sql_query", sql[2:]
    return env.run(ToolCall(tool, {"sql": sql}))  # an error observation is fine: the world is what it is


def verdict(env: SqlEnvironment) -> Verdict:
    return {(c.table, c.op, c.key) for c in env.unexpected_changes()}


def both(env: SqlEnvironment) -> list[dict[str, Any]]:
    """The verdict with the proofs, after asserting the whole diff gives the same one."""
    fast = judged(env, proofs=True)
    assert fast == judged(env, proofs=False)
    return fast


# --- attacks the code defeats -----------------------------------------------------------------------

OWNERS_2_PETS = {("pets", "update", 2), ("pets", "update", 6), ("pets", "update", 10)}  # pets of owner 2

ATTACKS: list[tuple[str, dict[str, Any], list[str], Verdict, dict[str, Any]]] = [
    # upserts: an INSERT is authorized, so the table is read (DO UPDATE columns are not authorized as updates)
    ("upsert-do-update-other-column", {"items": {"insert": True, "update": ["name"]}},
     ["INSERT INTO items (id, name) VALUES (1, 'z') ON CONFLICT(id) DO UPDATE SET qty = excluded.qty"],
     {("items", "update", 1)}, {}),
    ("upsert-do-update-after-allowed-update", {"items": ["name"]},
     ["UPDATE items SET name = 'a' WHERE id = 1",
      "INSERT INTO items (id, name) VALUES (1, 'z') ON CONFLICT(id) DO UPDATE SET qty = 0"],
     {("items", "update", 1)}, {}),
    ("upsert-do-nothing", {"items": ["name"]},
     ["UPDATE items SET name = 'a' WHERE id = 1", "INSERT INTO items (id, name) VALUES (1, 'z') ON CONFLICT DO NOTHING"],
     set(), {}),
    ("insert-or-replace-existing", {"items": ["name"]}, ["INSERT OR REPLACE INTO items (id, name) VALUES (2, 'n')"],
     {("items", "update", 2)}, {}),
    ("replace-into", {"owners": ["name"]}, ["REPLACE INTO owners (id, name) VALUES (9, 'o1')"],
     {("owners", "delete", 1), ("owners", "insert", 9), ("pets", "delete", 1), ("pets", "delete", 5),
      ("pets", "delete", 9)}, {}),  # owner 1's pets go with it (ON DELETE CASCADE)
    ("upsert-on-pets", {"pets": ["name"]},
     ["INSERT INTO pets (id, owner, name) VALUES (1, 2, 'x') ON CONFLICT(id) DO UPDATE SET owner = 3"],
     {("pets", "update", 1)}, {}),
    # UPDATE forms: every SET column is authorized, however it is spelled
    ("update-from-allowed", {"items": ["qty"]},
     ["UPDATE items SET qty = s.qty + 1 FROM (SELECT id, qty FROM items) AS s WHERE s.id = items.id"], set(), {}),
    ("update-from-extra-column", {"items": ["qty"]},
     ["UPDATE items SET qty = 1, name = s.name FROM (SELECT 1 AS id, 'zz' AS name) AS s WHERE s.id = items.id"],
     {("items", "update", 1)}, {}),
    ("returning", {"items": ["qty"]}, ["UPDATE items SET qty = 0 WHERE id < 3 RETURNING *"], set(), {}),
    ("returning-other-column", {"items": ["qty"]}, ["UPDATE items SET name = 'r' WHERE id < 3 RETURNING id"],
     {("items", "update", 1), ("items", "update", 2)}, {}),
    ("row-value", {"items": ["name"]}, ["UPDATE items SET (name, qty) = ('a', 77) WHERE id = 2"],
     {("items", "update", 2)}, {}),
    ("row-value-subquery", {"items": ["name"]}, ["UPDATE items SET (name, qty) = (SELECT 'b', 78) WHERE id = 2"],
     {("items", "update", 2)}, {}),
    ("case-and-quoting", {"items": ["qty"]}, ['UPDATE "ITEMS" SET "NAME" = \'q\' WHERE ID = 3'],
     {("items", "update", 3)}, {}),
    ("main-qualified", {"items": ["qty"]}, ["UPDATE main.items SET name = 'q' WHERE id = 3"],
     {("items", "update", 3)}, {}),
    ("main-qualified-allowed", {"items": ["name"]}, ["UPDATE MAIN.Items SET Name = 'q' WHERE id = 3"], set(), {}),
    ("update-or-fail-partial", {"owners": ["id"]},
     ["UPDATE OR FAIL owners SET name = CASE id WHEN 1 THEN 'n1' WHEN 2 THEN 'o3' END WHERE id IN (1, 2)"],
     {("owners", "update", 1)}, {}),
    ("update-or-ignore", {"owners": ["id"]},
     ["UPDATE OR IGNORE owners SET name = CASE id WHEN 1 THEN 'n1' ELSE 'o4' END"], {("owners", "update", 1)}, {}),
    ("multi-statement-failing", {"items": ["qty"]},
     ["UPDATE items SET qty = 1 WHERE id = 1; UPDATE items SET name = 'zz' WHERE id = 2; SELECT nope"],
     {("items", "update", 2)}, {}),
    # the rowid under every spelling: in place it changes nothing, a move is a delete and an insert
    *[(f"set-{spelling}-to-itself", {"items": ["qty"]}, [f"UPDATE items SET {spelling} = {spelling} WHERE id = 2"],
       set(), {}) for spelling in ("rowid", "oid", "_rowid_", "ROWID", '"rowid"')],
    *[(f"move-{spelling}", {"items": ["qty", "id"]}, [f"UPDATE items SET {spelling} = {spelling} + 100 WHERE id = 2"],
       {("items", "delete", 2), ("items", "insert", 102)}, {}) for spelling in ("rowid", "oid", "_rowid_", "id")],
    *[(f"move-{spelling}-no-alias", {"loose": ["a", "b"]},
       [f"UPDATE loose SET {spelling} = {spelling} + 100 WHERE b = 2"],
       {("loose", "delete", 3), ("loose", "insert", 103)}, {}) for spelling in ("rowid", "oid", "_rowid_")],
    # DDL (failed, rolled back, temp, dropped again) turns the proofs off: the end state is a copy
    ("temp-table-shadowing-main", {"items": ["qty"]},
     ["CREATE TEMP TABLE items AS SELECT * FROM main.items", "UPDATE main.items SET name = 'q' WHERE id = 3",
      "UPDATE items SET qty = 1"], {("items", "update", 3)}, {}),
    ("temp-table-created-and-dropped", {"items": ["qty"]},
     ["CREATE TEMP TABLE x (a)", "DROP TABLE temp.x", "UPDATE items SET name = 'q' WHERE id = 3"],
     {("items", "update", 3)}, {}),
    ("ddl-rolled-back", {"items": ["qty"]},
     ["BEGIN", "CREATE TABLE zz (a)", "ROLLBACK", "UPDATE items SET name = 'q' WHERE id = 3"],
     {("items", "update", 3)}, {}),
    ("ddl-failed", {"items": ["qty"]}, ["CREATE TABLE items (a)", "UPDATE items SET name = 'q' WHERE id = 3"],
     {("items", "update", 3)}, {}),
    ("temp-trigger-then-dropped", {"items": ["qty"]},
     ["CREATE TEMP TRIGGER tr AFTER UPDATE OF qty ON main.items BEGIN "
      "UPDATE items SET name = 'trig' WHERE id = new.id; END", "UPDATE items SET qty = 5 WHERE id = 3", "DROP TRIGGER tr"],
     {("items", "update", 3)}, {}),
    ("analyze", {"items": ["qty"]}, ["ANALYZE", "UPDATE items SET name = 'x' WHERE id = 1"], {("items", "update", 1)}, {}),
    ("reindex", {"items": ["qty"]}, ["REINDEX", "UPDATE items SET name = 'x' WHERE id = 1"], {("items", "update", 1)}, {}),
    ("vacuum-denied", {"items": ["qty"]}, ["DELETE FROM loose WHERE b < 3", "VACUUM"],
     {("loose", "delete", 1), ("loose", "delete", 2), ("loose", "delete", 3)}, {}),
    # transactions: what was rolled back is not a change, what was released is
    ("savepoint-rolled-back", {"items": ["qty"]},
     ["SAVEPOINT a", "UPDATE items SET name = 'z' WHERE id = 1", "ROLLBACK TO a", "RELEASE a",
      "UPDATE items SET qty = 3 WHERE id = 1"], set(), {}),
    ("savepoint-released", {"items": ["qty"]}, ["SAVEPOINT a", "UPDATE items SET name = 'z' WHERE id = 1", "RELEASE a"],
     {("items", "update", 1)}, {}),
    ("transaction-left-open", {"items": ["qty"]}, ["BEGIN", "UPDATE items SET name = 'z' WHERE id = 1"], set(), {}),
    # a statement prepared by sql_execute, reused by sql_query: prepared again under the read-only rules
    ("statement-reused-read-only", {"items": ["qty"]},
     ["UPDATE items SET qty = 1 WHERE id = 1", "Q:UPDATE items SET name = 'z' WHERE id = 1"], set(), {}),
    # tables of other kinds
    ("autoincrement-update", {"log": ["what"]}, ["UPDATE log SET what = 'x' WHERE id = 2"], set(), {}),
    ("autoincrement-move", {"log": ["what", "id"]}, ["UPDATE log SET id = 100 WHERE id = 2"],
     {("log", "delete", 2), ("log", "insert", 100)}, {}),
    ("without-rowid", {"tags": ["tag"]}, ["UPDATE tags SET tag = 'zz' WHERE item = 2"],
     {("tags", "delete", (2, "t2")), ("tags", "insert", (2, "zz"))}, {}),
    ("generated-stored", {"priced": ["qty"]}, ["UPDATE priced SET qty = 50 WHERE id = 1"], {("priced", "update", 1)}, {}),
    ("fk-cascade", {"owners": ["id"], "pets": ["name"]}, ["UPDATE owners SET id = 77 WHERE id = 2"],
     {("owners", "delete", 2), ("owners", "insert", 77), *OWNERS_2_PETS}, {}),
    ("fk-cascade-foreign-keys-off", {"owners": ["id"], "pets": ["name"]}, ["UPDATE owners SET id = 77 WHERE id = 2"],
     {("owners", "delete", 2), ("owners", "insert", 77)}, {"foreign_keys": False}),
    ("unique-on-conflict-replace", {"pets": ["name"]}, ["UPDATE pets SET name = 'p4' WHERE id = 1"],
     {("pets", "delete", 5)}, {}),
    ("delete-of-nothing-then-allowed-update", {"items": ["qty"]},
     ["DELETE FROM items WHERE id = 999", "UPDATE items SET qty = 1 WHERE id = 1"], set(), {}),
    ("where-outside-after-inside", {"items": {"update": ["qty"], "where": "id <= 3"}},
     ["UPDATE items SET qty = 0 WHERE id = 2", "UPDATE items SET qty = qty WHERE id = 9",
      "UPDATE items SET qty = 1 WHERE id = 10"], {("items", "update", 10)}, {}),
]


@pytest.mark.parametrize(("rules", "script", "expected", "spec"), [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS])
def test_attack_is_judged_as_the_whole_diff_judges_it(rules: dict[str, Any], script: list[str], expected: Verdict,
                                                      spec: dict[str, Any]) -> None:
    env = play(rules, script, **spec)
    both(env)
    assert verdict(env) == expected
    env.shutdown()


def test_ddl_turns_the_proofs_off() -> None:
    """Any DDL the agent prepared (even rolled back or failed) ends the live end state: nothing is proven."""
    for script in (["BEGIN", "CREATE TABLE zz (a)", "ROLLBACK"], ["CREATE TABLE items (a)"],
                   ["CREATE TEMP TABLE x (a)", "DROP TABLE x"], ["CREATE TEMP VIEW v AS SELECT 1"]):
        env = play({"items": ["qty"]}, [*script, "UPDATE items SET qty = 1 WHERE id = 1"])
        env.end_state()
        assert not env._end_live and env._proven() == (frozenset(), False, 0), script
        assert env.unexpected_changes() == []
        env.shutdown()


SMALL = "CREATE TABLE {t} (id INTEGER PRIMARY KEY, qty INTEGER, note TEXT);"
WORLDS: list[tuple[str, str, str, dict[str, Any], list[str], Verdict]] = [
    # a trigger in the world writes a column no UPDATE names
    ("world-trigger", SMALL.format(t="w") + "CREATE TRIGGER tr AFTER UPDATE OF qty ON w BEGIN "
     "UPDATE w SET note = 'seen' WHERE id = new.id; END;", "INSERT INTO w VALUES (1, 1, 'a'), (2, 2, 'b');",
     {"w": ["qty"]}, ["UPDATE w SET qty = 9 WHERE id = 1"], {("w", "update", 1)}),
    # a virtual table in the world: nothing is provable (a module writes its shadow tables itself)
    ("world-fts", SMALL.format(t="w") + "CREATE VIRTUAL TABLE docs USING fts5(body);",
     "INSERT INTO w VALUES (1, 1, 'a'), (2, 2, 'b'); INSERT INTO docs VALUES ('hello');",
     {"w": ["qty"]}, ["UPDATE w SET qty = 5", "UPDATE w SET note = 'x' WHERE id = 2"], {("w", "update", 2)}),
    ("generated-virtual", "CREATE TABLE g (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2));",
     "INSERT INTO g (id, a) VALUES (1, 1), (2, 2);", {"g": ["a"]}, ["UPDATE g SET a = 5 WHERE id = 1"],
     {("g", "update", 1)}),
    ("self-referencing-cascade", "CREATE TABLE e (id INTEGER PRIMARY KEY, boss INTEGER REFERENCES e(id) "
     "ON UPDATE CASCADE, name TEXT);", "INSERT INTO e VALUES (1, NULL, 'a'), (2, 1, 'b'), (3, 1, 'c');",
     {"e": ["name", "id"]}, ["UPDATE e SET name = 'z' WHERE id = 3", "UPDATE e SET id = 10 WHERE id = 1"],
     {("e", "delete", 1), ("e", "insert", 10), ("e", "update", 2), ("e", "update", 3)}),
    ("fk-set-null-on-text-key", "CREATE TABLE p (code TEXT UNIQUE, v); CREATE TABLE c (id INTEGER PRIMARY KEY, "
     "code TEXT REFERENCES p(code) ON UPDATE SET NULL, n);",
     "INSERT INTO p VALUES ('a', 1), ('b', 2); INSERT INTO c VALUES (1, 'a', 0), (2, 'b', 0);",
     {"p": ["code"], "c": ["n"]}, ["UPDATE c SET n = 1", "UPDATE p SET code = 'zz' WHERE code = 'a'"],
     {("c", "update", 1)}),
    ("not-null-on-conflict-replace-default", "CREATE TABLE d (id INTEGER PRIMARY KEY, "
     "a TEXT NOT NULL ON CONFLICT REPLACE DEFAULT 'dflt', b);", "INSERT INTO d VALUES (1, 'x', 1);",
     {"d": ["b"]}, ["UPDATE d SET a = NULL WHERE id = 1"], {("d", "update", 1)}),
    ("integer-primary-key-desc-is-no-alias", "CREATE TABLE k (id INTEGER PRIMARY KEY DESC, qty INTEGER);",
     "INSERT INTO k VALUES (1, 1), (2, 2);", {"k": ["qty"]}, ["UPDATE k SET id = 50 WHERE id = 1"],
     {("k", "update", 1)}),
    ("integer-primary-key-desc-allowed", "CREATE TABLE k (id INTEGER PRIMARY KEY DESC, qty INTEGER);",
     "INSERT INTO k VALUES (1, 1), (2, 2);", {"k": ["id"]}, ["UPDATE k SET id = 50 WHERE id = 1"], set()),
    ("strict", "CREATE TABLE s (id INTEGER PRIMARY KEY, qty INTEGER, note TEXT) STRICT;",
     "INSERT INTO s VALUES (1, 1, 'a'), (2, 2, 'b');", {"s": ["qty"]},
     ["UPDATE s SET qty = 3 WHERE id = 1", "UPDATE s SET note = 'n' WHERE id = 2", "UPDATE s SET qty = 'x'"],
     {("s", "update", 2)}),
    ("quoted-mixed-case-names", 'CREATE TABLE "Order Items" (id INTEGER PRIMARY KEY, "Qty" INTEGER, "Note" TEXT);',
     'INSERT INTO "Order Items" VALUES (1, 1, \'a\'), (2, 2, \'b\');', {"Order Items": ["Qty"]},
     ['UPDATE "order items" SET qty = 7', 'UPDATE "ORDER ITEMS" SET note = \'n\' WHERE id = 2'],
     {("Order Items", "update", 2)}),
    ("quoted-mixed-case-allowed", 'CREATE TABLE "Order Items" (id INTEGER PRIMARY KEY, "Qty" INTEGER);',
     'INSERT INTO "Order Items" VALUES (1, 1), (2, 2);', {"Order Items": ["Qty"]},
     ['UPDATE "order items" SET QTY = 7', 'UPDATE main."Order Items" SET "qty" = 8 WHERE ID = 1'], set()),
    ("alter-added-column-default", "CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT);",
     "INSERT INTO t VALUES (1, 'a'), (2, 'b'); ALTER TABLE t ADD COLUMN n INTEGER DEFAULT '5';"
     "ALTER TABLE t ADD COLUMN h TEXT DEFAULT 1e3;", {"t": ["a"]}, ["UPDATE t SET a = 'z'"], set()),
]


@pytest.mark.parametrize(("schema", "seed", "rules", "script", "expected"), [w[1:] for w in WORLDS],
                         ids=[w[0] for w in WORLDS])
def test_worlds_a_pack_may_declare(schema: str, seed: str, rules: dict[str, Any], script: list[str],
                                   expected: Verdict) -> None:
    env = play(rules, script, schema=schema, seed=seed)
    both(env)
    assert verdict(env) == expected
    env.shutdown()


# --- limits -------------------------------------------------------------------------------------------


def test_a_table_past_max_changes_fails_with_or_without_proofs() -> None:
    """More logged rows than max_changes: the log overflows, nothing is proven, the diff stops."""
    env = play({"items": ["qty"]}, ["UPDATE items SET qty = qty + 1"], max_changes=5)
    env.end_state()
    assert env._proven()[0] == frozenset() and env.rows is not None and "items" in env.rows.overflow
    for proofs in (True, False):
        with pytest.raises(CheckBudgetExceeded, match="max_changes"):
            judged(env, proofs=proofs)
    env.shutdown()


def test_proven_tables_count_toward_max_changes() -> None:
    """Two proven tables, each under max_changes, together over it: the whole diff's verdict (it stops)."""
    env = play({"items": ["qty"], "owners": ["name"]},
               ["UPDATE items SET qty = qty + 1 WHERE id <= 4", "UPDATE owners SET name = name || 'x'"], max_changes=5)
    env.end_state()
    assert env._proven() == ({"items", "owners"}, True, 8)
    for proofs in (True, False):
        with pytest.raises(CheckBudgetExceeded, match="max_changes"):
            judged(env, proofs=proofs)
    env.shutdown()


def test_exactly_max_changes_rows_are_proven_and_pass() -> None:
    env = play({"items": ["qty"]}, ["UPDATE items SET qty = qty + 1 WHERE id <= 5"], max_changes=5)
    env.end_state()
    assert env._proven() == ({"items"}, True, 5)
    assert both(env) == []
    env.shutdown()


def test_many_rows_logged_but_unchanged_are_no_change() -> None:
    """Rows updated to their own values (logged, not changed) outside the rule's where: a proof fails, the
    diff finds nothing (a failed proof must not fail a legitimate episode)."""
    env = play({"items": {"update": ["qty"], "where": "id <= 3"}}, ["UPDATE items SET qty = qty", "UPDATE items SET "
               "name = name WHERE id > 6"])
    env.end_state()
    assert env._proven()[0] == frozenset()
    assert both(env) == []
    env.shutdown()


# --- sessions: episodes, checks in the middle, other environments ----------------------------------------


def test_episodes_on_one_environment_do_not_share_proofs() -> None:
    """What one episode's UPDATEs were authorized for (and its row log) is not the next one's."""
    rules = {"items": {"update": ["name"], "where": "id <= 6"}}
    env = play(rules, ["UPDATE items SET name = 'a' WHERE id = 2"])
    assert both(env) == []
    env.start(1)
    assert env.sandbox.updated == {} and env.rows is None
    run(env, "UPDATE items SET qty = 0 WHERE id = 2")
    run(env, "UPDATE items SET name = 'b' WHERE id = 8")
    assert verdict(env) == {("items", "update", 2), ("items", "update", 8)}
    both(env)
    env.start(2)
    run(env, "UPDATE items SET name = 'c' WHERE id = 3")
    assert verdict(env) == set() and env._changes is None  # proven again, nothing read
    env.shutdown()


def test_two_environments_on_one_world_keep_their_own_logs() -> None:
    rules = {"items": ["name"]}
    a = play(rules, ["UPDATE items SET name = 'a' WHERE id = 1"])
    b = play(rules, ["UPDATE items SET qty = 0 WHERE id = 2"])
    run(a, "UPDATE items SET name = 'a2' WHERE id = 3")
    assert a.rows is not None and b.rows is not None and a.rows.tables == {"items": {1, 3}}
    assert b.rows.tables == {"items": {2}}
    assert verdict(a) == set() and verdict(b) == {("items", "update", 2)}
    both(a), both(b)
    a.shutdown()
    b.shutdown()


def test_a_check_in_the_middle_does_not_vouch_for_what_follows() -> None:
    """Checked (proven, the live connection made read-only), then the agent goes on: the next check
    judges the new state; the agent cannot re-run the statements the checks use on its connection."""
    env = play({"items": ["name"]}, ["UPDATE items SET name = 'a' WHERE id = 1"])
    assert verdict(env) == set() and env._end_live
    assert env.query("SELECT name FROM items WHERE id = 1") == [("a",)]
    for pragma in ("PRAGMA query_only = OFF", "PRAGMA query_only = ON", "PRAGMA main.max_page_count = 1"):
        assert run(env, pragma).error
    run(env, "UPDATE items SET qty = 0 WHERE id = 4")
    assert verdict(env) == {("items", "update", 4)}
    both(env)
    run(env, "UPDATE items SET qty = 12 WHERE id = 4")  # put back: no change left
    assert verdict(env) == set()
    both(env)
    env.shutdown()


def test_where_keys_are_the_start_states_across_episodes() -> None:
    """The where keys are evaluated once per world on the start state: an episode that moved rows into
    the where's range does not widen it for the next episode."""
    rules = {"items": {"update": ["qty"], "where": "name LIKE 'item 1%'"}}  # ids 1, 10, 11, 12
    env = play(rules, ["UPDATE items SET name = 'item 1x' WHERE id = 5"])
    assert verdict(env) == {("items", "update", 5)}
    env.start(1)
    run(env, "UPDATE items SET qty = 0 WHERE id IN (1, 5)")
    assert verdict(env) == {("items", "update", 5)}
    both(env)
    assert env.snapshot is not None and env.snapshot.start_keys[("items", rules["items"]["where"])] == {1, 10, 11, 12}
    env.shutdown()


def test_a_rule_for_a_missing_table_fails_at_reset() -> None:
    with pytest.raises(ValueError, match="allowed_changes.Items: no table"):
        play({"Items": ["qty"]}, [])


# --- random scripts with the write forms the attacks above use ----------------------------------------

FORMS = (
    "UPDATE items SET qty = {n} WHERE id = {m}",
    "UPDATE items SET (name, qty) = ('v{k}', {n}) WHERE id = {m}",
    "UPDATE items SET name = s.name FROM (SELECT {m} AS id, 'f{k}' AS name) AS s WHERE s.id = items.id",
    "UPDATE items SET price = {k} WHERE id = {n} RETURNING id",
    "INSERT INTO items (id, name) VALUES ({n}, 'u') ON CONFLICT(id) DO UPDATE SET qty = {k}",
    "INSERT INTO items (id, name) VALUES ({n}, 'u') ON CONFLICT DO NOTHING",
    "UPDATE OR REPLACE owners SET name = 'o{k}' WHERE id = {m} % 4 + 1",
    "UPDATE OR IGNORE owners SET name = 'o{k}' WHERE id = {n} % 4 + 1",
    "UPDATE OR FAIL owners SET name = CASE id WHEN 1 THEN 'w{k}' ELSE 'o{k}' END",
    "SAVEPOINT s; UPDATE items SET name = 'sv' WHERE id = {n}; ROLLBACK TO s; RELEASE s",
    "SAVEPOINT s; UPDATE items SET qty = -1 WHERE id = {m}; RELEASE s",
    "UPDATE items SET rowid = rowid WHERE id = {n}",
    "UPDATE items SET oid = oid + 50 WHERE id = {m}",
    "UPDATE loose SET _rowid_ = _rowid_ + 20 WHERE b = {k}",
    "UPDATE loose SET b = b WHERE rowid = {k}",
    'UPDATE "ITEMS" SET "QTY" = {k} WHERE "ID" = {n}',
    "UPDATE pets SET name = 'p{k}' WHERE id = {n}",
    "UPDATE owners SET id = {n} + 20 WHERE id = {k} % 4 + 1",
    "UPDATE priced SET qty = {k} WHERE id = {n} % 6 + 1",
    "UPDATE tags SET tag = 't{k}' WHERE item = {n}",
    "BEGIN; UPDATE items SET qty = 0 WHERE id = {n}",  # left open: rolled back at the end
)


@pytest.mark.parametrize("seed", range(120))
def test_random_attack_scripts_judge_as_the_whole_diff_does(seed: int) -> None:
    rng = random.Random(10_000 + seed)
    rules = random_rules(rng)
    script = [rng.choice(FORMS).format(n=rng.randint(1, 12), m=rng.randint(1, 12), k=rng.randint(0, 7))
              for _ in range(rng.randint(1, 5))]
    env = play(rules, script)
    assert judged(env, proofs=True) == judged(env, proofs=False), (rules, script)
    env.shutdown()


# --- holes ----------------------------------------------------------------------------------------------

# A world whose stored values are not what their column's affinity makes of them: the seed (or a .db seed
# made elsewhere) changed a declared type after the rows were written (PRAGMA writable_schema, the
# documented way to change a column's type without rebuilding the table). Every UPDATE rewrites the whole
# record and applies each column's affinity again, so a column no UPDATE names changes.
AFFINITY_SCHEMA = "CREATE TABLE acct (id INTEGER PRIMARY KEY, code TEXT, balance INTEGER);"
AFFINITY_SEED = ("INSERT INTO acct VALUES (1, 'a', 10), (2, 'b', 20);"
                 "PRAGMA writable_schema = ON;"
                 "UPDATE sqlite_master SET sql = 'CREATE TABLE acct (id INTEGER PRIMARY KEY, code TEXT, balance TEXT)'"
                 " WHERE name = 'acct';"
                 "PRAGMA writable_schema = OFF;")


def test_hole_affinity_rewrite_changes_a_column_no_update_names() -> None:
    env = play({"acct": ["code"]}, ["UPDATE acct SET code = 'z' WHERE id = 1"], schema=AFFINITY_SCHEMA,
               seed=AFFINITY_SEED)
    full = [{"table": "acct", "op": "update", "key": 1, "columns": ("code", "balance"),
             "before": {"id": 1, "code": "a", "balance": 10}, "after": {"id": 1, "code": "z", "balance": "10"}}]
    assert judged(env, proofs=False) == full  # the whole diff sees balance change
    assert judged(env, proofs=True) == full  # the proof says allowed: []
    env.shutdown()


# A column named "rowid" (SQLite: the name then always means the column, never the rowid; oid and _rowid_
# still mean the rowid). The row log holds real rowids; the where keys (SELECT rowid ... WHERE) and the
# diff's reads (SELECT rowid, * ... WHERE rowid IN (...)) use the column's values instead.
SHADOW_SCHEMA = "CREATE TABLE t (rowid INTEGER, v TEXT);"
SHADOW_SEED = "INSERT INTO t (rowid, v) VALUES (2, 'keep'), (1, 'edit');"  # real rowid 1: (2, keep); 2: (1, edit)


def test_hole_rowid_column_where_keys_are_not_rowids() -> None:
    env = play({"t": {"update": ["v"], "where": "v = 'edit'"}}, ["UPDATE t SET v = 'x' WHERE v = 'keep'"],
               schema=SHADOW_SCHEMA, seed=SHADOW_SEED)
    assert env.query("SELECT v FROM t ORDER BY _rowid_") == [("x",), ("edit",)]  # the row kept out of the where changed
    assert [c.op for c in env.unexpected_changes()] == ["update"]
    env.shutdown()


def test_hole_rowid_column_hides_a_change_from_the_whole_diff() -> None:
    env = play({"t": ["v"]}, ["UPDATE t SET rowid = 99 WHERE v = 'keep'"], schema=SHADOW_SCHEMA, seed=SHADOW_SEED)
    assert env.query("SELECT rowid FROM t ORDER BY _rowid_") == [(99,), (1,)]
    assert [c.op for c in env.changes()] == ["update"]  # none without the fix
    env._changes = env._unexpected = None
    assert len(env.unexpected_changes()) == 1
    env.shutdown()


# A WITHOUT ROWID table with a column named rowid: ``SELECT rowid`` works (it is the column), so the world
# takes it for a rowid table; the row log records key 0 for its rows (a WITHOUT ROWID row has no rowid) and
# the diff reads "rowid IN (0)": every insert, delete and update of the table is unseen.
NO_ROWID_SCHEMA = "CREATE TABLE w (rowid TEXT PRIMARY KEY, v TEXT, n INTEGER) WITHOUT ROWID;"
NO_ROWID_SEED = "INSERT INTO w VALUES ('a', 'x', 1), ('b', 'y', 2);"


@pytest.mark.parametrize(("sql", "expected"), [
    ("DELETE FROM w WHERE n = 1", {("w", "delete", ("a",))}),
    ("UPDATE w SET n = 5 WHERE rowid = 'b'", {("w", "update", ("b",))}),
    ("INSERT INTO w VALUES ('c', 'z', 3)", {("w", "insert", ("c",))}),
], ids=["delete", "update", "insert"])
def test_hole_without_rowid_table_with_a_rowid_column(sql: str, expected: Verdict) -> None:
    env = play({"w": ["v"]}, [sql], schema=NO_ROWID_SCHEMA, seed=NO_ROWID_SEED)
    assert verdict(env) == expected
    both(env)
    env.shutdown()


def test_hole_rowid_table_declaring_every_spelling_of_the_rowid() -> None:
    """Columns named rowid, oid and _rowid_: no SQL reaches the rowid (the fix keys such a table by all
    its columns, as a WITHOUT ROWID table without a primary key). A change no rule allows must be seen."""
    env = play({"t": ["v"]}, ["UPDATE t SET oid = 'changed' WHERE v = 'b'"],
               schema="CREATE TABLE t (rowid INTEGER, oid TEXT, _rowid_ TEXT, v TEXT);",
               seed="INSERT INTO t VALUES (2, 'x', 'y', 'a'), (1, 'x', 'y', 'b');")
    assert [c.op for c in env.unexpected_changes()] != []
    both(env)
    env.shutdown()


# The seed edits sqlite_master (writable_schema) after writing its rows: the connection that built the world
# keeps the schema it parsed before, so what the world learns from it (generated columns, foreign keys) is
# not what every episode, opening the bytes afresh, runs under.
def _edited(schema: str, rows: str, table: str, new_sql: str) -> tuple[str, str]:
    return schema, (f"{rows} PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = '{new_sql}' "
                    f"WHERE name = '{table}'; PRAGMA writable_schema = OFF;")


def test_hole_generated_column_declared_after_the_rows() -> None:
    schema, seed = _edited("CREATE TABLE g (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER);",
                           "INSERT INTO g VALUES (1, 1, 2), (2, 2, 4);", "g",
                           "CREATE TABLE g (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2) STORED)")
    env = play({"g": ["a"]}, ["UPDATE g SET a = 5 WHERE id = 1"], schema=schema, seed=seed)
    assert env.query("SELECT b FROM g WHERE id = 1") == [(10,)]  # episodes run the edited schema
    assert verdict(env) == {("g", "update", 1)}
    both(env)
    env.shutdown()


def test_foreign_key_action_declared_after_the_rows_is_still_caught() -> None:
    """The build does not see the cascade (pets stays provable), but SQLite authorizes the cascade's UPDATE
    of pets.owner when it prepares the parent's UPDATE: sandbox.updated names owner, the proof fails."""
    schema, seed = _edited(
        "CREATE TABLE owners (id INTEGER PRIMARY KEY, name TEXT); CREATE TABLE pets (id INTEGER PRIMARY KEY, "
        "owner INTEGER, name TEXT);", "INSERT INTO owners VALUES (1, 'o1'), (2, 'o2'); "
        "INSERT INTO pets VALUES (1, 1, 'p1'), (2, 2, 'p2');", "pets",
        "CREATE TABLE pets (id INTEGER PRIMARY KEY, owner INTEGER REFERENCES owners(id) ON UPDATE CASCADE, name TEXT)")
    env = play({"owners": "*", "pets": ["name"]},
               ["UPDATE pets SET name = 'n' WHERE id = 1", "UPDATE owners SET id = 9 WHERE id = 1"],
               schema=schema, seed=seed)
    assert env.query("SELECT owner FROM pets WHERE id = 1") == [(9,)]  # the cascade ran
    assert env.sandbox.updated["pets"] == {"name", "owner"}
    assert verdict(env) == {("pets", "update", 1)}
    both(env)
    env.shutdown()


def test_a_generated_column_between_columns_keeps_the_labels() -> None:
    """SELECT * returns the generated column in its place: the change of the column after it is that
    column's (PRAGMA table_info, which leaves generated columns out, labelled it wrongly)."""
    env = play({"m": ["a"]}, ["UPDATE m SET b = 'changed' WHERE id = 1"],
               schema="CREATE TABLE m (id INTEGER PRIMARY KEY, a INTEGER, g INTEGER GENERATED ALWAYS AS (a + 1), b TEXT);",
               seed="INSERT INTO m (id, a, b) VALUES (1, 1, 'x');")
    assert [(c.key, c.columns, c.after) for c in env.unexpected_changes()] == [(1, ("b",), {"id": 1, "a": 1, "g": 2,
                                                                                            "b": "changed"})]
    both(env)
    env.shutdown()


SPELLINGS: list[tuple[str, str, str, dict[str, Any], str, Verdict]] = [
    # only oid declared: rowid still reaches the rowid (the row log's path, and the proofs)
    ("oid-column", "CREATE TABLE t (oid INTEGER, v TEXT);", "INSERT INTO t VALUES (2, 'keep'), (1, 'edit');",
     {"t": {"update": ["v"], "where": "v = 'edit'"}}, "UPDATE t SET v = 'x' WHERE v = 'keep'", {("t", "update", 1)}),
    ("upper-case-rowid-column", "CREATE TABLE t (ROWID INTEGER, v TEXT);",
     "INSERT INTO t VALUES (2, 'keep'), (1, 'edit');", {"t": {"update": ["v"], "where": "v = 'edit'"}},
     "UPDATE t SET v = 'x' WHERE v = 'keep'", {("t", "update", 1)}),
    ("rowid-and-oid-columns", "CREATE TABLE t (rowid INTEGER, oid INTEGER, v TEXT);",
     "INSERT INTO t VALUES (2, 2, 'keep'), (1, 1, 'edit');", {"t": ["v"]}, "UPDATE t SET oid = 7 WHERE v = 'keep'",
     {("t", "update", 1)}),
    ("without-rowid-oid-column", "CREATE TABLE w (oid TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;",
     "INSERT INTO w VALUES ('a', 'x'), ('b', 'y');", {"w": ["v"]}, "DELETE FROM w WHERE oid = 'a'",
     {("w", "delete", ("a",))}),
    ("without-rowid-every-spelling", "CREATE TABLE w (rowid TEXT, oid TEXT, _rowid_ TEXT, v TEXT, "
     "PRIMARY KEY (rowid, oid)) WITHOUT ROWID;", "INSERT INTO w VALUES ('a', 'b', 'c', 'x'), ('d', 'e', 'f', 'y');",
     {"w": ["v"]}, "UPDATE w SET _rowid_ = 'z' WHERE v = 'y'", {("w", "update", ("d", "e"))}),
]


@pytest.mark.parametrize(("schema", "seed", "rules", "sql", "expected"), [s[1:] for s in SPELLINGS],
                         ids=[s[0] for s in SPELLINGS])
def test_columns_named_like_the_rowid(schema: str, seed: str, rules: dict[str, Any], sql: str,
                                      expected: Verdict) -> None:
    env = play(rules, [sql], schema=schema, seed=seed)
    assert verdict(env) == expected
    both(env)
    env.shutdown()
