"""The SQLite world underneath the ``sql`` environment: snapshots, the sandbox, and diffs.

- :func:`snapshot_for` builds a seeded database once per process per distinct
  (schema, seed) and keeps it as ``serialize()``d bytes; every episode starts from
  a ``deserialize()``d copy, never by re-running the seed script.
- :class:`Sandbox` is the authorizer + progress handler the agent's SQL runs under.
- :func:`table_state` / :func:`diff_states` / :class:`AllowedChanges` implement the
  collateral-damage check: what changed between the start and the end state, and
  which of those changes the task did not allow.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import compress
from operator import ne
from pathlib import Path
from typing import Any, TypeVar

import attrs

_T = TypeVar("_T")
DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")

# --- snapshots ------------------------------------------------------------------------------------


@attrs.frozen
class Snapshot:
    """A seeded world: the database bytes plus what every episode needs to know about it."""

    key: str
    data: bytes
    tables: tuple[str, ...]
    schema_text: str  # one line per table, shown to the agent at reset
    state: dict[str, dict[Any, tuple[Any, ...]]]  # table -> row key -> row (the start state)
    columns: dict[str, tuple[str, ...]]
    dependents: dict[str, frozenset[str]] = attrs.field(factory=dict)  # table -> tables with an FK to it
    has_triggers: bool = False
    schema_version: int = 0
    scans: dict[str, list[tuple[Any, ...]]] = attrs.field(factory=dict, eq=False)  # table -> start scan()
    catalog: frozenset[tuple[str, str, str, str | None]] = frozenset()  # sqlite_master (type, name, tbl_name, sql)
    rows: int = 0  # rows in all tables
    start_keys: dict[tuple[str, str], set[Any]] = attrs.field(factory=dict, eq=False)  # (table, where) -> keys
    rowid_tables: frozenset[str] = frozenset()  # ordinary rowid tables (not WITHOUT ROWID, not virtual)
    # rowid tables whose rows change in place only through an UPDATE naming the column: no generated
    # column, no foreign key with an action, and no virtual table in the world (a module writes its
    # shadow tables with statements of its own); see SqlEnvironment._proven
    provable: frozenset[str] = frozenset()
    _scan_sets: dict[str, frozenset[tuple[Any, ...]]] = attrs.field(factory=dict, eq=False, init=False)

    @property
    def page_size(self) -> int:
        """The database's page size, from its header (the agent cannot change it: no PRAGMA, no VACUUM)."""
        size = int.from_bytes(self.data[16:18], "big")
        return 65536 if size == 1 else size or 4096

    def scan_set(self, table: str) -> frozenset[tuple[Any, ...]]:
        """The rows of the start scan of ``table`` as a set (built on first use, kept)."""
        rows = self._scan_sets.get(table)
        if rows is None:
            rows = self._scan_sets[table] = frozenset(self.scans[table])
        return rows

    def affected(self, written: set[str]) -> set[str]:
        """Tables a write to ``written`` may have changed: those, plus every table whose foreign
        keys with ON DELETE/UPDATE actions point at them, transitively."""
        out, todo = set(), list(written)
        while todo:
            table = todo.pop()
            if table in out:
                continue
            out.add(table)
            todo.extend(self.dependents.get(table, ()))
        return out


_cache: dict[str, Snapshot] = {}
_by_params: dict[tuple[Any, ...], Snapshot] = {}  # (params, file identities) -> snapshot, skips re-reading files
_recent: dict[tuple[Any, ...], tuple[float, Snapshot]] = {}  # params -> (when the files were checked, snapshot)
RECHECK_S = 1.0  # an edited seed file is picked up within a second, without a stat() per episode
_cache_lock = threading.Lock()


def _identity(value: str | None, base_dir: Path | None) -> Any:
    if value is None or "\n" in value:
        return value
    path = Path(value.strip())
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    try:
        st = path.stat()
    except OSError:
        return (value, None)
    return (str(path), st.st_mtime_ns, st.st_size, st.st_ino)


def read_source(value: str | None, base_dir: Path | None, what: str) -> tuple[str, bytes | None]:
    """SQL text given inline or as a .sql file, or a SQLite file (.db/.sqlite) as bytes."""
    if value is None:
        return "", None
    text = value.strip()
    looks_like_path = "\n" not in text and (text.endswith(".sql") or text.lower().endswith(DB_SUFFIXES))
    if not looks_like_path:
        return value, None
    path = Path(text)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.is_file():
        raise FileNotFoundError(f"{what}: file not found: {path}")
    if path.suffix.lower() in DB_SUFFIXES:
        return "", path.read_bytes()
    return path.read_text(encoding="utf-8"), None


def snapshot_for(schema: str | None, seed: str | None, *, base_dir: Path | None = None,
                 foreign_keys: bool = True) -> Snapshot:
    """The seeded world for this configuration, built on first use and cached for the process."""
    params = (schema, seed, str(base_dir), foreign_keys)
    recent = _recent.get(params)
    now = time.monotonic()
    if recent is not None and now - recent[0] < RECHECK_S:  # files were looked at a moment ago
        return recent[1]
    fast = (_identity(schema, base_dir), _identity(seed, base_dir), foreign_keys)
    snap = _by_params.get(fast)
    if snap is not None:
        _recent[params] = (now, snap)
        return snap
    schema_sql, schema_db = read_source(schema, base_dir, "schema")
    seed_sql, seed_db = read_source(seed, base_dir, "seed")
    digest = hashlib.sha256()
    for part in (schema_sql.encode(), schema_db or b"", seed_sql.encode(), seed_db or b"", str(foreign_keys).encode()):
        digest.update(hashlib.sha256(part).digest())
    key = digest.hexdigest()
    snap = _cache.get(key)
    if snap is not None:
        return snap
    with _cache_lock:
        snap = _cache.get(key)
        if snap is None:
            snap = _cache[key] = _build(key, schema_sql, schema_db or seed_db, seed_sql, foreign_keys)
        _by_params[fast] = snap
    _recent[params] = (now, snap)
    return snap


