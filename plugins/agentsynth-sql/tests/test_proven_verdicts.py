"""The collateral check's proofs give the verdict reading every changed row gives.

``SqlEnvironment.unexpected_changes`` does not read the rows of a table when the row log and the
authorizer prove its changes allowed (updates in place, of columns the rule allows, on rows its
``where`` matched at the start). Whatever the agent runs, the unexpected changes it reports must be
exactly those of the whole diff judged by the rules: random write scripts under random rules, and
the ways an agent could change a column no UPDATE of its names (an upsert, a foreign-key action, a
generated column, a rowid move).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from test_diff_paths import SCHEMA, SEED, WRITES

from agentsynth_kernel import ToolCall
from agentsynth_sql.env import SqlEnvironment, SqlEnvSpec

PRICED = """
CREATE TABLE priced (id INTEGER PRIMARY KEY, qty INTEGER, price REAL,
                     total REAL GENERATED ALWAYS AS (qty * price) STORED);
"""
SCHEMA_ALL = SCHEMA + PRICED
SEED_ALL = SEED + "\n" + "\n".join(f"INSERT INTO priced (id, qty, price) VALUES ({i}, {i}, 1.5);" for i in range(1, 7))
WRITES_ALL = (*WRITES,
              "UPDATE priced SET qty = qty + 1 WHERE id = {n}",
              "UPDATE priced SET price = 2.5 WHERE id = {m}",
              "UPDATE items SET name = 'n{k}' WHERE id > {n}",
              "UPDATE items SET qty = qty + 2, price = 1 WHERE id <= {k}",
              "UPDATE pets SET name = 'q{k}' WHERE owner = {k} % 4 + 1")
COLUMNS = {
    "items": ("id", "name", "qty", "price", "pic"), "log": ("id", "item", "what"), "loose": ("a", "b"),
    "tags": ("item", "tag"), "owners": ("id", "name"), "pets": ("id", "owner", "name"),
    "spare": ("id", "name", "qty", "price", "pic"), "priced": ("id", "qty", "price"),
}
WHERES = {"tags": ("item <= 3", "tag = 't1'"), "loose": ("b < 4", "rowid % 2 = 0")}


def random_rules(rng: random.Random) -> dict[str, Any]:
    rules: dict[str, Any] = {}
    for table, columns in COLUMNS.items():
        form = rng.randrange(6)
        if form == 0:
            continue  # no change allowed
        some = rng.sample(columns, rng.randint(1, min(3, len(columns))))
        where = rng.choice(WHERES.get(table, ("id <= 6", "id % 2 = 0", "rowid > 3")))
        if form == 1:
            rules[table] = "*"
        elif form == 2:
            rules[table] = some
        elif form == 3:
            rules[table] = {"update": some if rng.random() < 0.7 else "*", "where": where}
        elif form == 4:
            rules[table] = {"insert": True, "update": some}
        else:
            rules[table] = {"delete": True, "update": some, "where": where}
    return rules


def judged(env: SqlEnvironment, *, proofs: bool) -> list[dict[str, Any]]:
    """The unexpected changes, with the proofs or judging the whole diff."""
    env._unexpected = None
    env._changes = None
    if not proofs:
        env._proven = lambda: (frozenset(), False, 0)  # type: ignore[method-assign]
    try:
        return [c.to_dict() for c in env.unexpected_changes()]
    finally:
        env.__dict__.pop("_proven", None)


def play(rules: dict[str, Any], script: list[str]) -> SqlEnvironment:
    env = SqlEnvironment(SqlEnvSpec(schema=SCHEMA_ALL, seed=SEED_ALL, allowed_changes=rules))
    env.start(0)
    for sql in script:
        env.run(ToolCall("sql_execute", {"sql": sql}))  # a constraint error is fine: the world is what it is
    return env


@pytest.mark.parametrize("seed", range(150))
def test_the_proofs_judge_as_the_whole_diff_does(seed: int) -> None:
    rng = random.Random(seed)
    rules = random_rules(rng)
    script = [rng.choice(WRITES_ALL).format(n=rng.randint(1, 12), m=rng.randint(1, 12), k=rng.randint(0, 7),
                                            big=rng.randint(10_000, 20_000)) for _ in range(rng.randint(1, 4))]
    env = play(rules, script)
    fast = judged(env, proofs=True)
    assert fast == judged(env, proofs=False), (rules, script)
    env.shutdown()


def test_the_proofs_are_taken_in_the_common_case() -> None:
    """Updates of allowed columns on rows the rule's where matched: proven, nothing read."""
    env = play({"items": {"update": ["qty"], "where": "id <= 6"}, "owners": ["name"]},
               ["UPDATE items SET qty = qty + 1 WHERE id IN (2, 5)", "UPDATE owners SET name = 'x' WHERE id = 3"])
    env.end_state()
    assert env._proven() == ({"items", "owners"}, True, 3)
    assert env.unexpected_changes() == []
    assert env._changes is None  # no row was read for the verdict
    assert [(c.table, c.key, c.columns) for c in env.changes()] == [
        ("items", 2, ("qty",)), ("items", 5, ("qty",)), ("owners", 3, ("name",))]
    env.shutdown()


ATTACKS = [
    # an upsert's DO UPDATE sets a column no UPDATE authorization names
    ({"items": {"insert": True, "update": ["name"]}},
     ["UPDATE items SET name = 'a' WHERE id = 1",
      "INSERT INTO items (id, name, qty) VALUES (2, 'b', 1) ON CONFLICT(id) DO UPDATE SET qty = 999"],
     {("items", "update", 2)}),
    # the foreign key's ON UPDATE CASCADE rewrites pets.owner, which only owners' rule allows
    ({"owners": "*", "pets": ["name"]},
     ["UPDATE pets SET name = 'n' WHERE id = 1", "UPDATE owners SET id = 40 WHERE id = 1"],
     {("pets", "update", 1), ("pets", "update", 5), ("pets", "update", 9)}),
    # a stored generated column follows qty
    ({"priced": ["qty"]}, ["UPDATE priced SET qty = 9 WHERE id = 2"], {("priced", "update", 2)}),
    # the allowed column, on a row the where did not match at the start
    ({"items": {"update": ["qty"], "where": "id <= 3"}}, ["UPDATE items SET qty = 0 WHERE id = 4"],
     {("items", "update", 4)}),
    # a row moved to another rowid: a delete and an insert, not an update of id
    ({"items": ["id", "qty"]}, ["UPDATE items SET id = 99 WHERE id = 3"],
     {("items", "delete", 3), ("items", "insert", 99)}),
    # REPLACE deletes the conflicting row
    ({"owners": ["name"]}, ["UPDATE OR REPLACE owners SET name = 'o2' WHERE id = 1"], {("owners", "delete", 2)}),
]


@pytest.mark.parametrize(("rules", "script", "expected"), ATTACKS,
                         ids=["upsert", "fk-cascade", "generated", "outside-where", "rowid-move", "replace"])
def test_a_change_no_update_names_is_still_caught(rules: dict[str, Any], script: list[str],
                                                  expected: set[tuple[str, str, Any]]) -> None:
    env = play(rules, script)
    got = {(c.table, c.op, c.key) for c in env.unexpected_changes()}
    assert expected <= got, got
    assert judged(env, proofs=True) == judged(env, proofs=False)
    env.shutdown()
