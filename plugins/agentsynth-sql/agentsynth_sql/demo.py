"""State checks for exactly what a demonstration changed (``agentsynth pack new --from-demo``).

The kernel plays the demonstration's actions in a fresh ``sql`` world and hands the world to
:func:`demo_checks`, which diffs the end state against the seed (the same diff the collateral
check uses) and writes:

- per table with updated rows: one ``sql`` check that those rows, found by primary key (or rowid),
  hold exactly their end values in every column (a second change to such a row fails too);
- per table with inserted rows: one ``sql`` check that rows with exactly those values exist, as
  many times as the demonstration left them;
- per table with deleted rows: one ``sql`` check that no row with their keys is left;
- per table the demonstration created: its columns and its rows, exactly;
- ``allowed_changes`` naming exactly those rows and columns, with the collateral check forced on
  and a ``no_collateral`` checker: a broader write (every row instead of one) fails.

Every value comes from the world's end state, not from the diff's shortened records, so long
strings and blobs are checked whole.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .world import SCHEMA_OPS, Change, CheckBudgetExceeded, quote

MAX_CHANGES = 1000  # row changes one demonstration may make (each becomes part of a check)
CHUNK = 200  # rows per check (SQLite's expression depth stays far from its limit)


def literal(value: Any) -> str:
    """``value`` as an SQLite literal that compares equal (with IS) to the stored value."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "9e999" if value > 0 else "-9e999"
        return repr(value)
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    return "'" + str(value).replace("'", "''") + "'"


def _same(row: dict[str, Any], columns: list[str]) -> str:
    return " AND ".join(f"{quote(c)} IS {literal(row[c])}" for c in columns)


def _any_of(conditions: list[str]) -> str:
    return " OR ".join(f"({c})" for c in conditions) if len(conditions) > 1 else conditions[0]


def _keys(column: str, values: list[Any]) -> str:
    """``column IN (...)`` for plain keys, else an OR of IS conditions."""
    if all(isinstance(v, int | str) and not isinstance(v, bool) for v in values):
        return f"{column} IN ({', '.join(literal(v) for v in values)})"
    return _any_of([f"{column} IS {literal(v)}" for v in values])


class _Table:
    """What one table's checks need: columns, primary key, how to find a row."""

    def __init__(self, env: Any, name: str) -> None:
        self.name = name
        info = env.query(f"PRAGMA table_info({quote(name)})")
        self.columns = [r[1] for r in info]
        self.pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        self.select = ", ".join(quote(c) for c in self.columns)

    def identity(self, rows: list[dict[str, Any]], rowids: list[Any]) -> str:
        """A condition matching exactly these rows: by primary key, else by rowid."""
        if len(self.pk) == 1:
            return _keys(quote(self.pk[0]), [r[self.pk[0]] for r in rows])
        if self.pk:
            return _any_of([_same(r, self.pk) for r in rows])
        return _keys("rowid", rowids)

    def exactly(self, rows: list[dict[str, Any]]) -> str:
        """A condition matching rows with exactly these values in every column."""
        return _any_of([_same(r, self.columns) for r in rows])


def _chunks(items: list[Any]) -> list[list[Any]]:
    return [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]


