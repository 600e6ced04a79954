"""``agentsynth pack new NAME [--from-schema db.sql]`` for SQL worlds.

Reads the CREATE TABLE statements (a .sql file, or the schema of a .db file) by
running them in an in-memory SQLite database, generates a few seed rows per table
(parents before children, so foreign keys hold), and writes starter tasks of
three kinds per table: a read-only lookup, a single-row update and a request
that must be refused (the row does not exist), with checkers and a working oracle.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from .world import DB_SUFFIXES, list_tables, quote

EXAMPLE_SCHEMA = """\
-- A starter world: edit it, then `agentsynth pack validate .`
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    status TEXT NOT NULL DEFAULT 'pending',
    total_cents INTEGER NOT NULL
);
"""

MAX_TABLES = 6
ROWS = 3


def read_schema(schema: Path | None) -> str:
    """The CREATE statements of a .sql file or a SQLite database file (or the example schema)."""
    if schema is None:
        return EXAMPLE_SCHEMA
    if not schema.is_file():
        raise ValueError(f"{schema}: file not found")
    if schema.suffix.lower() in DB_SUFFIXES:
        conn = sqlite3.connect(f"file:{schema}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
                                "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid").fetchall()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{schema}: not a readable SQLite database ({exc})") from None
        finally:
            conn.close()
        return ";\n".join(r[0] for r in rows) + ";\n"
    return schema.read_text(encoding="utf-8")


class _Table:
    def __init__(self, conn: sqlite3.Connection, name: str) -> None:
        self.name = name
        info = conn.execute(f"PRAGMA table_info({quote(name)})").fetchall()
        self.columns = [(c[1], (c[2] or "").upper(), bool(c[3]), c[4], int(c[5])) for c in info]
        self.pk = [c[0] for c in sorted((c for c in self.columns if c[4]), key=lambda c: c[4])]
        fks = conn.execute(f"PRAGMA foreign_key_list({quote(name)})").fetchall()
        self.fks = {f[3]: (f[2], f[4]) for f in fks}  # column -> (parent table, parent column)

    @property
    def parents(self) -> set[str]:
        return {p for p, _ in self.fks.values() if p != self.name}


def _affinity(decl: str) -> str:
    if "INT" in decl:
        return "int"
    if any(t in decl for t in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if any(t in decl for t in ("REAL", "FLOA", "DOUB")):
        return "real"
    if "BLOB" in decl:
        return "blob"
    if any(t in decl for t in ("NUM", "DEC", "BOOL", "DATE")):
        return "int" if "BOOL" in decl else "text" if "DATE" in decl else "real"
    return "text"


def _value(tables: dict[str, _Table], table: _Table, col: str, decl: str, i: int,
           rows: dict[str, list[dict[str, Any]]]) -> Any:
    if col in table.fks:
        parent, pcol = table.fks[col]
        parent_rows = rows.get(parent) or []
        if not parent_rows:
            return None
        if pcol is None and parent in tables and tables[parent].pk:
            pcol = tables[parent].pk[0]
        row = parent_rows[(i - 1) % len(parent_rows)]
        return row.get(pcol) if pcol else next(iter(row.values()))
    kind = _affinity(decl)
    if kind == "int":
        return i if col in table.pk else i * 10
    if kind == "real":
        return round(i * 1.5, 2)
    if kind == "blob":
        return None
    if "email" in col.lower():
        return f"{table.name}{i}@example.com"
    if "date" in col.lower() or "DATE" in decl or col.lower().endswith("_at"):
        return f"2026-01-{i:02d}"
    return f"{col}_{i}"


def _order(tables: dict[str, _Table]) -> list[str]:
    done: list[str] = []
    pending = sorted(tables)
    while pending:
        ready = [t for t in pending if tables[t].parents <= set(done) or not (tables[t].parents & set(tables))]
        if not ready:  # a cycle: take the rest in name order
            ready = pending
        for t in ready:
            done.append(t)
            pending.remove(t)
    return done


def build_world(schema_sql: str) -> tuple[sqlite3.Connection, dict[str, _Table], dict[str, list[dict[str, Any]]]]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    try:
        conn.executescript(schema_sql)
    except sqlite3.Error as exc:
        raise ValueError(f"the schema does not run in SQLite: {exc}") from None
    tables = {t: _Table(conn, t) for t in list_tables(conn)}
    if not tables:
        raise ValueError("the schema has no CREATE TABLE statement")
    rows: dict[str, list[dict[str, Any]]] = {}
    for k, name in enumerate(_order(tables)):
        table = tables[name]
        for i in range(1, ROWS + k + 1):  # a different count per table: one count task's answer fails the others
            row = {c: _value(tables, table, c, d, i, rows) for c, d, _nn, _dflt, _pk in table.columns}
            cols = ", ".join(quote(c) for c in row)
            marks = ", ".join("?" for _ in row)
            try:
                conn.execute(f"INSERT INTO {quote(name)} ({cols}) VALUES ({marks})", list(row.values()))
            except sqlite3.Error:
                continue  # a CHECK or UNIQUE constraint we could not guess: fewer seed rows
            rows.setdefault(name, []).append(row)
    return conn, tables, rows


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _where(table: _Table, row: dict[str, Any]) -> str:
    keys = table.pk or [c[0] for c in table.columns]
    return " AND ".join(f"{quote(k)} = {_literal(row[k])}" for k in keys)


def make_tasks(tables: dict[str, _Table], rows: dict[str, list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    tasks: list[dict[str, Any]] = []
    oracle: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(t for t in tables if rows.get(t))[:MAX_TABLES]:
        table, seeded = tables[name], rows[name]
        slug = name.lower().replace(" ", "_")
        count = len(seeded)
        # 1. a read-only lookup
        tid = f"count-{slug}"
        tasks.append({
            "id": tid, "tier": 1, "split": "train" if len(tasks) % 2 == 0 else "test",
            "instruction": f"How many rows does the {name} table have? Answer with the number.",
            "checkers": [{"type": "answer_number", "value": count}, {"type": "no_collateral"}],
        })
        oracle[tid] = [{"tool": "sql_query", "arguments": {"sql": f"SELECT count(*) FROM {quote(name)}"}},
                       {"answer": f"The {name} table has {count} rows."}]
        # 2. a single-row update of a plain column
        plain = [c for c in table.columns if c[0] not in table.pk and c[0] not in table.fks
                 and _affinity(c[1]) in ("text", "int", "real")]
        if plain:
            col, decl = plain[0][0], plain[0][1]
            row = seeded[0]
            new = f"{col}_updated" if _affinity(decl) == "text" else (row[col] or 0) + 7
            if "email" in col.lower():
                new = f"updated.{name}@example.com"
            where = _where(table, row)
            tid = f"update-{slug}-{col}".lower()
            tasks.append({
                "id": tid, "tier": 2, "split": "train" if len(tasks) % 2 == 0 else "test",
                "instruction": f"In {name}, set {col} to {new!r} for the row where {where}.",
                "environment": {"allowed_changes": {name: {"update": [col], "where": where}}},
                "checkers": [{"type": "sql", "query": f"SELECT {quote(col)} FROM {quote(name)} WHERE {where}",
                              "expect": new}],
            })
            oracle[tid] = [{"tool": "sql_execute", "arguments": {
                "sql": f"UPDATE {quote(name)} SET {quote(col)} = {_literal(new)} WHERE {where}"}},
                {"answer": f"Updated {col} to {new!r}."}]
        # 3. a request to refuse: the row does not exist, nothing may change
        if len(table.pk) == 1 and _affinity(next(c[1] for c in table.columns if c[0] == table.pk[0])) == "int":
            pk = table.pk[0]
            tid = f"refuse-delete-{slug}"
            tasks.append({
                "id": tid, "tier": 3, "split": "train" if len(tasks) % 2 == 0 else "test",
                "instruction": f"Delete the {name} row with {pk} 9999.",
                "checkers": [{"type": "no_collateral"}, {"type": "answer_contains", "text": "9999",
                                                         "regex": r"\b(not|no|doesn't|does not)\b", "max_chars": 300}],
            })
            oracle[tid] = [{"tool": "sql_query", "arguments": {
                "sql": f"SELECT count(*) FROM {quote(name)} WHERE {quote(pk)} = 9999"}},
                {"answer": f"There is no {name} row with {pk} 9999, so I did not change anything."}]
    return tasks, oracle


def seed_sql(tables: dict[str, _Table], rows: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["-- Generated seed rows: replace with realistic data."]
    for name in _order(tables):
        for row in rows.get(name, []):
            cols = ", ".join(quote(c) for c in row)
            vals = ", ".join(_literal(v) for v in row.values())
            lines.append(f"INSERT INTO {quote(name)} ({cols}) VALUES ({vals});")
    return "\n".join(lines) + "\n"


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value)  # JSON scalars are valid YAML


def render_pack(name: str, tasks: list[dict[str, Any]]) -> str:
    import yaml

    doc = {
        "id": name,
        "description": f"SQL tasks generated by `agentsynth pack new {name}`; edit the tasks, seed and oracle.",
        "environment": {"type": "sql", "schema": "schema.sql", "seed": "seed.sql"},
        "tasks": tasks,
    }
    return ("# Generated by `agentsynth pack new`. Check it with `agentsynth pack validate <this dir>`.\n"
            + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110))


def render_oracle(oracle: dict[str, list[dict[str, Any]]]) -> str:
    body = json.dumps(oracle, indent=4).replace("true", "True").replace("false", "False").replace("null", "None")
    return ('"""The scripted solution of every task (used by `--policy oracle` and `pack validate`)."""\n\n'
            f"ORACLE = {body}\n")


def scaffold(name: str, directory: Path, schema: Path | None) -> list[Path]:
    schema_sql = read_schema(schema)
    conn, tables, rows = build_world(schema_sql)
    conn.close()
    tasks, oracle = make_tasks(tables, rows)
    if not tasks:
        raise ValueError("could not generate any seed row (check the CHECK/UNIQUE constraints of the schema)")
    files = {
        "schema.sql": schema_sql if schema_sql.endswith("\n") else schema_sql + "\n",
        "seed.sql": seed_sql(tables, rows),
        "pack.yaml": render_pack(name, tasks),
        "oracle.py": render_oracle(oracle),
    }
    written = []
    for filename, text in files.items():
        path = directory / filename
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
