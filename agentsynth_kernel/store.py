"""The SQLite run store: one file per run directory, WAL, one row per (task, trial, seed).

Writing a finished episode is one small transaction, so a killed run loses at
most the episodes that were in flight; on resume those are run again and the
finished ones are not. The engine defers the writes of quick, free episodes and
commits them together (at most :data:`BATCH_SIZE` or :data:`BATCH_SECONDS` apart:
one commit per episode was most of the store's cost), so a kill may also cost the
quick episodes of the last fraction of a second — never a slow or paid one, which
is committed at once. What the store holds:

- ``meta``: the resolved spec (secrets redacted), pack hashes, versions, the run hash, the plan size;
- ``episodes``: one row per finished episode, the whole EpisodeResult as msgspec JSON;
- ``events``: an append-only log (sessions started and finished, budget stops, exports, spec changes).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from .errors import AgentsynthError
from .records import EpisodeResult, from_json, to_json
from .secrets import redact_bytes

STORE_FILE = "run.sqlite"
STORE_FORMAT = 1
# deferred writes (quick episodes) are committed together, at most this many / this long apart
BATCH_SIZE = 64
BATCH_SECONDS = 0.1
# an episode that took this long, or used an LLM, is committed at once: it is worth keeping
VALUABLE_SECONDS = 0.5

_INSERT = ("INSERT OR REPLACE INTO episodes(task_id, trial, seed, status, error_kind, finished_at, result)"
           " VALUES (?, ?, ?, ?, ?, ?, ?)")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    task_id TEXT NOT NULL, trial INTEGER NOT NULL, seed INTEGER NOT NULL,
    status TEXT NOT NULL, error_kind TEXT NOT NULL DEFAULT '',
    finished_at REAL NOT NULL, result BLOB NOT NULL,
    PRIMARY KEY (task_id, trial, seed)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS spend (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL,
    tokens INTEGER NOT NULL, pico INTEGER NOT NULL, settled INTEGER NOT NULL DEFAULT 0
);
"""


