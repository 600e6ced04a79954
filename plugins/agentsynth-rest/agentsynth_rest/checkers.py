"""Checkers of the ``rest`` world's end state.

- ``http``: a request of the checker's own (its own client, never the agent's connection) whose
  status and JSON answer, picked by a JSON path, must equal / contain / match a value.
- ``rest_db``: a SQL query on the app's SQLite file, read directly (read-only) from the world
  directory: the backend's state, whatever the API says about it.
"""

from __future__ import annotations

import math
import re
import sqlite3
import time
from fractions import Fraction
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

from agentsynth_kernel import Trajectory, Verdict

from .jsonpath import JsonPath

_UNSET: Any = object()
# what a rest_db query may bring back: a world the agent filled (rows, or one value built from all
# of them) fails the check instead of taking the checker's memory
MAX_ROWS = 100_000
MAX_VALUE_BYTES = 64 * 2**20


def same(actual: Any, expected: Any, tolerance: float = 0.0) -> bool:
    """Type-aware equality: numbers within ``tolerance`` (1 == 1.0), booleans only equal booleans,
    lists in order, dicts by key."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(actual, int | float) and isinstance(expected, int | float):
        if not tolerance:
            return actual == expected
        try:
            return math.isclose(actual, expected, rel_tol=0.0, abs_tol=tolerance)
        except OverflowError:  # an int past a float's range (JSON has no limit): exact arithmetic
            return abs(Fraction(actual) - Fraction(expected)) <= Fraction(tolerance)
    if isinstance(actual, list | tuple) and isinstance(expected, list | tuple):
        return len(actual) == len(expected) and all(same(a, e, tolerance) for a, e in zip(actual, expected,
                                                                                               strict=True))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(same(actual[k], expected[k], tolerance) for k in actual)
    return type(actual) is type(expected) and actual == expected


def contains(actual: Any, expected: Any) -> bool:
    """A string holds a substring; a list holds an element (every element of a list given); a
    dict holds the given keys with equal values."""
    if isinstance(actual, str):
        return isinstance(expected, str) and expected in actual
    if isinstance(actual, list):
        wanted = expected if isinstance(expected, list) else [expected]
        return all(any(same(a, w) or (isinstance(w, dict) and isinstance(a, dict) and contains(a, w))
                       for a in actual) for w in wanted)
    if isinstance(actual, dict) and isinstance(expected, dict):
        return all(k in actual and (same(actual[k], v) or contains(actual[k], v) and isinstance(v, dict))
                   for k, v in expected.items())
    return False


def _short(value: Any, limit: int = 200) -> str:
    try:
        text = repr(value)
    except RecursionError:  # a JSON answer nested near Python's limit: the detail must not raise
        return "<a value nested too deeply to show>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


class HttpChecker:
    """``{type: http, path: /tickets/3, json_path: $.status, equals: closed}``.

    ``method`` (GET), ``query`` (a mapping), ``body`` (JSON), ``status`` (an int or a list; default
    any 2xx; the answer is read up to the world's ``max_check_bytes``); then one of ``equals`` / ``contains`` / ``matches`` (a regex the whole value, as text,
    must match) / ``exists`` (true/false) on the value at ``json_path`` (default ``$``). A path with
    ``[*]`` or a filter gives the list of its matches; a plain path its one value.
    """

    world_state = True

    def __init__(self, path: str, method: str = "GET", query: dict[str, Any] | None = None, body: Any = None,
                 status: int | list[int] | None = None, json_path: str = "$", equals: Any = _UNSET,
                 contains: Any = _UNSET, matches: str | None = None, exists: bool | None = None,
                 tolerance: float = 0.0, name: str = "http") -> None:
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"path: expected a path starting with '/', got {path!r}")
        self.path, self.method, self.query, self.body = path, method.upper(), dict(query or {}), body
        self.status = [status] if isinstance(status, int) else list(status) if status is not None else None
        self.json_path = JsonPath(json_path)
        chosen = [k for k, v in (("equals", equals), ("contains", contains), ("matches", matches),
                                 ("exists", exists)) if v is not _UNSET and v is not None]
        if len(chosen) > 1:
            raise ValueError(f"give one of equals / contains / matches / exists, not {' and '.join(chosen)}")
        if not chosen and self.status is None:
            raise ValueError("the http checker needs a status or one of equals / contains / matches / exists")
        self.equals, self.contains, self.exists, self.tolerance = equals, contains, exists, tolerance
        self.matches = re.compile(matches) if matches is not None else None
        self.name = name

    async def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        if not callable(getattr(env, "checker_client", None)):
            raise TypeError(f"the http checker needs the 'rest' environment, got {type(env).__name__}")
        import json

        client = env.checker_client()
        label = f"{self.method} {self.path}"
        try:
            content = json.dumps(self.body).encode() if self.body is not None else None
            obs = await env.send(client, self.method, self.path, list(self.query.items()), {}, content,
                                 limit=env.spec.max_check_bytes)
        finally:
            await client.aclose()
        data = obs.data or {}
        status = data.get("status")
        if status is None:
            return Verdict(self.name, False, 0.0, f"{label}: {obs.content[:300]}")
        if self.status is not None and status not in self.status:
            return Verdict(self.name, False, 0.0, f"{label} answered {status}, expected {self.status}")
        if self.status is None and not 200 <= status < 300:
            return Verdict(self.name, False, 0.0, f"{label} answered {status}: {obs.content[:200]}")
        if self.equals is _UNSET and self.contains is _UNSET and self.matches is None and self.exists is None:
            return Verdict(self.name, True, 1.0, f"{label} answered {status}")
        if "json" not in data:
            return Verdict(self.name, False, 0.0, f"{label}: the answer is not (complete) JSON")
        try:
            return self._compare(data["json"], label)
        except RecursionError:  # an answer nested near Python's limit fails the check, it does not end the episode
            return Verdict(self.name, False, 0.0, f"{label} {self.json_path.text}: the value is nested too deeply "
                           "to compare")

    def _compare(self, doc: Any, label: str) -> Verdict:
        import json

        found = self.json_path.find(doc)
        where = f"{label} {self.json_path.text}"
        if self.exists is not None:
            ok = bool(found) == self.exists
            return Verdict(self.name, ok, float(ok), f"{where}: {'found' if found else 'nothing'} "
                           f"(expected {'a value' if self.exists else 'nothing'})")
        if self.json_path.single:
            if not found:
                return Verdict(self.name, False, 0.0, f"{where}: no value there")
            value = found[0]
        else:
            value = found
        if self.equals is not _UNSET:
            ok = same(value, self.equals, self.tolerance)
            what = f"= {_short(value)}, expected {_short(self.equals)}"
        elif self.contains is not _UNSET:
            ok = contains(value, self.contains)
            what = f"= {_short(value)}, expected it to contain {_short(self.contains)}"
        else:
            assert self.matches is not None
            text = value if isinstance(value, str) else json.dumps(value)
            ok = self.matches.fullmatch(text) is not None
            what = f"= {_short(value)}, expected a match of {self.matches.pattern!r}"
        return Verdict(self.name, ok, float(ok), f"{where} {what}")


class RestDbChecker:
    """``{type: rest_db, db: tickets.db, query: "SELECT ...", equals: [[...], ...]}``.

    The app's SQLite file in the world directory is opened read-only (a fresh connection of the
    checker's own) and the query's rows must equal ``equals``: a list of rows (lists), as a
    multiset unless ``ordered: true``; a scalar for a one-value result. ``check_seconds`` bounds
    the query.
    """

    world_state = True

    def __init__(self, query: str, equals: Any = _UNSET, db: str = "app.db", ordered: bool = False,
                 tolerance: float = 0.0, check_seconds: float = 10.0, name: str = "rest_db") -> None:
        if equals is _UNSET:
            raise ValueError("the rest_db checker needs 'equals' (a value, or a list of rows)")
        if not query.lstrip().lower().startswith(("select", "with")):
            raise ValueError(f"query: expected a SELECT query, got {query[:60]!r}")
        where = PurePosixPath(db.replace("\\", "/"))
        if not db or where.is_absolute() or ".." in where.parts or PureWindowsPath(db).drive:
            raise ValueError(f"db: expected a file name inside the world's directory, got {db!r}")
        self.query, self.equals, self.db, self.ordered = query, equals, db, ordered
        self.tolerance, self.check_seconds, self.name = tolerance, check_seconds, name

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        if not callable(getattr(env, "state_path", None)):
            raise TypeError(f"the rest_db checker needs the 'rest' environment, got {type(env).__name__}")
        try:
            path = env.state_path(self.db)  # the name is inside (checked above): outside is a symlink the app made
        except RuntimeError as exc:
            return Verdict(self.name, False, 0.0, f"{self.db}: {exc}")
        if not path.is_file():
            return Verdict(self.name, False, 0.0, f"{self.db}: the app's database does not exist")
        deadline = time.monotonic() + self.check_seconds
        # Every failure here is the world's (the agent drove the app to lock, replace or break its
        # file): a failed check, never an exception that would leave the episode unscored. A query
        # the pack got wrong fails its oracle in `pack validate` the same way.
        try:
            conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=self.check_seconds)
        except sqlite3.Error as exc:
            return Verdict(self.name, False, 0.0, f"{self.db}: cannot open the app's database: {exc}")
        try:
            conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
            try:
                conn.execute("PRAGMA trusted_schema = OFF")  # a view or trigger in the file runs no side effects
                conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)  # one value past it: SQLITE_TOOBIG
                fetched = conn.execute(self.query).fetchmany(MAX_ROWS + 1)
                if len(fetched) > MAX_ROWS:
                    return Verdict(self.name, False, 0.0, f"{self.db}: the query {self.query[:80]!r} returned more "
                                   f"than {MAX_ROWS:,} rows")
                rows = [list(r) for r in fetched]
            except sqlite3.Error as exc:
                if time.monotonic() > deadline:
                    return Verdict(self.name, False, 0.0, f"the query ran past {self.check_seconds:g} s")
                return Verdict(self.name, False, 0.0, f"{self.db}: the query {self.query[:80]!r} failed: "
                               f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()
        if not isinstance(self.equals, list):
            value = rows[0][0] if len(rows) == 1 and len(rows[0]) == 1 else rows
            ok = same(value, self.equals, self.tolerance)
            return Verdict(self.name, ok, float(ok), f"{self.query} -> {_short(value)}, expected {_short(self.equals)}")
        expected = [e if isinstance(e, list) else [e] for e in self.equals]
        if self.ordered:
            ok = same(rows, expected, self.tolerance)
        else:
            key = repr
            ok = len(rows) == len(expected) and same(sorted(rows, key=key), sorted(expected, key=key), self.tolerance)
        return Verdict(self.name, ok, float(ok), f"{self.query} -> {_short(rows, 300)}, expected "
                       f"{_short(expected, 300)}")