def _build(key: str, schema_sql: str, base_db: bytes | None, seed_sql: str, foreign_keys: bool) -> Snapshot:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        if base_db is not None:
            conn.deserialize(base_db)
        if foreign_keys:
            conn.execute("PRAGMA foreign_keys = ON")
        try:
            if schema_sql:
                conn.executescript(schema_sql)
            if seed_sql:
                conn.executescript(seed_sql)
        except sqlite3.Error as exc:
            raise ValueError(f"building the world failed: {exc}") from None
        if conn.in_transaction:
            conn.execute("COMMIT")
        # what every episode opens: the bytes, parsed afresh (a seed that edited sqlite_master through
        # writable_schema leaves this connection on the schema it had parsed before: generated columns,
        # foreign keys and declared types read from it would not be the episodes')
        data = conn.serialize()
        conn.close()
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.deserialize(data)
        if foreign_keys:
            conn.execute("PRAGMA foreign_keys = ON")
        tables = list_tables(conn)
        columns = {t: table_columns(conn, t) for t in tables}
        lines = []
        for t in tables:
            info = conn.execute(f"PRAGMA table_info({quote(t)})").fetchall()
            refs = {fk[3]: f"{fk[2]}.{fk[4]}" if fk[4] else fk[2]
                    for fk in conn.execute(f"PRAGMA foreign_key_list({quote(t)})").fetchall()}
            cols = ", ".join(f"{c[1]} {c[2]}".strip() + (" PK" if c[5] else "")
                             + (f" -> {refs[c[1]]}" if c[1] in refs else "") for c in info)
            count = conn.execute(f"SELECT count(*) FROM {quote(t)}").fetchone()[0]
            lines.append(f"{t}({cols}) -- {count} rows")
        state = table_state(conn, tables)
        dependents: dict[str, set[str]] = {}
        named = {t.lower(): t for t in tables}  # a REFERENCES clause may spell its table in another case
        for t in tables:
            for fk in conn.execute(f"PRAGMA foreign_key_list({quote(t)})").fetchall():
                if {fk[5], fk[6]} - {"NO ACTION", "RESTRICT"}:  # CASCADE / SET NULL / SET DEFAULT
                    dependents.setdefault(named.get(fk[2].lower(), fk[2]), set()).add(t)
        scanned = {t: scan(conn, t) for t in tables}
        scans = {t: rows for t, (rows, _pk) in scanned.items()}
        virtual = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                              "AND sql LIKE 'CREATE VIRTUAL TABLE%'")}
        # read by rowid (the row log): a table where "rowid" names a column of its own is scanned whole
        plain = frozenset(t for t, (_rows, pk) in scanned.items()
                          if pk is None and t not in virtual and rowid_name(columns[t]) == "rowid")
        generated = {t for t in plain if any(c[6] in (2, 3) for c in _selected_columns(conn, t))}
        acting = set().union(*dependents.values())  # tables with a foreign key whose action writes them
        triggers = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone()[0]
        provable = frozenset() if virtual or triggers else _rewrite_stable(data, plain - generated - acting, scans)
        version = conn.execute("PRAGMA schema_version").fetchone()[0]
        return Snapshot(key, data, tuple(tables), "\n".join(lines), state, columns,
                        {k: frozenset(v) for k, v in dependents.items()}, bool(triggers), version, scans,
                        catalog(conn), sum(len(v) for v in state.values()), rowid_tables=plain,
                        provable=provable)
    finally:
        conn.close()


def _rewrite_stable(data: bytes, tables: frozenset[str], scans: dict[str, list[tuple[Any, ...]]]) -> frozenset[str]:
    """The ``tables`` whose rows an UPDATE leaves as they were in every column it does not set. SQLite
    applies every column's affinity again to a record it rewrites, so a value stored before its column's
    declared type changed (a seed that edits ``sqlite_master``) changes with any UPDATE of its row: an
    UPDATE of one column, on a copy, shows it."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.deserialize(data)
        stable = []
        for table in sorted(tables):
            if not scans[table]:
                stable.append(table)
                continue
            column = quote(table_columns(conn, table)[0])
            try:
                conn.execute(f"UPDATE {quote(table)} SET {column} = {column}")
            except sqlite3.Error:  # the rows break a constraint of their own table: not provable
                continue
            if scan(conn, table)[0] == scans[table]:
                stable.append(table)
        return frozenset(stable)
    finally:
        conn.close()


def clear_cache() -> None:
    """Forget every cached snapshot (tests, or after editing a seed file in a long-lived process)."""
    with _cache_lock:
        _cache.clear()
        _by_params.clear()
        _recent.clear()


def open_copy(snap: Snapshot, *, foreign_keys: bool = True, check_same_thread: bool = True,
              max_value: int = 16_000_000) -> sqlite3.Connection:
    """A fresh in-memory connection holding a private copy of the snapshot."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=check_same_thread)
    conn.deserialize(snap.data)
    # temp tables and sorts in memory, not a temp file per episode (opening it was half the cost of a
    # core episode); bounded all the same by temp.max_page_count and the statement memory budget.
    # One executescript: no cursor or statement-cache entry per PRAGMA (a fresh connection holds no
    # transaction, so its implicit COMMIT never runs)
    conn.executescript("PRAGMA temp_store = MEMORY; PRAGMA foreign_keys = ON" if foreign_keys
                       else "PRAGMA temp_store = MEMORY")
    for limit, value in LIMITS:
        conn.setlimit(limit, max_value if limit == sqlite3.SQLITE_LIMIT_LENGTH else value)
    return conn


def _memory_counter() -> Any:
    """SQLite's own count of the bytes it holds (``sqlite3_memory_used``), or None where the
    library does not export it: the progress handlers use it to stop a statement whose sorter
    or temp b-trees grow past a budget (a sort of 15 MB blobs costs one VM step per row)."""
    try:
        import _sqlite3
        import ctypes

        # PyDLL: called with the GIL held (a counter read, no reason to hand the GIL over and back)
        fn = ctypes.PyDLL(_sqlite3.__file__).sqlite3_memory_used
        fn.restype, fn.argtypes = ctypes.c_int64, []
        fn()
        return fn
    except (ImportError, OSError, AttributeError):
        return None


memory_used = _memory_counter()


# --- the rows the agent's statements changed --------------------------------------------------------


