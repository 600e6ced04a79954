"""The SQLite run store: one file per run directory, WAL, one row per (task, trial, seed).

Writing a finished episode is one small transaction, so a killed run loses at
most the episodes that were in flight; on resume those are run again and the
finished ones are not.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import AgentsynthError
from .records import EpisodeResult, from_json, to_json

STORE_FILE = "run.sqlite"
STORE_FORMAT = 1

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
"""


class RunStore:
    """Durable record of a run. Safe to reopen; refuses files that are not agentsynth stores."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STORE_FILE
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise AgentsynthError(f"{self.run_dir}: run directory path is a file")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists()
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            if existed:
                tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if "meta" not in tables or "episodes" not in tables:
                    raise AgentsynthError(f"{self.path}: not an agentsynth run store (tables: {sorted(tables) or 'none'})")
                fmt = self.get_meta("store_format")
                if fmt is not None and int(fmt) > STORE_FORMAT:
                    raise AgentsynthError(f"{self.path}: store format {fmt} is newer than this agentsynth ({STORE_FORMAT})")
            self.db.executescript(_SCHEMA)
            if not existed:
                self.set_meta("store_format", STORE_FORMAT)
        except sqlite3.DatabaseError as exc:
            raise AgentsynthError(f"{self.path}: not a readable run store: {exc}") from None

    def get_meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        self.db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value, sort_keys=True, default=str)),
        )

    def put(self, result: EpisodeResult) -> None:
        """Store a finished episode (replacing an earlier row with the same key)."""
        self.db.execute(
            "INSERT OR REPLACE INTO episodes(task_id, trial, seed, status, error_kind, finished_at, result)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (result.task_id, result.trial, result.seed, result.status, result.error_kind, time.time(), to_json(result)),
        )

    def done_keys(self) -> set[tuple[str, int, int]]:
        return {(r[0], r[1], r[2]) for r in self.db.execute("SELECT task_id, trial, seed FROM episodes")}

    def results(self) -> Iterator[EpisodeResult]:
        """Stored episodes in a stable order (task, trial), streaming."""
        for (blob,) in self.db.execute("SELECT result FROM episodes ORDER BY task_id, trial"):
            yield from_json(blob, EpisodeResult)

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM episodes").fetchone()[0]

    def event(self, kind: str, **data: Any) -> None:
        self.db.execute(
            "INSERT INTO events(at, kind, data) VALUES (?, ?, ?)", (time.time(), kind, json.dumps(data, default=str))
        )

    def events(self) -> list[tuple[float, str, dict[str, Any]]]:
        return [(at, kind, json.loads(data)) for at, kind, data in self.db.execute("SELECT at, kind, data FROM events ORDER BY id")]

    def close(self) -> None:
        self.db.close()
