"""The ``sql`` environment: a private, seeded SQLite world per episode.

Tools: ``sql_query`` (read only) and ``sql_execute`` (writes, DDL, transactions).
The agent's SQL runs under :class:`~agentsynth_sql.world.Sandbox`; a bad, denied
or runaway statement becomes an error observation. Checkers read the end state
through :meth:`SqlEnvironment.query` and :meth:`SqlEnvironment.unexpected_changes`.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import InvalidValue, Observation, ToolCall, ToolSpec

from .world import (
    ANYTHING,
    AllowedChanges,
    Change,
    CheckBudget,
    CheckBudgetExceeded,
    RowLog,
    Sandbox,
    Snapshot,
    cap_size,
    catalog,
    diff_states,
    end_copy,
    keyed,
    list_tables,
    open_copy,
    paired_changes,
    pristine,
    quote,
    rows_by_rowid,
    scan,
    schema_changes,
    snapshot_for,
    split_statements,
    table_columns,
    unwatch_rows,
    watch_rows,
)


def _check_allowed(instance: Any, attribute: Any, value: dict[str, Any]) -> None:
    try:
        _allowed_for(value)  # parsed once per mapping: every episode of a task builds its spec again
    except ValueError as exc:
        raise InvalidValue(str(exc)) from None


def _positive(instance: Any, attribute: Any, value: int) -> None:
    if value < 1:
        raise InvalidValue(f"{attribute.name}: must be at least 1, got {value}")


def _above_zero(instance: Any, attribute: Any, value: float) -> None:
    if not value > 0:
        raise InvalidValue(f"{attribute.name}: must be more than 0, got {value}")


_allowed_cache: dict[int, tuple[dict[str, Any], AllowedChanges]] = {}


def _allowed_for(spec: dict[str, Any]) -> AllowedChanges:
    """The parsed rules of an ``allowed_changes`` mapping, parsed once per mapping: a task's spec is
    one object for all its episodes (the rules are never changed after parsing)."""
    cached = _allowed_cache.get(id(spec))
    if cached is None or cached[0] is not spec:
        if len(_allowed_cache) > 4096:
            _allowed_cache.clear()
        cached = _allowed_cache[id(spec)] = (spec, AllowedChanges(spec))
    return cached[1]


@attrs.frozen
class SqlEnvSpec:
    """Parameters of ``environment: {type: sql, ...}``.

    ``schema`` and ``seed`` are SQL text or a ``.sql`` file; ``seed`` may also be a
    SQLite file (``.db``/``.sqlite``) used as the starting database. Relative paths
    are resolved against the pack directory. ``allowed_changes`` lists what the
    task may change (see :class:`~agentsynth_sql.world.AllowedChanges`); anything
    else fails the collateral-damage check, which is on unless ``collateral: false``.

    Limits (what bounds an episode whatever the agent runs): ``query_budget`` SQLite steps per
    agent statement and per checker query; ``max_db_bytes`` for the database (and for the
    agent's temp tables); ``max_observation_bytes`` per tool result; ``check_budget`` steps
    for the collateral diff, ``check_seconds`` for all the checks of an episode, and at most
    ``max_changes`` changed rows per table before the diff gives up (the task fails);
    ``statement_memory`` bytes SQLite may add while one statement or checker query runs
    (checked every 100 VM steps, so one value is capped at ``max_value_bytes``).
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
    max_db_bytes: int = attrs.field(default=64 * 1024 * 1024, validator=_positive)
    max_observation_bytes: int = attrs.field(default=64_000, validator=_positive)
    check_budget: int = attrs.field(default=20_000_000, validator=_positive)
    check_seconds: float = attrs.field(default=10.0, validator=_above_zero)
    max_changes: int = attrs.field(default=10_000, validator=_positive)
    statement_memory: int = attrs.field(default=64 * 2**20, validator=_positive)
    max_value_bytes: int = attrs.field(default=1_000_000, validator=_positive)

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
        self.allowed = _allowed_for(self.spec.allowed_changes)
        self.sandbox = Sandbox(self.spec.query_budget, self.spec.statement_memory)
        self.snapshot: Snapshot | None = None
        self.conn: sqlite3.Connection | None = None
        self.notes: list[str] = []
        self.collateral_reported = False
        self._start_marks: tuple[int, int] = (0, 0)
        self._changes: list[Change] | None = None
        self.rows: RowLog | None = None  # the rows the agent's statements changed (see world.RowLog)
        self._unexpected: list[Change] | None = None
        self._settled = False
        self.budget = CheckBudget(self.spec.check_seconds, self.spec.statement_memory)
        self._end: sqlite3.Connection | None = None  # what checkers read (see end_state)
        self._end_owned = False  # _end is a copy of ours (else the start snapshot or the live connection)
        self._end_live = False  # _end is the agent's own connection, made read-only for the checks
        self._agent_length = 0  # the agent's value-length limit, lifted while the checks read its connection
        self._end_catalog: frozenset[Any] = frozenset()
        self._check_lock = threading.Lock()
        self._capped = False
        self._diff_error: str | None = None
        self.grown = False

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
        if self.conn is not None or self._end is not None:
            self.shutdown()
        s = self.spec
        self.snapshot = snapshot_for(s.schema, s.seed, base_dir=self.base_dir, foreign_keys=s.foreign_keys)
        # not bound to one thread: a sync checker of another plugin may read it from the episode's worker
        self.conn = open_copy(self.snapshot, foreign_keys=s.foreign_keys, check_same_thread=False,
                              max_value=s.max_value_bytes)
        self.rows = None  # logged from the first writing call on (_cap_size)
        self._capped = False  # the size cap and the row log are set before the agent's first writing call
        self.allowed.check_against(self.snapshot, self.conn)
        self._start_marks = (self.conn.total_changes, self.snapshot.schema_version)
        self.sandbox.new_episode()
        if self.budget.deadline is not None or self.budget.cancelled:  # used: the checks of a new episode get their own
            self.budget = CheckBudget(s.check_seconds, s.statement_memory)
        self._changes = self._unexpected = None
        self._diff_error: str | None = None
        self.grown = False
        self._settled, self.collateral_reported, self.notes = False, False, []
        text = f"A SQLite database. Tables:\n{self.snapshot.schema_text}"
        if s.intro:
            text = f"{s.intro}\n\n{text}"
        return Observation(text, data={"tables": list(self.snapshot.tables)})

    def tool_specs(self) -> list[ToolSpec]:
        return [
            ToolSpec("sql_query", "Run a read-only SQL query (SELECT, PRAGMA table_info ...) and see the rows.",
                     _SQL_PARAMS, read_only=True),
            ToolSpec("sql_execute", "Run SQL that changes the database (INSERT, UPDATE, DELETE, DDL, "
                     "BEGIN/COMMIT). Statements autocommit unless you open a transaction.", _SQL_PARAMS,
                     read_only=False),
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
        if self._end is not None or self._changes is not None:  # checked already: the next check sees this call
            self._drop_end_state()
            self.budget = CheckBudget(self.spec.check_seconds, self.spec.statement_memory)
        self._changes = self._unexpected = self._diff_error = None
        self._settled = False
        return self._run(sql, params, readonly=call.name == "sql_query")

    def shutdown(self) -> None:
        self._drop_end_state(closing=True)
        if self.conn is not None:
            if self.rows is not None:
                unwatch_rows(self.rows)
            self.conn.close()
            self.conn = None

    def _drop_end_state(self, closing: bool = False) -> None:
        """Close the checkers' connection; a check still running on another thread (after an
        episode timeout) is interrupted and closes it itself."""
        self.budget.cancelled = True
        if self._check_lock.acquire(blocking=False) or self._check_lock.acquire(timeout=30):
            try:
                if self._end is not None and self._end_owned:
                    self._end.close()
                if self._end_live and self.conn is not None and not closing:  # the agent goes on: its rules
                    self.conn.execute("PRAGMA query_only = OFF")
                    self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self._agent_length)
                self._end, self._end_owned, self._end_live = None, False, False
            finally:
                self._check_lock.release()

    # --- running the agent's SQL ---------------------------------------------------------------

    def _run(self, sql: str, params: list[Any] | None, *, readonly: bool) -> Observation:
        assert self.conn is not None
        statements = split_statements(sql)
        if not statements:
            return Observation("error: no SQL statement given", error=True)
        if params and len(statements) > 1:
            return Observation("error: 'params' can only be used with a single statement", error=True)
        if not self._capped and not readonly:  # a read-only call cannot grow the database
            self._cap_size()
        outputs: list[str] = []
        data: list[dict[str, Any]] = []
        room = self.spec.max_observation_bytes  # what this observation may still hold (text and data)
        sandbox, conn = self.sandbox, self.conn
        sandbox.arm(conn, readonly)  # once per call: the handlers stay; each statement gets its own budget
        try:
            for index, stmt in enumerate(statements):
                if index:
                    sandbox.next_statement()
                try:
                    try:
                        cur = conn.execute(stmt, params or ())
                    except sqlite3.DatabaseError:
                        if not sandbox.temp_needed:
                            raise
                        # denied at prepare time (nothing ran) because it is the first use of the temp
                        # schema: cap that, then prepare it again
                        sandbox.disarm(conn)
                        self._cap_temp()
                        sandbox.arm(conn, readonly)
                        cur = conn.execute(stmt, params or ())
                    rows, cut, size = self._fetch(cur, room) if cur.description else (None, False, 0)
                except (sqlite3.Error, OverflowError, ValueError, MemoryError) as exc:
                    prefix = f"statement {index + 1} of {len(statements)}: " if len(statements) > 1 else ""
                    done = f" (statements 1-{index} were applied)" if index else ""
                    return Observation(f"error: {prefix}{self._explain(exc)}{done}", error=True,
                                       data={"results": data, "failed_statement": index})
                if rows is None:
                    count = cur.rowcount
                    outputs.append(f"ok: {count} row(s) affected" if count >= 0 else "ok")
                    data.append({"rowcount": count})
                else:
                    room -= size
                    columns = [d[0] for d in cur.description]
                    outputs.append(self._render(columns, rows, cut))
                    data.append({"columns": columns, "rows": [list(r) for r in rows], "truncated": cut})
                room -= len(outputs[-1])
        finally:
            sandbox.disarm(conn)
        text = "\n\n".join(outputs)
        limit = self.spec.max_observation_bytes
        if len(text) > limit:
            text = text[:limit] + f"\n... (output cut at {limit:,} characters)"
        return Observation(text, data=data[0] if len(data) == 1 else {"results": data})

    def _cap_size(self) -> None:
        """The database (and the temp tables) may not grow past max_db_bytes, and the rows the agent
        changes are logged. Set before the first writing call, not at reset: a read-only episode needs
        neither (and the PRAGMA, where the in-memory file's limit cannot be set, parses the schema)."""
        assert self.conn is not None and self.snapshot is not None
        pages = max(1, self.spec.max_db_bytes // self.snapshot.page_size)
        if not cap_size(self.conn, pages * self.snapshot.page_size):  # the in-memory file's own limit
            # the agent cannot run PRAGMAs; executescript: no cursor for a row nobody reads (and no open
            # transaction to commit: this runs before the agent's first statement)
            self.conn.executescript(f"PRAGMA main.max_page_count = {pages}")
        self.rows = watch_rows(self.conn, self.spec.max_changes)  # only sql_execute can change a row
        self._capped = True
        self.sandbox.temp_guard = True  # the temp schema is capped when a statement first uses it

    def _cap_temp(self) -> None:
        """The same cap on the temp database, set when a statement first creates something there
        (opening the temp database costs more than most episodes' statements)."""
        assert self.conn is not None and self.snapshot is not None
        pages = max(1, self.spec.max_db_bytes // self.snapshot.page_size)
        self.conn.execute(f"PRAGMA temp.max_page_count = {pages}")
        self.sandbox.temp_guard = self.sandbox.temp_needed = False

    def _fetch(self, cur: sqlite3.Cursor, room: int) -> tuple[list[tuple[Any, ...]], bool, int]:
        """(rows, truncated, bytes): up to row_limit rows, each value made small enough to keep
        (no multi-MB blob or string stays whole), and no more rows once ``room`` bytes are used.
        One row is held whole at a time, never a whole result."""
        rows: list[tuple[Any, ...]] = []
        used, limit, keep = 0, self.spec.row_limit, self._keep
        while True:
            row = cur.fetchone()
            if row is None:
                return rows, False, used
            if len(rows) >= limit or (rows and used > room):
                return rows, True, used
            sizes = [len(v) if isinstance(v, (str, bytes)) else 8 for v in row]
            if max(sizes, default=0) > 256:  # a value _keep may shrink (the common row has none: no call per value)
                row = tuple(keep(v) for v in row)
                sizes = [len(v) if isinstance(v, (str, bytes)) else 8 for v in row]
            used += sum(sizes)
            rows.append(row)

    def _keep(self, value: Any) -> Any:
        """A value as an observation keeps it: blobs over 256 bytes and strings over 2,000
        characters become a marker (the agent sees their size, the episode does not hold them)."""
        if isinstance(value, bytes) and len(value) > 256:
            return f"<blob: {len(value):,} bytes>"
        if isinstance(value, str) and len(value) > 2000:
            return value[:2000] + f"…<{len(value):,} characters>"
        return value

    def _explain(self, exc: BaseException) -> str:
        if self.sandbox.denied:
            return f"denied: {self.sandbox.denied}"
        if self.sandbox.over_memory:
            return (f"interrupted: the statement used more than {self.spec.statement_memory / 2**20:g} MB "
                    "(statement_memory): sort or group less data, or add a LIMIT")
        if self.sandbox.interrupted:
            return (f"interrupted: the statement exceeded its budget of {self.spec.query_budget:,} SQLite steps "
                    "(a runaway query? add a LIMIT or a WHERE)")
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return (f"database full: the world may hold at most {self.spec.max_db_bytes / 2**20:g} MB "
                    "(max_db_bytes); nothing of this statement was written")
        return f"{type(exc).__name__}: {exc}" if not isinstance(exc, sqlite3.Error) else str(exc)

    def _render(self, columns: list[str], rows: list[tuple[Any, ...]], cut: bool) -> str:
        limit = self.spec.max_cell_chars
        lines = [" | ".join(columns)]
        lines += [" | ".join([_cell(v, limit) for v in row]) for row in rows]
        if cut:
            lines.append(f"(first {len(rows)} rows shown; narrow the query with WHERE/LIMIT to see more)")
        else:
            lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
        return "\n".join(lines)

    # --- what checkers use ---------------------------------------------------------------------
    # Checkers and the diff read end_state() (the start snapshot, the agent's connection when it ran
    # no DDL, or a copy of the main database's bytes without the agent's temp schema, session and
    # objects), always read-only and under self.budget.

    def _marks(self) -> tuple[int, int]:
        """(row changes, schema cookie). The cookie moves only on DDL or ANALYZE, which the sandbox
        sees at prepare time: without either it is the start's (no PRAGMA round trip)."""
        assert self.conn is not None
        if not (self.sandbox.schema_touched or self.sandbox.analyzed):
            return (self.conn.total_changes, self._start_marks[1])
        return (self.conn.total_changes, self.conn.execute("PRAGMA main.schema_version").fetchone()[0])

    def settle(self) -> None:
        """End the agent's session: an open transaction is rolled back, as a real server would."""
        if self._settled or self.conn is None:
            return
        self._settled = True
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
            self.notes.append("an open transaction was rolled back at the end of the episode (never committed)")

    def end_state(self) -> sqlite3.Connection:
        """The world's real end state, read-only, as one of three connections:

        - the start snapshot itself when the agent changed nothing;
        - the agent's own connection, switched to ``query_only``, when it changed rows but ran no
          DDL and no ANALYZE in any schema (the sandbox sees each at prepare time) and holds no open
          transaction: then its main database is the world and nothing of the agent's (temp table,
          view, trigger) exists to stand in for a world table: no copy needed;
        - else a copy of the main database's bytes in a connection of our own (no temp objects, no
          session state) with every view, trigger and index the agent created or replaced dropped.
        """
        if self._end is None:
            if self.conn is None or self.snapshot is None:
                raise RuntimeError("the world is closed")
            self.settle()
            snap = self.snapshot
            marks = self._marks()
            # one value a check makes is capped at the memory a check may use (the agent's values always
            # fit): a value built in one VM step (replace(), a long group_concat) would otherwise reach
            # SQLite's 1 GB before the budget's next look
            cap = max(self.spec.statement_memory, self.spec.max_value_bytes)
            if marks == self._start_marks:
                self._end, self._end_owned, self._end_catalog = pristine(snap), False, snap.catalog
            elif not (self.sandbox.schema_touched or self.sandbox.analyzed or self.conn.in_transaction):
                self.conn.executescript("PRAGMA query_only = ON")  # no transaction is open: nothing to commit
                self._agent_length = self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, cap)  # the agent's: lifted
                self._end, self._end_owned, self._end_live = self.conn, False, True
                self._end_catalog = snap.catalog
            else:
                end = end_copy(self.conn.serialize(name="main"))
                end.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, cap)
                self._end, self._end_owned = end, True
                if marks[1] == self._start_marks[1]:  # the schema cookie moves on every DDL: same objects
                    self._end_catalog = snap.catalog
                else:
                    self._end_catalog = catalog(end)
                    extra = [(k, n) for k, n, _t, sql in sorted(self._end_catalog - snap.catalog)
                             if k in ("view", "trigger", "index") and sql is not None]
                    if extra:
                        end.execute("PRAGMA query_only = OFF")
                        for kind, name in extra:
                            end.execute(f"DROP {kind.upper()} IF EXISTS {quote(name)}")
                        end.execute("PRAGMA query_only = ON")
        return self._end

    def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Rows of a checker's query on the end state (see :meth:`end_state`), under the agent's
        ``query_budget`` and the checks' deadline; raises CheckBudgetExceeded past them."""
        with self._check_lock:
            conn = self.end_state()
            self.budget.arm(conn, self.spec.query_budget)
            try:
                cur = conn.execute(sql, params)
                rows = cur.fetchmany(self.spec.max_changes + 1)
            except sqlite3.OperationalError as exc:
                self._over_budget(exc, f"checker query {sql!r}")
                raise
            finally:
                self.budget.disarm(conn)
            if len(rows) > self.spec.max_changes:
                raise CheckBudgetExceeded(self._size_note(f"checker query {sql!r} returned more than "
                                                          f"{self.spec.max_changes:,} rows (max_changes)"))
            return rows

    def _over_budget(self, exc: BaseException, what: str) -> None:
        if self.budget.why and isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc):
            raise CheckBudgetExceeded(self._size_note(f"{what} exceeded {self.budget.why}")) from None

    def _size_note(self, text: str) -> str:
        """``text`` plus how big the world is now and was at the start: a check that ran out of
        budget on a world the agent grew is the agent's doing."""
        assert self.snapshot is not None
        end = self._end if self._end is not None else self.conn
        try:
            rows = sum(end.execute(f"SELECT count(*) FROM {quote(t)}").fetchone()[0] for t in list_tables(end))
        except sqlite3.Error:
            rows = -1
        grown = rows > self.snapshot.rows
        self.grown = grown
        return (f"{text}; the world has {rows:,} rows (it started with {self.snapshot.rows:,})"
                + ("; the agent's actions grew it" if grown else ""))

    def changes(self) -> list[Change]:
        """Every change between the start and the end state: rows, and schema objects (tables
        altered, views / triggers / indexes created or dropped). Raises CheckBudgetExceeded when
        the diff runs out of budget or a table gained more than ``max_changes`` rows."""
        if self._changes is None:
            with self._check_lock:
                return self._diffed()
        return self._changes

    def _diffed(self, skip: frozenset[str] = frozenset()) -> list[Change]:
        """:meth:`changes`, with the check lock held; of the tables not in ``skip`` when it names any
        (that list is not kept as the changes)."""
        if self._diff_error is not None:
            raise CheckBudgetExceeded(self._diff_error)
        if self._changes is not None:
            return self._changes
        conn = self.end_state()
        assert self.snapshot is not None
        if not (self._end_owned or self._end_live):  # the agent changed nothing: the start snapshot is read
            self._changes = []
            return self._changes
        self.budget.arm(conn, self.spec.check_budget)
        try:
            changes = self._diff(conn, self.snapshot, skip)
            if not skip:
                self._changes = changes
            return changes
        except sqlite3.OperationalError as exc:
            try:
                self._over_budget(exc, "the collateral diff")
            except CheckBudgetExceeded as over:
                self._diff_error = str(over)
                raise
            raise
        except CheckBudgetExceeded as over:
            self._diff_error = str(over)
            raise
        finally:
            self.budget.disarm(conn)

    def _proven(self) -> tuple[frozenset[str], bool, int]:
        """``(tables, complete, rows)``: the tables whose changes the rules allow without reading a row of
        them, whether they are all the diff would read, and how many rows of theirs were logged.

        A table is proven when the row log says every row of it the agent changed was updated in place
        (no insert, delete or rowid move), the authorizer saw every column the agent's UPDATEs of it
        could set, and the table's rule allows those columns on the rows its ``where`` matched at the
        start. None is in a world where something else can write a row (DDL, triggers, foreign-key
        actions, generated columns, virtual tables: see ``Snapshot.provable``), or when the log failed.
        With the end state chosen (end_state)."""
        log, snap, sandbox = self.rows, self.snapshot, self.sandbox
        if log is None or log.broken or snap is None or not self._end_live or snap.has_triggers:
            return frozenset(), False, 0
        proven = [t for t, keys in log.tables.items() if self._allowed_unread(t, keys)]
        complete = len(proven) == len(log.tables)
        rows = sum(len(log.tables[t]) for t in proven)
        if complete:  # the diff would also scan a written table that is not a rowid table (or a dependent)
            complete = all(t in snap.rowid_tables for t in snap.affected(sandbox.written) if t in snap.state)
        return frozenset(proven), complete, rows

    def _allowed_unread(self, table: str, keys: set[int]) -> bool:
        """Whether every change of ``table``'s logged rows ``keys`` is allowed, known without reading them
        (see :meth:`_proven`)."""
        log, snap, sandbox = self.rows, self.snapshot, self.sandbox
        assert log is not None and snap is not None
        rule = self.allowed.rules.get(table)
        if rule is None or table not in snap.provable or table in log.overflow:
            return False
        if rule == ANYTHING:
            return True
        columns = sandbox.updated.get(table)
        if (table in log.reshaped or table in sandbox.inserted or not columns or rule.update is None
                or not ("*" in rule.update or columns.issubset(rule.update))):
            return False
        if rule.where is None:
            return True
        matched = snap.start_keys.get((table, rule.where))
        return matched is not None and keys <= matched

    def _diff(self, conn: sqlite3.Connection, snap: Snapshot, skip: frozenset[str] = frozenset()) -> list[Change]:
        schema = schema_changes(snap.catalog, self._end_catalog)
        full = bool(schema) or self.sandbox.schema_touched or snap.has_triggers
        # Same objects: only the tables the agent wrote (and their FK dependents) can differ; of an
        # ordinary rowid table, only the rows SQLite logged as changed.
        log = self.rows if not full and self.rows is not None and not self.rows.broken else None
        if full:
            tables = list_tables(conn)
        else:
            touched = snap.affected(self.sandbox.written)
            if log is not None:
                touched |= log.tables.keys() | log.overflow
            tables = sorted(touched.intersection(snap.tables).difference(skip))
        start, end, cols = {}, {}, {}
        unreadable: list[Change] = []
        updates: list[Change] = []  # of the tables whose scans pair up row by row, in table order
        for table in tables:
            known = snap.state.get(table, {})
            if log is not None and table in snap.rowid_tables and table not in log.overflow:
                keys = log.tables.get(table)
                if keys:  # else no row of it changed
                    start[table] = {k: known[k] for k in keys if k in known}
                    end[table], cols[table] = rows_by_rowid(conn, table, keys), snap.columns[table]
                continue
            try:
                rows, pk = scan(conn, table, limit=len(known) + self.spec.max_changes + 1)
            except sqlite3.DatabaseError as exc:
                if "interrupt" in str(exc):  # the checks' budget
                    raise
                # a virtual table whose shadow tables the agent wrote (fts, rtree) may no longer read: that
                # is collateral damage, not a crash of the check (a checker's error: the episode unscored)
                unreadable.append(Change(table, "unreadable_table", after={"error": str(exc)}))
                continue
            if len(rows) > len(known) + self.spec.max_changes:
                count = conn.execute(f"SELECT count(*) FROM {quote(table)}").fetchone()[0]
                raise CheckBudgetExceeded(self._size_note(
                    f"the collateral diff stopped: table {table!r} has {count:,} rows, {count - len(known):,} more "
                    f"than at the start (max_changes={self.spec.max_changes:,})"))
            columns = table_columns(conn, table) if full else snap.columns[table]
            if table in snap.scans and columns == snap.columns.get(table):
                old = snap.scans[table]
                if rows == old:
                    continue  # one C-level comparison for an untouched table
                if pk is None and len(rows) >= len(old):
                    # the common case, updates and appended rows: both scans are in rowid order, so when every
                    # row that differs keeps its rowid, the start's rows are the end's first ones (the rest
                    # were inserted after them)
                    pairs = [(b, a) for b, a in zip(old, rows, strict=False) if b != a]
                    if all(b[0] == a[0] for b, a in pairs):
                        updates += paired_changes(table, columns, pairs, rows[len(old):])
                        continue
                # same columns: only the rows that are not in both scans can differ (set lookups in C,
                # instead of keying and comparing every row of the table in Python)
                before, after = snap.scan_set(table), set(rows)
                start[table] = keyed([r for r in snap.scans[table] if r not in after], pk)
                end[table], cols[table] = keyed([r for r in rows if r not in before], pk), columns
                continue
            if table in snap.state:
                start[table] = known
            end[table], cols[table] = keyed(rows, pk), columns
        if full:  # every table of the end state was listed: the others are gone
            present = set(tables)
            start.update({t: snap.state[t] for t in snap.tables if t not in present})
        changes = diff_states(start, end, snap.columns, cols) if start or end else []
        if updates:  # merged in table order (a stable sort keeps each table's rows in key order)
            changes = sorted(changes + updates, key=lambda c: c.table) if changes else updates
        if len(changes) > self.spec.max_changes:
            raise CheckBudgetExceeded(self._size_note(
                f"the collateral diff stopped: more than max_changes={self.spec.max_changes:,} row changes"))
        return schema + unreadable + changes

    def unexpected_changes(self) -> list[Change]:
        """The changes ``allowed_changes`` does not cover: collateral damage."""
        if self._unexpected is None:
            with self._check_lock:  # one hold for the diff and the rules
                self.end_state()
                proven, complete, rows = self._proven() if self._changes is None else (frozenset(), False, 0)
                changes: list[Change] = [] if complete else self._diffed(proven)
                if proven and len(changes) + rows > self.spec.max_changes:
                    changes = self._diffed()  # the whole diff may stop at max_changes: it is the verdict
                if not changes or self.allowed.anything:  # nothing to judge: no rule needs to read the world
                    self._unexpected = []
                    return self._unexpected
                opened: list[sqlite3.Connection] = []

                def start() -> sqlite3.Connection:
                    assert self.snapshot is not None
                    opened.append(open_copy(self.snapshot))
                    return opened[-1]

                end = self.end_state()
                assert self.snapshot is not None
                self.budget.arm(end, self.spec.check_budget)
                try:
                    self._unexpected = self.allowed.violations(changes, start, end, self.snapshot.start_keys)
                except sqlite3.OperationalError as exc:
                    self._over_budget(exc, "the collateral check")
                    raise
                finally:
                    self.budget.disarm(end)
                    for conn in opened:
                        conn.close()
        return self._unexpected


def _cell(value: Any, limit: int) -> str:
    """One value as the agent sees it in a result table."""
    if value is None:
        return "NULL"
    if type(value) is bytes:
        return f"<{len(value)} bytes>"
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