class RowLog:
    """The rowids of the main database's rows SQLite inserted, updated or deleted on one connection,
    per table, from its pre-update hook: every row change of a rowid table passes it, REPLACE's
    deletes, foreign-key actions and triggers included, and while it is set SQLite does not take
    DELETE's truncate shortcut. An update that moves a row logs both rowids. The collateral diff then
    reads only these rows of an ordinary rowid table instead of the whole table. ``broken`` (the hook
    failed) or a table in ``overflow`` (more than ``limit`` rowids) sends the diff back to full scans.
    ``reshaped``: the tables that saw anything but an update in place (an insert, a delete, a move)."""

    __slots__ = ("tables", "overflow", "reshaped", "broken", "limit", "db")

    def __init__(self, limit: int, db: int) -> None:
        self.tables: dict[str, set[int]] = {}
        self.overflow: set[str] = set()
        self.reshaped: set[str] = set()
        self.broken = False
        self.limit = limit
        self.db = db  # the connection's sqlite3 handle, what the hook is called with


def _preupdate_api() -> Any:
    """(install, remove, cap) for SQLite's pre-update hook through ctypes, or None where the library
    lacks it (built without SQLITE_ENABLE_PREUPDATE_HOOK) or the self-check below fails: then every
    diff scans whole tables, as before. ``cap`` is None when the in-memory database's own size limit
    cannot be set (then ``PRAGMA max_page_count`` caps it)."""
    if os.environ.get("AGENTSYNTH_SQL_ROW_LOG", "1") == "0":
        return None
    try:
        import _sqlite3
        import ctypes

        lib = ctypes.PyDLL(_sqlite3.__file__)  # calls that only set a pointer: no GIL handover
        callback_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p,
                                         ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64)
        hook = lib.sqlite3_preupdate_hook
        hook.restype, hook.argtypes = ctypes.c_void_p, [ctypes.c_void_p, callback_type, ctypes.c_void_p]
        total = lib.sqlite3_total_changes
        total.restype, total.argtypes = ctypes.c_int, [ctypes.c_void_p]
        autocommit = lib.sqlite3_get_autocommit
        autocommit.restype, autocommit.argtypes = ctypes.c_int, [ctypes.c_void_p]
        file_control = lib.sqlite3_file_control
        file_control.restype = ctypes.c_int
        file_control.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
    except (ImportError, OSError, AttributeError):
        return None
    _INSERT, _UPDATE, _DELETE = sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE
    _SIZE_LIMIT = 36  # SQLITE_FCNTL_SIZE_LIMIT: the memdb's maximum size (SQLite 3.33+)
    offset = object.__basicsize__  # a Connection's sqlite3* follows its object header (CPython's layout)

    def pointer(conn: sqlite3.Connection) -> int:
        return ctypes.c_void_p.from_address(id(conn) + offset).value or 0

    logs: dict[int, RowLog] = {}

    def on_change(_ctx: Any, db: int, op: int, schema: bytes, table: bytes, key1: int, key2: int) -> None:
        log = logs.get(db)
        if log is None or schema != b"main":
            return
        try:
            name = table.decode("utf-8")
            rows = log.tables.get(name)
            if rows is None:
                rows = log.tables[name] = set()
            if op == _UPDATE and key1 == key2:
                rows.add(key1)
            else:
                log.reshaped.add(name)
                if op != _INSERT:
                    rows.add(key1)
                if op != _DELETE:
                    rows.add(key2)
            if len(rows) > log.limit:
                log.overflow.add(name)
                rows.clear()  # the diff scans this table whole (and stops at max_changes)
        except BaseException:  # noqa: BLE001 - a callback must not raise into SQLite: the diff scans instead
            log.broken = True

    callback = callback_type(on_change)

    def install(conn: sqlite3.Connection, limit: int) -> RowLog:
        db = pointer(conn)
        log = logs[db] = RowLog(limit, db)
        hook(db, callback, None)
        return log

    def remove(log: RowLog) -> None:
        """Forget ``log`` (its connection is about to close, which ends the hook: a handle may be
        reused by the next connection)."""
        logs.pop(log.db, None)

    def cap(conn: sqlite3.Connection, size: int) -> bool:
        """Stop the deserialized main database growing past ``size`` bytes (a write past it fails with
        SQLITE_FULL): what ``PRAGMA max_page_count`` does, without preparing a statement."""
        limit = ctypes.c_int64(size)
        return file_control(pointer(conn), b"main", _SIZE_LIMIT, ctypes.byref(limit)) == 0 and limit.value >= size

    # the self-check: the pointer read is this connection's (its counters agree), and the hook logs
    # what a handful of statements change, exactly
    try:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.executescript("CREATE TABLE t (id INTEGER PRIMARY KEY, v UNIQUE); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'); "
                           "CREATE TABLE u (id INTEGER PRIMARY KEY, w); INSERT INTO u VALUES (4, 0)")
        db = pointer(conn)
        if not db or total(db) != conn.total_changes or autocommit(db) != 1:
            return None
        conn.execute("BEGIN")
        in_transaction = autocommit(db) == 0
        conn.execute("COMMIT")
        if not in_transaction:
            return None
        log = install(conn, 100)
        conn.executescript("UPDATE t SET v = 'z' WHERE id = 1; INSERT OR REPLACE INTO t VALUES (9, 'b'); "
                           "UPDATE t SET id = 7 WHERE id = 3; DELETE FROM t WHERE id = 9; UPDATE u SET w = 1")
        seen = log.tables.get("t")
        remove(log)
        conn.execute("DELETE FROM t")  # logged nowhere
        if seen != {1, 2, 3, 7, 9} or log.broken or conn.total_changes != total(db) or log.tables["t"] != seen \
                or log.tables.get("u") != {4} or log.reshaped != {"t"}:
            return None
        capped = sqlite3.connect(":memory:", isolation_level=None)
        capped.deserialize(conn.serialize())
        conn.close()
        try:  # the cap holds: a blob bigger than the room left is refused as "database full"
            room = len(capped.serialize()) + 8192
            if not cap(capped, room):
                return install, remove, None
            capped.execute("INSERT INTO u (w) VALUES (zeroblob(65536))")
        except sqlite3.Error as exc:
            full = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            return install, remove, cap if full and len(capped.serialize()) <= room else None
        finally:
            capped.close()
        return install, remove, None
    except Exception:  # noqa: BLE001 - anything odd: no row log, whole-table scans
        return None