class RunStore:
    """Durable record of a run. Safe to reopen; refuses files that are not agentsynth stores.

    ``create=False`` opens an existing run directory only (``status``, ``inspect``,
    ``verify``, ``resume``) and says clearly when there is none.
    """

    def __init__(self, run_dir: Path, *, create: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STORE_FILE
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise AgentsynthError(f"{self.run_dir}: run directory path is a file")
        if not create and not self.path.is_file():
            what = "does not exist" if not self.run_dir.exists() else f"has no {STORE_FILE}"
            raise AgentsynthError(f"{self.run_dir}: not an agentsynth run directory ({what})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._spend_lock = threading.Lock()  # LLM requests settle from any thread
        self._pending: list[tuple[Any, ...]] = []  # deferred episode rows, oldest first
        self._pending_since = 0.0
        self._pending_lock = threading.Lock()
        existed = self.path.exists() and self.path.stat().st_size > 0
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            if existed:
                tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                # no tables at all: a store killed while it was being created, not a foreign file
                if tables and ("meta" not in tables or "episodes" not in tables):
                    raise AgentsynthError(
                        f"{self.path}: not an agentsynth run store (tables: {', '.join(sorted(tables)) or 'none'})"
                    )
                fmt = self.get_meta("store_format") if tables else None
                if fmt is not None and int(fmt) > STORE_FORMAT:
                    raise AgentsynthError(f"{self.path}: store format {fmt} is newer than this agentsynth ({STORE_FORMAT})")
            with self.transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                if self.get_meta("store_format") is None:
                    self.set_meta("store_format", STORE_FORMAT)
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            raise AgentsynthError(f"{self.path}: not a readable run store: {exc}") from None
        except AgentsynthError:
            self._close_quietly()
            raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes so a kill leaves all of them or none (nesting is not supported)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _q(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """Run a query and fetch its rows; a damaged file becomes a clear AgentsynthError."""
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise AgentsynthError(f"{self.path}: the run store is damaged: {exc}") from None

    def _close_quietly(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            db.close()

    # --- meta ------------------------------------------------------------------------------------

    def get_meta(self, key: str) -> Any:
        rows = self._q("SELECT value FROM meta WHERE key = ?", (key,))
        if not rows:
            return None
        row = rows[0]
        try:
            return json.loads(row[0])
        except ValueError:
            raise AgentsynthError(f"{self.path}: meta {key!r} is corrupt (not JSON)") from None

    def set_meta(self, key: str, value: Any) -> None:
        self._q(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value, sort_keys=True, default=str)),
        )

    def meta(self) -> dict[str, Any]:
        """Every meta key (for ``status``)."""
        return {key: self.get_meta(key) for (key,) in self._q("SELECT key FROM meta ORDER BY key")}

    # --- episodes --------------------------------------------------------------------------------

    def put(self, result: EpisodeResult, *, defer: bool = False) -> None:
        """Store a finished episode (replacing an earlier row with the same key). With ``defer``, a
        quick episode that used no LLM waits to be committed with others (see :meth:`flush`); a
        slow or paid one is committed at once either way."""
        row = (result.task_id, result.trial, result.seed, result.status, result.error_kind, time.time(),
               redact_bytes(to_json(result)))
        valuable = result.duration_s >= VALUABLE_SECONDS or bool(result.usage.prompt_tokens or result.usage.cost_usd)
        with self._pending_lock:
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending.append(row)
            due = (not defer or valuable or len(self._pending) >= BATCH_SIZE
                   or time.monotonic() - self._pending_since >= BATCH_SECONDS)
        if due:
            self.flush()

    @property
    def unflushed(self) -> int:
        """Deferred episodes not committed yet."""
        return len(self._pending)

    def flush(self) -> None:
        """Commit the deferred episodes in one transaction (cheap when there are none). Spend-journal
        writes from other threads wait: they must not land in a batch that could be rolled back."""
        with self._pending_lock, self._spend_lock:
            rows, self._pending = self._pending, []
            if not rows:
                return
            try:
                if len(rows) == 1:
                    self.db.execute(_INSERT, rows[0])
                else:
                    with self.transaction():
                        self.db.executemany(_INSERT, rows)
            except sqlite3.DatabaseError as exc:
                raise AgentsynthError(f"{self.path}: the run store is damaged: {exc}") from None

    def results(self, task_id: str | None = None) -> Iterator[EpisodeResult]:
        """Stored episodes in a stable order (task, trial), streaming; optionally one task's only."""
        self.flush()
        query = "SELECT task_id, trial, result FROM episodes"
        args: tuple[Any, ...] = ()
        if task_id is not None:
            query, args = query + " WHERE task_id = ?", (task_id,)
        try:
            cursor = self.db.execute(query + " ORDER BY task_id, trial", args)
            while rows := cursor.fetchmany(256):
                for tid, trial, blob in rows:
                    try:
                        yield from_json(blob, EpisodeResult)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        raise AgentsynthError(f"{self.path}: episode ({tid!r}, trial {trial}) is corrupt: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise AgentsynthError(f"{self.path}: the run store is damaged: {exc}") from None

    def count(self) -> int:
        self.flush()
        return int(self._q("SELECT count(*) FROM episodes")[0][0])

    def counts(self) -> dict[tuple[str, str], int]:
        """``(status, error_kind) -> n`` without decoding any episode (cheap, for ``status``)."""
        self.flush()
        rows = self._q("SELECT status, error_kind, count(*) FROM episodes GROUP BY status, error_kind")
        return {(status, kind): n for status, kind, n in rows}

    def keys(self) -> set[tuple[str, int, int]]:
        """(task, trial, seed) of every stored episode."""
        self.flush()
        return {(r[0], int(r[1]), int(r[2])) for r in self._q("SELECT task_id, trial, seed FROM episodes")}

    def task_ids(self) -> list[str]:
        self.flush()
        return [r[0] for r in self._q("SELECT DISTINCT task_id FROM episodes ORDER BY task_id")]

    # --- the spend journal: what LLM requests may have cost, durable before they are sent ------------

    def reserve_spend(self, tokens: int, pico: int) -> int:
        """Record a request's worst case before it leaves: after a kill -9, a request that was in
        flight (and may have been billed) still counts against the budget on resume."""
        with self._spend_lock:
            cursor = self.db.execute("INSERT INTO spend(at, tokens, pico) VALUES (?, ?, ?)",
                                     (time.time(), tokens, pico))
            return int(cursor.lastrowid or 0)

    def settle_spend(self, entry: int, tokens: int, pico: int) -> None:
        """Replace a reservation by what the request really cost."""
        with self._spend_lock:
            self.db.execute("UPDATE spend SET tokens = ?, pico = ?, settled = 1 WHERE id = ?", (tokens, pico, entry))

    def spend_total(self) -> tuple[int, int, int]:
        """(tokens, pico-dollars, requests never settled) over every session of the run: settled
        requests at their cost, unsettled ones at their worst case."""
        with self._spend_lock:
            row = self.db.execute("SELECT count(*), coalesce(sum(tokens), 0), coalesce(sum(pico), 0), "
                                  "coalesce(sum(settled = 0), 0) FROM spend").fetchone()
        return (int(row[1]), int(row[2]), int(row[3])) if row[0] else (0, 0, 0)

    # --- events ----------------------------------------------------------------------------------

    def event(self, kind: str, **data: Any) -> None:
        self._q("INSERT INTO events(at, kind, data) VALUES (?, ?, ?)", (time.time(), kind, json.dumps(data, default=str)))

    def events(self) -> list[tuple[float, str, dict[str, Any]]]:
        return [(at, kind, json.loads(data)) for at, kind, data in self._q("SELECT at, kind, data FROM events ORDER BY id")]

    def last_event(self, *kinds: str) -> tuple[str, dict[str, Any]] | None:
        """The most recent event of one of ``kinds`` (e.g. did the last session finish?)."""
        marks = ",".join("?" * len(kinds))
        rows = self._q(f"SELECT kind, data FROM events WHERE kind IN ({marks}) ORDER BY id DESC LIMIT 1", kinds)
        return (rows[0][0], json.loads(rows[0][1])) if rows else None

    def integrity(self) -> str:
        """SQLite's own check of the file: ``ok`` or the problems found."""
        rows = self._q("PRAGMA integrity_check")
        return "; ".join(r[0] for r in rows)

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.db.close()


# --- secrets ---------------------------------------------------------------------------------------