def demo_checks(env: Any) -> dict[str, Any]:
    """The ``checks_from_demo`` answer for a played ``sql`` world (see the module docstring)."""
    try:
        changes: list[Change] = env.changes()
    except CheckBudgetExceeded as exc:
        raise ValueError(f"the demonstration's changes could not be diffed: {exc}") from None
    notes = list(env.notes)
    schema = [c for c in changes if c.op in SCHEMA_OPS or c.op == "drop_table"]
    if schema:
        shown = "; ".join(c.describe() for c in schema[:5])
        raise ValueError(f"the demonstration changed the schema ({shown}): --from-demo writes checks for rows "
                         "inserted, updated and deleted and for tables created; write a schema check by hand")
    rows = [c for c in changes if c.op in ("insert", "update", "delete")]
    if len(rows) > MAX_CHANGES:
        raise ValueError(f"the demonstration changed {len(rows):,} rows, more than {MAX_CHANGES:,}: a check per "
                         "changed row would not be readable; demonstrate on a smaller world")
    if not changes:
        return {"changes": 0, "checkers": [{"type": "no_collateral"}],
                "environment": {"allowed_changes": {}, "collateral": True}, "summary": [], "notes": notes}
    snap = env.snapshot
    created = {c.table for c in changes if c.op == "create_table"}
    by_table: dict[str, list[Change]] = defaultdict(list)
    for change in rows:
        by_table[change.table].append(change)
    checkers: list[dict[str, Any]] = []
    allowed: dict[str, Any] = {}
    for name in sorted(created):
        table = _Table(env, name)
        end_rows = env.query(f"SELECT {table.select} FROM {quote(name)}")
        checkers.append({"type": "sql", "query": f"SELECT name FROM pragma_table_info({literal(name)}) ORDER BY cid",
                         "expect": table.columns, "ordered": True})
        checkers.append({"type": "sql", "query": f"SELECT {table.select} FROM {quote(name)}",
                         "expect": [list(r) for r in end_rows]})
        allowed[name] = "*"
    for name in sorted(set(by_table) - created):
        table = _Table(env, name)
        start_cols = snap.columns[name]
        start_state = snap.state[name]

        def start_row(key: Any) -> dict[str, Any]:
            return dict(zip(start_cols, start_state[key], strict=False))  # noqa: B023 (used in this loop)

        def end_row(key: Any) -> dict[str, Any]:
            if isinstance(key, tuple):  # WITHOUT ROWID: keyed by the primary key, in column order
                pk_cols = [c for c in table.columns if c in table.pk]  # noqa: B023
                where = _same(dict(zip(pk_cols, key, strict=True)), pk_cols)
            else:
                where = f"rowid = {int(key)}"
            found = env.query(f"SELECT {table.select} FROM {quote(name)} WHERE {where}")  # noqa: B023
            return dict(zip(table.columns, found[0], strict=True))  # noqa: B023

        ops = defaultdict(list)
        for change in by_table[name]:
            ops[change.op].append(change)
        rule: dict[str, Any] = {}
        where: list[str] = []
        rowid_key = lambda c: None if isinstance(c.key, tuple) else c.key  # noqa: E731
        updated = ops.get("update", [])
        for part in _chunks(updated):
            ends = [end_row(c.key) for c in part]
            ident = table.identity(ends, [rowid_key(c) for c in part])
            query = f"SELECT {table.select} FROM {quote(name)} WHERE {ident}"
            checkers.append({"type": "sql", "query": query, "expect": [list(r) for r in env.query(query)]})
            where.append(table.identity([start_row(c.key) for c in part], [rowid_key(c) for c in part]))
        if updated:
            rule["update"] = sorted({col for c in updated for col in c.columns})
        deleted = ops.get("delete", [])
        for part in _chunks(deleted):
            ident = table.identity([start_row(c.key) for c in part], [rowid_key(c) for c in part])
            query = f"SELECT count(*) FROM {quote(name)} WHERE {ident}"
            checkers.append({"type": "sql", "query": query, "expect": env.query(query)[0][0]})
            where.append(ident)
        if deleted:
            rule["delete"] = True
        inserted = ops.get("insert", [])
        for part in _chunks(inserted):
            ends = [end_row(c.key) for c in part]
            exact = table.exactly(ends)
            query = f"SELECT {table.select} FROM {quote(name)} WHERE {exact}"
            checkers.append({"type": "sql", "query": query, "expect": [list(r) for r in env.query(query)]})
            where.append(exact)
        if inserted:
            rule["insert"] = True
        rule["where"] = _any_of(where)
        allowed[name] = rule
    checkers.append({"type": "no_collateral"})
    return {"changes": len(changes), "checkers": checkers,
            "environment": {"allowed_changes": allowed, "collateral": True},
            "summary": [c.describe() for c in changes], "notes": notes}