_row_log_api = _preupdate_api()


def watch_rows(conn: sqlite3.Connection, limit: int) -> RowLog | None:
    """Start logging the rows ``conn``'s statements change (None where SQLite cannot)."""
    return _row_log_api[0](conn, limit) if _row_log_api is not None else None


def unwatch_rows(log: RowLog) -> None:
    """Stop logging into ``log`` (before its connection is closed: logs are found by handle)."""
    if _row_log_api is not None:
        _row_log_api[1](log)


def cap_size(conn: sqlite3.Connection, size: int) -> bool:
    """Cap ``conn``'s deserialized main database at ``size`` bytes without a statement; False where
    SQLite cannot (then ``PRAGMA max_page_count`` is the cap)."""
    return _row_log_api is not None and _row_log_api[2] is not None and _row_log_api[2](conn, size)

_pristine = threading.local()


def pristine(snap: Snapshot) -> sqlite3.Connection:
    """A read-only connection on the snapshot's start state, one per thread and snapshot, kept:
    what checkers read when the agent changed nothing (no copy, schema parsed once)."""
    conns = getattr(_pristine, "conns", None)
    if conns is None:
        conns = _pristine.conns = {}
    conn = conns.get(snap.key)
    if conn is None:
        conn = conns[snap.key] = sqlite3.connect(":memory:", isolation_level=None)
        conn.deserialize(snap.data)
        conn.execute("PRAGMA query_only = ON")
    return conn


# No connection is used for a second world. deserialize() into a used connection keeps its session
# state (last_insert_rowid(), changes(), total_changes()) and its prepared statements, which run on the
# new bytes unchecked while the schema cookie matches; and SQLite 3.40 (Debian 12's) crashes when an
# eponymous virtual table (json_each, pragma_table_info ...) is used across such deserializes
# (tests/test_adversarial.py: test_no_connection_is_reused_for_another_world).


def end_copy(data: bytes) -> sqlite3.Connection:
    """A new read-only connection holding ``data`` (a main database's bytes): what checkers read
    after the agent changed the schema."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.deserialize(data)
    conn.execute("PRAGMA query_only = ON")
    return conn


class CheckBudgetExceeded(Exception):
    """A checker query or the collateral diff used up its budget (steps, wall clock, rows)."""


class CheckBudget:
    """The progress handler of checker queries and the diff: a step budget per armed use and a
    wall-clock deadline for all the checks of an episode (started at the first check)."""

    TICK = 1000

    def __init__(self, seconds: float, memory: int = 256 * 2**20) -> None:
        self.seconds, self.memory = seconds, memory
        self.mem_start = 0
        self.deadline: float | None = None
        self.limit = self.ticks = 0
        self.cancelled = False
        self.why = ""

    def arm(self, conn: sqlite3.Connection, steps: int) -> None:
        if self.deadline is None:
            self.deadline = time.monotonic() + self.seconds
        self.limit, self.ticks, self.why = max(steps, self.TICK), 0, ""
        self.mem_start = memory_used() if memory_used is not None else 0
        conn.set_progress_handler(self.progress, self.TICK)

    def disarm(self, conn: sqlite3.Connection) -> None:
        conn.set_progress_handler(None, self.TICK)

    def progress(self) -> int:
        self.ticks += 1
        if self.cancelled:
            self.why = "the episode ended (timeout or close) while the checks were running"
        elif self.ticks * self.TICK > self.limit:
            self.why = f"its budget of {self.limit:,} SQLite steps"
        elif self.deadline is not None and time.monotonic() > self.deadline:
            self.why = f"the checks' deadline of {self.seconds:g}s"
        elif memory_used is not None and memory_used() - self.mem_start > self.memory:
            self.why = f"its memory budget of {self.memory / 2**20:g} MB"
        else:
            return 0
        return 1


# Caps that keep one statement from exhausting memory (randomblob(1e9), a 1 GB string ...); the
# query budget bounds time. Far above what a business world needs.
LIMITS = (
    (sqlite3.SQLITE_LIMIT_LENGTH, 16_000_000),  # bytes in one string / blob / row
    (sqlite3.SQLITE_LIMIT_SQL_LENGTH, 1_000_000),  # bytes of SQL text per statement
    (sqlite3.SQLITE_LIMIT_ATTACHED, 0),
)


# --- introspection and diffs ----------------------------------------------------------------------


def catalog(conn: sqlite3.Connection, schema: str = "main") -> frozenset[tuple[str, str, str, str | None]]:
    """Every object of a schema as (type, name, tbl_name, sql)."""
    return frozenset(conn.execute(f"SELECT type, name, tbl_name, sql FROM {schema}.sqlite_master"))


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def list_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows]


def table_columns(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    """The columns ``SELECT *`` returns, in its order: generated ones too (``PRAGMA table_info`` leaves them
    out, and every label after one would slip onto the wrong value), not a virtual table's hidden ones."""
    return tuple(r[1] for r in _selected_columns(conn, table))


def _selected_columns(conn: sqlite3.Connection, table: str) -> list[tuple[Any, ...]]:
    return [r for r in conn.execute(f"PRAGMA table_xinfo({quote(table)})").fetchall() if r[6] != 1]


def scan(conn: sqlite3.Connection, table: str, limit: int | None = None) -> tuple[list[tuple[Any, ...]], list[int] | None]:
    """All rows of a table in storage order: ``(rowid, *cols)`` rows and None, or, for a WITHOUT ROWID
    table, ``(*cols)`` rows and the primary-key column indexes. Same content -> same list. With
    ``limit``, at most that many rows are read (a table holding more is cut there). TEXT that is not
    UTF-8 is read with its bad bytes replaced (see :func:`lenient_text`)."""
    return _leniently(conn, lambda: _scan(conn, table, limit))


def rows_by_rowid(conn: sqlite3.Connection, table: str, keys: Iterable[int]) -> dict[Any, tuple[Any, ...]]:
    """The rows of a rowid table with these rowids now, keyed by rowid (``(*cols)`` values, text read
    as :func:`scan` reads it)."""
    params = list(keys)
    sql = f"SELECT rowid, * FROM {quote(table)} WHERE rowid IN ({', '.join('?' * len(params))})"
    return {r[0]: r[1:] for r in _leniently(conn, lambda: conn.execute(sql, params).fetchall())}


