"""The ``sql`` environment: a private, seeded SQLite world per episode.

Tools: ``sql_query`` (read only) and ``sql_execute`` (writes, DDL, transactions).
The agent's SQL runs under :class:`~agentsynth_sql.world.Sandbox`; a bad, denied
or runaway statement becomes an error observation. Checkers read the end state
through :meth:`SqlEnvironment.query` and :meth:`SqlEnvironment.unexpected_changes`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import Observation, ToolCall, ToolSpec
from agentsynth_kernel.spec import InvalidValue

from .world import (
    AllowedChanges,
    Change,
    Sandbox,
    Snapshot,
    diff_states,
    keyed,
    open_copy,
    scan,
    snapshot_for,
    split_statements,
    table_columns,
    table_state,
)


def _check_allowed(instance: Any, attribute: Any, value: dict[str, Any]) -> None:
    try:
        AllowedChanges(value)
    except ValueError as exc:
        raise InvalidValue(str(exc)) from None


def _positive(instance: Any, attribute: Any, value: int) -> None:
    if value < 1:
        raise InvalidValue(f"{attribute.name}: must be at least 1, got {value}")


@attrs.frozen
class SqlEnvSpec:
    """Parameters of ``environment: {type: sql, ...}``.

    ``schema`` and ``seed`` are SQL text or a ``.sql`` file; ``seed`` may also be a
    SQLite file (``.db``/``.sqlite``) used as the starting database. Relative paths
    are resolved against the pack directory. ``allowed_changes`` lists what the
    task may change (see :class:`~agentsynth_sql.world.AllowedChanges`); anything
    else fails the collateral-damage check, which is on unless ``collateral: false``.
    """

    schema: str | None = None
    seed: str | None = None
    row_limit: int = attrs.field(default=50, validator=_positive)
    query_budget: int = attrs.field(default=2_000_000, validator=_positive)
    allowed_changes: dict[str, Any] = attrs.field(factory=dict, validator=_check_allowed)
    collateral: bool = True
    foreign_keys: bool = True
    intro: str = ""
    max_cell_chars: int = attrs.field(default=200, validator=_positive)

    def __attrs_post_init__(self) -> None:
        if self.schema is None and self.seed is None:
            raise InvalidValue("give 'schema' (SQL text or a .sql file) and/or 'seed' (SQL, .sql or a .db file)")


_SQL_PARAMS = {
    "type": "object",
    "properties": {
        "sql": {"type": "string", "description": "SQLite SQL. Several statements may be separated by ';'."},
        "params": {
            "type": "array", "items": {"type": ["string", "number", "integer", "boolean", "null"]},
            "description": "Values for '?' placeholders (only with a single statement).",
        },
    },
    "required": ["sql"],
}


class SqlEnvironment:
    """One episode's SQLite world (see the module docstring)."""

    def __init__(self, spec: SqlEnvSpec | None = None, base_dir: Path | None = None, **params: Any) -> None:
        self.spec = spec if spec is not None else SqlEnvSpec(**params)
        self.base_dir = base_dir
        self.allowed = AllowedChanges(self.spec.allowed_changes)
        self.sandbox = Sandbox(self.spec.query_budget)
        self.snapshot: Snapshot | None = None
        self.conn: sqlite3.Connection | None = None
        self.notes: list[str] = []
        self.collateral_reported = False
        self._start_marks: tuple[int, int] = (0, 0)
        self._changes: list[Change] | None = None
        self._unexpected: list[Change] | None = None
        self._settled = False

    # --- Environment protocol ------------------------------------------------------------------
    # Async on purpose: every call is short (an in-memory database; a statement is bounded by the
    # query budget), so it runs on the event loop directly instead of paying a thread handoff per
    # call. The sync twins below are what they run (and what tests and scripts call).

    async def reset(self, seed: int) -> Observation:
        return self.start(seed)

    async def tools(self) -> list[ToolSpec]:
        return self.tool_specs()

    async def step(self, call: ToolCall) -> Observation:
        return self.run(call)

    async def close(self) -> None:
        self.shutdown()

    # --- the same, synchronously ---------------------------------------------------------------

    def start(self, seed: int) -> Observation:
        """Reset: a fresh private copy of the seeded world."""
        self.shutdown()
        s = self.spec
        self.snapshot = snapshot_for(s.schema, s.seed, base_dir=self.base_dir, foreign_keys=s.foreign_keys)
        # not bound to one thread: a sync checker of another plugin may read it from the episode's worker
        self.conn = open_copy(self.snapshot, foreign_keys=s.foreign_keys, check_same_thread=False)
        self.allowed.check_against(self.snapshot, self.conn)
        self._start_marks = (self.conn.total_changes, self.snapshot.schema_version)
        self.sandbox.written = set()
        self._changes = self._unexpected = None
        self._settled, self.collateral_reported, self.notes = False, False, []
        text = f"A SQLite database. Tables:\n{self.snapshot.schema_text}"
        if s.intro:
            text = f"{s.intro}\n\n{text}"
        return Observation(text, data={"tables": list(self.snapshot.tables)})

    def tool_specs(self) -> list[ToolSpec]:
        return [
            ToolSpec("sql_query", "Run a read-only SQL query (SELECT, PRAGMA table_info ...) and see the rows.",
                     _SQL_PARAMS),
            ToolSpec("sql_execute", "Run SQL that changes the database (INSERT, UPDATE, DELETE, DDL, "
                     "BEGIN/COMMIT). Statements autocommit unless you open a transaction.", _SQL_PARAMS),
        ]

    def run(self, call: ToolCall) -> Observation:
        """One tool call; every failure is an error observation."""
        if self.conn is None:
            return Observation("error: the world is not running (reset first)", error=True)
        if call.name not in ("sql_query", "sql_execute"):
            return Observation(f"error: unknown tool {call.name!r}", error=True)
        sql, params = call.arguments.get("sql"), call.arguments.get("params")
        if not isinstance(sql, str) or not sql.strip():
            return Observation("error: 'sql' must be a non-empty string", error=True)
        if params is not None and not isinstance(params, list):
            return Observation("error: 'params' must be a list", error=True)
        self._changes = self._unexpected = None
        self._settled = False
        return self._run(sql, params, readonly=call.name == "sql_query")

    def shutdown(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # --- running the agent's SQL ---------------------------------------------------------------

    def _run(self, sql: str, params: list[Any] | None, *, readonly: bool) -> Observation:
        assert self.conn is not None
        statements = split_statements(sql)
        if not statements:
            return Observation("error: no SQL statement given", error=True)
        if params and len(statements) > 1:
            return Observation("error: 'params' can only be used with a single statement", error=True)
        outputs: list[str] = []
        data: list[dict[str, Any]] = []
        for index, stmt in enumerate(statements):
            self.sandbox.arm(self.conn, readonly)
            try:
                cur = self.conn.execute(stmt, params or ())
                rows = cur.fetchmany(self.spec.row_limit + 1) if cur.description else None
            except (sqlite3.Error, OverflowError, ValueError) as exc:
                prefix = f"statement {index + 1} of {len(statements)}: " if len(statements) > 1 else ""
                done = f" (statements 1-{index} were applied)" if index else ""
                return Observation(f"error: {prefix}{self._explain(exc)}{done}", error=True,
                                   data={"results": data, "failed_statement": index})
            finally:
                self.sandbox.disarm(self.conn)
            if rows is None:
                count = cur.rowcount
                outputs.append(f"ok: {count} row(s) affected" if count >= 0 else "ok")
                data.append({"rowcount": count})
            else:
                columns = [d[0] for d in cur.description]
                outputs.append(self._render(columns, rows))
                shown = rows[: self.spec.row_limit]
                data.append({"columns": columns, "rows": [list(r) for r in shown],
                             "truncated": len(rows) > self.spec.row_limit})
        return Observation("\n\n".join(outputs), data=data[0] if len(data) == 1 else {"results": data})

    def _explain(self, exc: BaseException) -> str:
        if self.sandbox.denied:
            return f"denied: {self.sandbox.denied}"
        if self.sandbox.interrupted:
            return (f"interrupted: the statement exceeded its budget of {self.spec.query_budget:,} SQLite steps "
                    "(a runaway query? add a LIMIT or a WHERE)")
        return f"{type(exc).__name__}: {exc}" if not isinstance(exc, sqlite3.Error) else str(exc)

    def _cell(self, value: Any) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, bytes):
            return f"<{len(value)} bytes>"
        text = str(value)
        limit = self.spec.max_cell_chars
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def _render(self, columns: list[str], rows: list[tuple[Any, ...]]) -> str:
        limit = self.spec.row_limit
        lines = [" | ".join(columns)]
        lines += [" | ".join(self._cell(v) for v in row) for row in rows[:limit]]
        if len(rows) > limit:
            lines.append(f"(first {limit} rows shown; narrow the query with WHERE/LIMIT to see more)")
        else:
            lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
        return "\n".join(lines)

    # --- what checkers use ---------------------------------------------------------------------

    def _marks(self) -> tuple[int, int]:
        assert self.conn is not None
        return (self.conn.total_changes, self.conn.execute("PRAGMA schema_version").fetchone()[0])

    def settle(self) -> None:
        """End the agent's session: an open transaction is rolled back, as a real server would."""
        if self._settled or self.conn is None:
            return
        self._settled = True
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
            self.notes.append("an open transaction was rolled back at the end of the episode (never committed)")

    def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Rows of a checker's query on the end state (not sandboxed: checkers are trusted)."""
        if self.conn is None:
            raise RuntimeError("the world is closed")
        self.settle()
        return self.conn.execute(sql, params).fetchall()

    def changes(self) -> list[Change]:
        """Every row-level change between the start and the end state."""
        if self._changes is None:
            assert self.conn is not None and self.snapshot is not None
            self.settle()
            snap = self.snapshot
            total, schema_version = self._marks()
            if (total, schema_version) == self._start_marks:
                self._changes = []
            elif schema_version == self._start_marks[1] and not snap.has_triggers:
                # Same tables and columns: only the tables the agent wrote (and their FK dependents) can differ.
                start, end = {}, {}
                for table in sorted(snap.affected(self.sandbox.written) & set(snap.tables)):
                    rows, pk = scan(self.conn, table)
                    if rows != snap.scans[table]:  # one C-level comparison for an untouched table
                        start[table], end[table] = snap.state[table], keyed(rows, pk)
                self._changes = diff_states(start, end, snap.columns, snap.columns)
            else:
                end = table_state(self.conn)
                cols = {t: table_columns(self.conn, t) for t in end}
                self._changes = diff_states(snap.state, end, snap.columns, cols)
        return self._changes

    def unexpected_changes(self) -> list[Change]:
        """The changes ``allowed_changes`` does not cover: collateral damage."""
        if self._unexpected is None:
            changes = self.changes()
            opened: list[sqlite3.Connection] = []

            def start() -> sqlite3.Connection:
                assert self.snapshot is not None
                opened.append(open_copy(self.snapshot))
                return opened[-1]

            try:
                assert self.conn is not None
                self._unexpected = (self.allowed.violations(changes, start, self.conn, self.snapshot.start_keys)
                                    if changes else [])
            finally:
                for conn in opened:
                    conn.close()
        return self._unexpected