def _leniently(conn: sqlite3.Connection, read: Callable[[], _T]) -> _T:
    """``read()``, once more under :func:`lenient_text` when it meets TEXT that is not UTF-8."""
    try:
        return read()
    except sqlite3.OperationalError as exc:
        if "Could not decode to UTF-8" not in str(exc):
            raise
    with lenient_text(conn):
        return read()


def _lenient(data: bytes) -> str:
    return data.decode("utf-8", "replace")


@contextlib.contextmanager
def lenient_text(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """TEXT read as UTF-8 with invalid bytes replaced (U+FFFD), not as an error: the agent can store such
    text (``CAST(x'ff' AS TEXT)``), and it must fail the collateral check that reads it, not crash it (a
    crashed check is the checker's error: the episode would go unscored)."""
    factory = conn.text_factory
    conn.text_factory = _lenient
    try:
        yield conn
    finally:
        conn.text_factory = factory


def _scan(conn: sqlite3.Connection, table: str, limit: int | None) -> tuple[list[tuple[Any, ...]], list[int] | None]:
    info = _selected_columns(conn, table)  # indexes into SELECT *'s values
    name = rowid_name(c[1] for c in info)
    if name is not None:
        try:
            cur = conn.execute(f"SELECT {name}, * FROM {quote(table)}")
            return (cur.fetchall() if limit is None else cur.fetchmany(limit)), None
        except sqlite3.OperationalError as exc:
            if f"no such column: {name}" not in str(exc):
                raise
    # WITHOUT ROWID: key by the primary key (by every column where no name reaches the rowid)
    pk = [i for i, c in enumerate(info) if c[5]] or list(range(len(info)))
    cur = conn.execute(f"SELECT * FROM {quote(table)}")
    return (cur.fetchall() if limit is None else cur.fetchmany(limit)), pk


ROWID_NAMES = ("rowid", "oid", "_rowid_")


def rowid_name(columns: Iterable[str]) -> str | None:
    """The name that reaches a table's rowid: the first of SQLite's spellings (rowid, oid, _rowid_) the
    table does not declare as a column of its own (a declared one means the column), or None."""
    declared = {c.lower() for c in columns}
    return next((n for n in ROWID_NAMES if n not in declared), None)


def keyed(rows: list[tuple[Any, ...]], pk: list[int] | None) -> dict[Any, tuple[Any, ...]]:
    if pk is None:
        return {r[0]: r[1:] for r in rows}
    return {tuple(r[i] for i in pk): tuple(r) for r in rows}


def _rows(conn: sqlite3.Connection, table: str) -> dict[Any, tuple[Any, ...]]:
    return keyed(*scan(conn, table))


def table_state(conn: sqlite3.Connection, tables: Iterable[str] | None = None) -> dict[str, dict[Any, tuple[Any, ...]]]:
    """Every row of every table, keyed by rowid (or primary key)."""
    return {t: _rows(conn, t) for t in (list_tables(conn) if tables is None else tables)}


SCHEMA_OPS = ("alter_table", "create_view", "drop_view", "replace_view", "create_trigger", "drop_trigger",
              "replace_trigger", "create_index", "drop_index", "replace_index")


def schema_changes(start: frozenset[tuple[str, str, str, str | None]],
                   end: frozenset[tuple[str, str, str, str | None]]) -> list[Change]:
    """Objects of the schema that differ (tables created or dropped are the row diff's): a table
    whose definition changed, views / triggers / indexes created, dropped or replaced."""
    if start == end:
        return []
    before = {(t, n): (tbl, sql) for t, n, tbl, sql in start if not n.startswith("sqlite_")}
    after = {(t, n): (tbl, sql) for t, n, tbl, sql in end if not n.startswith("sqlite_")}
    out: list[Change] = []
    for kind, name in sorted(set(before) | set(after)):
        b, a = before.get((kind, name)), after.get((kind, name))
        if b == a:
            continue
        if kind == "table":
            if a is not None and b is not None:
                out.append(Change(name, "alter_table", name, before={"sql": b[1]}, after={"sql": a[1]}))
            continue
        op = "create" if b is None else "drop" if a is None else "replace"
        table = (a or b)[0]  # type: ignore[index]
        out.append(Change(table, f"{op}_{kind}", name, before={"sql": b[1]} if b else None,
                          after={"sql": a[1]} if a else None))
    return out


@attrs.define
class Change:
    """One row-level difference between two world states."""

    table: str
    op: str  # insert / update / delete / create_table / drop_table / unreadable_table (or one of SCHEMA_OPS)
    key: Any = None
    columns: tuple[str, ...] = ()
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None

    def describe(self, limit: int = 6) -> str:
        if self.op in ("create_table", "drop_table"):
            return f"{self.op.replace('_', ' ')} {self.table}"
        if self.op == "unreadable_table":
            return f"table {self.table} no longer reads: {(self.after or {}).get('error')}"
        if self.op in SCHEMA_OPS:
            sql = (self.after or self.before or {}).get("sql") or ""
            sql = " ".join(sql.split())
            return f"{self.op.replace('_', ' ')} {self.key}: {sql[:120]}{'…' if len(sql) > 120 else ''}"
        if self.op == "update":
            assert self.before is not None and self.after is not None
            parts = [f"{c}: {self.before.get(c)!r} -> {self.after.get(c)!r}" for c in self.columns[:limit]]
            return f"update {self.table} row {self.key}: " + ", ".join(parts)
        row = self.after if self.op == "insert" else self.before
        items = list((row or {}).items())
        text = ", ".join(f"{k}={v!r}" for k, v in items[:limit]) + (", ..." if len(items) > limit else "")
        return f"{self.op} {self.table} row {self.key}: {text}"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if v not in (None, ())}


def diff_states(start: Mapping[str, Mapping[Any, tuple[Any, ...]]], end: Mapping[str, Mapping[Any, tuple[Any, ...]]],
                columns_start: Mapping[str, tuple[str, ...]], columns_end: Mapping[str, tuple[str, ...]]) -> list[Change]:
    """Row-level changes from ``start`` to ``end``, tables in name order, rows in key order."""
    changes: list[Change] = []
    for table in sorted(set(start) | set(end)):
        if table not in end:
            changes.append(Change(table, "drop_table"))
            continue
        if table not in start:
            changes.append(Change(table, "create_table"))
        before_rows, after_rows = start.get(table, {}), end[table]
        cols_b, cols_a = columns_start.get(table, ()), columns_end.get(table, ())
        same_cols = cols_b == cols_a
        if before_rows == after_rows and same_cols:
            continue
        for key in sorted(before_rows.keys() | after_rows.keys(), key=repr):
            b, a = before_rows.get(key), after_rows.get(key)
            if b == a and same_cols:
                continue
            if b is None:
                changes.append(Change(table, "insert", key, after=_row_dict(cols_a, a)))
            elif a is None:
                changes.append(Change(table, "delete", key, before=_row_dict(cols_b, b)))
            else:
                update = _row_update(table, key, cols_b, cols_a, b, a)
                if update is not None:
                    changes.append(update)
    return changes


_MISSING = object()


def _row_update(table: str, key: Any, cols_b: tuple[str, ...], cols_a: tuple[str, ...], b: tuple[Any, ...],
                a: tuple[Any, ...]) -> Change | None:
    """One row's update (None when no value differs): the columns whose values differ, both rows."""
    if cols_b == cols_a:  # the common case: compare the values pairwise
        cols = tuple(compress(cols_a, map(ne, b, a)))
        return Change(table, "update", key, cols, _row_dict(cols_b, b), _row_dict(cols_a, a)) if cols else None
    full_b, full_a = dict(zip(cols_b, b, strict=False)), dict(zip(cols_a, a, strict=False))
    cols = tuple(c for c in dict.fromkeys((*cols_b, *cols_a)) if full_b.get(c, _MISSING) != full_a.get(c, _MISSING))
    return Change(table, "update", key, cols, _shrunk(full_b), _shrunk(full_a)) if cols else None


def paired_changes(table: str, columns: tuple[str, ...], pairs: list[tuple[tuple[Any, ...], tuple[Any, ...]]],
                   inserted: Sequence[tuple[Any, ...]] = ()) -> list[Change]:
    """The changes of a rowid table whose columns did not change, from its start and end scans paired
    by rowid: ``pairs`` of ``(start, end)`` rows that differ, and the end's ``inserted`` rows (rowids
    after every start row). In key order, as :func:`diff_states` reports them, without keying both
    states first."""
    items: list[tuple[tuple[Any, ...] | None, tuple[Any, ...]]] = [*pairs, *((None, a) for a in inserted)]
    if len(items) > 1:
        items.sort(key=_end_key)
    out: list[Change] = []
    for b, a in items:
        if b is None:
            out.append(Change(table, "insert", a[0], after=_row_dict(columns, a[1:])))
            continue
        update = _row_update(table, b[0], columns, columns, b[1:], a[1:])
        if update is not None:
            out.append(update)
    return out


def _end_key(item: tuple[Any, tuple[Any, ...]]) -> str:
    return repr(item[1][0])  # the end row's rowid (a pair's rows share it), in diff_states' order of keys


def _row_dict(columns: tuple[str, ...], row: tuple[Any, ...]) -> dict[str, Any]:
    """``dict(zip(columns, row))``, :func:`_shrunk`: big values looked for in the tuple, before a dict exists."""
    for v in row:
        if (type(v) is str or type(v) is bytes) and len(v) > 64:
            return {k: small(x) for k, x in zip(columns, row, strict=False)}
    return dict(zip(columns, row, strict=False))


def _shrunk(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its big values replaced by markers (the same dict when none is big)."""
    for v in row.values():
        if isinstance(v, (str, bytes)) and len(v) > 64:  # a tuple: faster than a union in isinstance
            return {k: small(x) for k, x in row.items()}
    return row


def small(value: Any) -> Any:
    """A value as a change record keeps it: blobs over 64 bytes and strings over 500 characters
    become a marker (a diff of a world full of 15 MB blobs stays small)."""
    if isinstance(value, bytes) and len(value) > 64:
        return f"<blob: {len(value):,} bytes>"
    if isinstance(value, str) and len(value) > 500:
        return value[:500] + f"…<{len(value):,} characters>"
    return value


@attrs.frozen
class TableRule:
    """What may change in one table. ``where`` (SQL) limits which rows: it is evaluated on the
    start state for updates and deletes, and on the end state for inserts."""

    insert: bool = False
    delete: bool = False
    update: tuple[str, ...] | None = None  # None: no updates; ("*",): any column
    where: str | None = None


class AllowedChanges:
    """The changes a task declares it may make, parsed from ``allowed_changes:``.

    Forms per table: ``"*"`` (anything), ``[col, ...]`` (updates of those columns),
    or ``{insert: bool, delete: bool, update: [cols] | "*", where: "SQL condition"}``.
    ``"*"`` as the table name allows any change anywhere (turns the check off).
    """

    def __init__(self, spec: Mapping[str, Any] | None = None) -> None:
        self.rules: dict[str, TableRule] = {}
        for table, value in (spec or {}).items():
            self.rules[str(table)] = parse_rule(str(table), value)
        self._checked: set[str] = set()  # snapshots these rules were checked against

    @property
    def anything(self) -> bool:
        return "*" in self.rules

    def check_against(self, snap: Snapshot, conn: sqlite3.Connection) -> None:
        """Fail early on a rule that names no table of the world (a typo) or has a ``where`` that does
        not run; evaluates each ``where`` on the start state once per snapshot (cached)."""
        if snap.key in self._checked:
            return
        for table, rule in self.rules.items():
            if table == "*":
                continue
            if table not in snap.tables:
                if rule == ANYTHING:  # the task may create this table
                    continue
                raise ValueError(f"allowed_changes.{table}: no table {table!r} in the world "
                                 f"(tables: {', '.join(snap.tables)}); use '*' for a table the task creates")
            if rule.where and (table, rule.where) not in snap.start_keys:
                try:
                    snap.start_keys[(table, rule.where)] = _matching_keys(conn, table, rule.where)
                except sqlite3.Error as exc:
                    raise ValueError(f"allowed_changes.{table}.where: {rule.where!r}: {exc}") from None
        self._checked.add(snap.key)

    def violations(self, changes: list[Change], start_conn: Any, end_conn: sqlite3.Connection,
                   start_cache: dict[tuple[str, str], set[Any]] | None = None) -> list[Change]:
        """The changes no rule allows. ``start_conn`` is a callable opening the start state (only
        called when a ``where`` needs evaluating on it); ``start_cache`` keeps those results, as
        the start state never changes."""
        if self.anything:
            return []
        bad: list[Change] = []
        where_cache: dict[tuple[str, str], set[Any]] = {}
        for ch in changes:
            rule = self.rules.get(ch.table)
            structural = ch.op in _STRUCTURAL
            if rule is None or (structural and rule != ANYTHING):
                bad.append(ch)
                continue
            if structural:
                continue
            if ch.op == "insert":
                ok = rule.insert
            elif ch.op == "delete":
                ok = rule.delete
            else:
                ok = rule.update is not None and ("*" in rule.update or set(ch.columns) <= set(rule.update))
            if ok and rule.where:
                side = "end" if ch.op == "insert" else "start"
                keys = where_cache.get((ch.table, side))
                if keys is None and side == "start" and start_cache is not None:
                    keys = start_cache.get((ch.table, rule.where))
                if keys is None and side == "end":
                    try:
                        keys = _matching_keys(end_conn, ch.table, rule.where)
                    except sqlite3.DatabaseError as exc:
                        if "interrupt" in str(exc):  # the checks' budget: reported as such
                            raise
                        # the agent's rows make the rule fail (malformed JSON, an overflow ...): it allows none
                        # of them; a crash would be the checker's error, an episode left unscored
                        keys = set()
                    where_cache[(ch.table, side)] = keys
                if keys is None:  # on the start state (evaluated there once at reset: it runs)
                    keys = where_cache[(ch.table, side)] = _matching_keys(start_conn(), ch.table, rule.where)
                    if start_cache is not None:
                        start_cache[(ch.table, rule.where)] = keys
                ok = ch.key in keys
            if not ok:
                bad.append(ch)
        return bad


_STRUCTURAL = frozenset({"create_table", "drop_table", "unreadable_table", *SCHEMA_OPS})


def _matching_keys(conn: sqlite3.Connection, table: str, where: str) -> set[Any]:
    """The keys (as :func:`scan` keys rows) of the rows of ``table`` that ``where`` matches."""
    info = _selected_columns(conn, table)
    name = rowid_name(c[1] for c in info)
    if name is not None:
        try:
            return {r[0] for r in conn.execute(f"SELECT {name} FROM {quote(table)} WHERE {where}")}
        except sqlite3.OperationalError as exc:  # WITHOUT ROWID: key by the primary key
            if f"no such column: {name}" not in str(exc):
                raise
    pk = [c[1] for c in info if c[5]] or [c[1] for c in info]
    cols = ", ".join(quote(c) for c in pk)
    with lenient_text(conn):  # keys as scan() reads them, whatever text the agent stored
        return {tuple(r) for r in conn.execute(f"SELECT {cols} FROM {quote(table)} WHERE {where}")}


ANYTHING = TableRule(True, True, ("*",))


def parse_rule(table: str, value: Any) -> TableRule:
    where = f"allowed_changes.{table}"
    if value == "*" or value is True:
        return ANYTHING
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        if not all(isinstance(c, str) for c in value):
            raise ValueError(f"{where}: expected a list of column names")
        return TableRule(update=tuple(value))
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected '*', a list of columns, or a mapping with insert/delete/update/where")
    unknown = set(value) - {"insert", "delete", "update", "where"}
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} (known: insert, delete, update, where)")
    for flag in ("insert", "delete"):
        if not isinstance(value.get(flag, False), bool):
            raise ValueError(f"{where}.{flag}: expected true or false")
    update = value.get("update")
    if update is True or update == "*":
        cols: tuple[str, ...] | None = ("*",)
    elif update is None or update is False:
        cols = None
    elif isinstance(update, list) and all(isinstance(c, str) for c in update):
        cols = tuple(update)
    elif isinstance(update, str):
        cols = (update,)
    else:
        raise ValueError(f"{where}.update: expected a list of column names or '*'")
    cond = value.get("where")
    if cond is not None and not isinstance(cond, str):
        raise ValueError(f"{where}.where: expected an SQL condition (a string)")
    return TableRule(bool(value.get("insert", False)), bool(value.get("delete", False)), cols, cond)


# --- the sandbox ----------------------------------------------------------------------------------

_WRITE_ACTIONS = {
    sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE, sqlite3.SQLITE_ALTER_TABLE,
    sqlite3.SQLITE_REINDEX, sqlite3.SQLITE_ANALYZE, sqlite3.SQLITE_CREATE_VTABLE, sqlite3.SQLITE_DROP_VTABLE,
    *(getattr(sqlite3, n) for n in dir(sqlite3) if n.startswith(("SQLITE_CREATE_", "SQLITE_DROP_"))),
}
_SCHEMA_ACTIONS = _WRITE_ACTIONS - {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE,
                                     sqlite3.SQLITE_ANALYZE}
_ROW_WRITES = {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE}
_TRANSACTION_ACTIONS = {sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT}
_READ, _SELECT = sqlite3.SQLITE_READ, sqlite3.SQLITE_SELECT
DENIED_FUNCTIONS = {"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit", "sqlite_dbpage"}
# PRAGMAs that only describe the world. Anything else (journal_mode, writable_schema,
# temp_store_directory, mmap_size, foreign_keys=OFF ...) can reach outside the world or
# weaken its rules, and is denied.
READ_PRAGMAS = {
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check", "collation_list",
    "function_list", "pragma_list", "database_list", "compile_options",
}
STAT_TABLES = {"sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4"}
READ_VALUE_PRAGMAS = {"foreign_keys", "user_version", "schema_version", "page_count", "page_size", "encoding",
                      "data_version"}  # fts5 reads data_version on every use of its tables


class Sandbox:
    """The authorizer and progress handler for the agent's statements.

    ``readonly`` additionally denies every write (``sql_query``). ``budget`` is
    the number of SQLite VM steps one statement may take before it is interrupted.
    """

    TICK = 100  # often enough to catch a statement whose rows are 15 MB each

    def __init__(self, budget: int, memory: int = 256 * 2**20) -> None:
        self.budget = max(budget, self.TICK)
        self.memory = memory
        self.mem_start = 0
        self.over_memory = False
        self.readonly = False
        self.denied: str = ""
        self.ticks = 0
        self.interrupted = False
        self.written: set[str] = set()  # tables the agent's statements were prepared to write
        # per table, the columns an UPDATE of the agent's was prepared to set; the tables an INSERT was
        # prepared for (an upsert's DO UPDATE columns are not authorized as updates)
        self.updated: dict[str, set[str | None]] = {}
        self.inserted: set[str] = set()
        self.schema_touched = False  # any CREATE / DROP / ALTER, in any schema (temp triggers included)
        self.analyzed = False  # ANALYZE ran (it creates a table too), or sqlite_stat* was written
        self.statement_ddl = False  # the statement being prepared does DDL
        self.temp_guard = False  # the temp database is not capped yet: deny (and ask for the cap) on first use
        self.temp_needed = False

    def new_episode(self) -> None:
        """Forget what the last episode's statements were prepared to do (the world was reset)."""
        self.written, self.updated, self.inserted = set(), {}, set()
        self.schema_touched = self.analyzed = False

    def arm(self, conn: sqlite3.Connection, readonly: bool) -> None:
        """Install the handlers (setting the authorizer expires every prepared statement, so one kept
        from a call in the other mode is authorized again) and start a statement's budget."""
        self.readonly = readonly
        self.next_statement()
        conn.set_authorizer(self.authorize)
        conn.set_progress_handler(self.progress, self.TICK)

    def next_statement(self) -> None:
        """A fresh budget for the next statement of the same call (the handlers stay installed)."""
        self.denied, self.ticks, self.interrupted = "", 0, False
        self.temp_needed = self.over_memory = self.statement_ddl = False
        self.mem_start = memory_used() if memory_used is not None else 0

    def disarm(self, conn: sqlite3.Connection) -> None:
        conn.set_authorizer(None)
        conn.set_progress_handler(None, self.TICK)

    def progress(self) -> int:
        self.ticks += 1
        if self.ticks * self.TICK > self.budget:
            self.interrupted = True
            return 1
        if memory_used is not None and memory_used() - self.mem_start > self.memory:
            self.interrupted = self.over_memory = True
            return 1
        return 0

    def _deny(self, why: str) -> int:
        self.denied = self.denied or why
        return sqlite3.SQLITE_DENY

    def authorize(self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if action == _READ:  # most calls: a column read, never denied
            if arg1 is None or len(arg1) != 11 or arg1.lower() != "sqlite_stmt":  # as written when no column is read
                return sqlite3.SQLITE_OK
            # every statement prepared on the connection: after a check on the agent's own connection
            # (end_state), the checkers' queries too
            return self._deny("sqlite_stmt (the connection's prepared statements) is not readable")
        if action == _SELECT:
            return sqlite3.SQLITE_OK
        if db == "temp" and self.temp_guard and not self.readonly:
            self.temp_needed = True  # the environment caps the temp database and prepares this again
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_ANALYZE:
            self.analyzed = True  # creates sqlite_stat1: the schema cookie moves
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return self._deny("ATTACH/DETACH (and VACUUM INTO) are not allowed: the world is this one database")
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
            return self._deny(f"function {arg2}() is not allowed")
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in READ_PRAGMAS or (name in READ_VALUE_PRAGMAS and arg2 is None):
                return sqlite3.SQLITE_OK
            return self._deny(f"PRAGMA {name}{'' if arg2 is None else ' = ' + arg2} is not allowed")
        if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master" and source is None and not self.statement_ddl:
            # SQLite's own, when a statement first uses a virtual table (json_each, pragma_table_info, an
            # fts table): a write of the agent's to sqlite_master is refused by SQLite itself
            return sqlite3.SQLITE_OK
        if action in _SCHEMA_ACTIONS and not self.readonly:
            self.schema_touched = self.statement_ddl = True
        if action in _ROW_WRITES and arg1:
            if self.readonly:
                return self._deny("sql_query is read-only; use sql_execute to change data")
            if arg1 == "sqlite_sequence" and not self.statement_ddl:  # DROP / RENAME TABLE update it after the DDL
                return self._deny("sqlite_sequence is SQLite's own (the AUTOINCREMENT counters): it is not writable")
            if arg1 in STAT_TABLES:  # the planner's statistics (an ANALYZE's own too): the live connection keeps
                self.analyzed = True  # the ones it loaded, a copy reads what the bytes hold
            self.written.add(arg1)
            if action == sqlite3.SQLITE_UPDATE:
                columns = self.updated.get(arg1)
                if columns is None:
                    columns = self.updated[arg1] = set()
                columns.add(arg2)
            elif action == sqlite3.SQLITE_INSERT:
                self.inserted.add(arg1)
        if self.readonly:
            if action in _WRITE_ACTIONS:
                return self._deny("sql_query is read-only; use sql_execute to change data")
            if action in _TRANSACTION_ACTIONS:
                return self._deny("sql_query is read-only; use sql_execute for transactions")
        return sqlite3.SQLITE_OK


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements (strings, comments and triggers handled by SQLite)."""
    body = sql.strip().rstrip(";")
    if ";" not in body and "--" not in body and "/*" not in body:
        return [body.strip()] if body.strip() else []
    out: list[str] = []
    buf = ""
    for piece in sql.split(";"):
        buf = f"{buf};{piece}" if buf else piece
        if sqlite3.complete_statement(buf + ";"):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return [s for s in out if _has_code(s)]


def _has_code(stmt: str) -> bool:
    if "--" not in stmt and "/*" not in stmt:  # no comment: a statement split_statements kept is code
        return bool(stmt.strip())
    lines = [ln.split("--", 1)[0] for ln in stmt.splitlines()]
    text = "\n".join(lines).strip()
    while text.startswith("/*") and "*/" in text:
        text = text[text.index("*/") + 2:].strip()
    return bool(text)
