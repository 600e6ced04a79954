"""Checkers that read an MCP world's end state (never the agent's words).

- ``mcp_call``: call a tool (hidden ones too) or read a resource after the
  episode, and compare the result (or a JSON path into it) with ``equals`` /
  ``contains`` / ``regex`` / ``length``.
- ``mcp_file``: a file in the episode's world directory exists / has content.
- ``mcp_sql``: a query on an SQLite database in the world directory returns
  the expected value or rows.

All three fail (not crash) when the environment is not an MCP environment or
has no world directory, and say why in the verdict's detail.

What they read cannot be redirected by the agent (see the README, "What a checker reads"):
``mcp_call`` goes through the environment's checker session (a fresh server on the world by
default, never the agent's session); ``mcp_file`` and ``mcp_sql`` read the world only after the
agent's server was stopped, never through a symlink, never a file with several hard links, and
``mcp_sql`` queries a private copy of the database in which every table of the seeded world
must still be a table (a view the agent put in its place fails the check). Every read runs under
the environment's ``check_timeout`` and size limits; a server that hangs or crashes while a
checker calls it fails the check with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from agentsynth_kernel import Trajectory, Verdict

from . import jsonpath
from .convert import result_text, result_value
from .world import UnsafeFile, check_relative, read_world_file

_UNSET: Any = object()


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _equal(actual: Any, expected: Any) -> bool:
    if actual == expected and type(actual) is not bool and type(expected) is not bool:
        return True
    if isinstance(actual, bool) or isinstance(expected, bool):
        return actual is expected or (isinstance(actual, str) and actual.lower() == str(expected).lower())
    if isinstance(actual, (int, float)) and isinstance(expected, str):
        return str(actual) == expected
    if isinstance(actual, str) and isinstance(expected, (int, float)):
        return actual.strip() == str(expected)
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(_equal(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(_equal(actual[k], expected[k]) for k in actual)
    return False


class Expectation:
    """The comparisons every checker here shares; ``None`` / unset means "not checked"."""

    def __init__(self, equals: Any = _UNSET, contains: str | list[Any] | None = None, regex: str | None = None,
                 length: int | None = None, ignore_case: bool = False) -> None:
        self.equals, self.length, self.ignore_case = equals, length, ignore_case
        self.contains = [] if contains is None else (contains if isinstance(contains, list) else [contains])
        self.regex = re.compile(regex, re.IGNORECASE if ignore_case else 0) if regex else None

    @property
    def empty(self) -> bool:
        return self.equals is _UNSET and not self.contains and self.regex is None and self.length is None

    def compare(self, value: Any, text: str | None = None) -> tuple[bool, str]:
        """(passed, why). ``text`` is what contains/regex search (defaults to the value rendered)."""
        if text is None:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        if self.equals is not _UNSET and not _equal(value, self.equals):
            return False, f"got {_short(value)}, expected {_short(self.equals)}"
        if self.length is not None:
            try:
                size = len(value)
            except TypeError:
                return False, f"got {_short(value)}, which has no length (expected length {self.length})"
            if size != self.length:
                return False, f"length is {size}, expected {self.length} ({_short(value)})"
        for needle in self.contains:
            if isinstance(value, list) and not isinstance(needle, str):
                if not any(_equal(item, needle) for item in value):
                    return False, f"{_short(value)} does not contain {_short(needle)}"
                continue
            hay, sought = (text.lower(), str(needle).lower()) if self.ignore_case else (text, str(needle))
            if sought not in hay:
                return False, f"{_short(text)} does not contain {sought!r}"
        if self.regex is not None and not self.regex.search(text):
            return False, f"{_short(text)} does not match /{self.regex.pattern}/"
        return True, f"got {_short(value, 120)}"


async def _world(env: Any) -> Path | None:
    """The world directory, after the agent's server was stopped (when the environment can)."""
    freeze = getattr(env, "world_for_checks", None)
    if callable(freeze):
        return await freeze()
    return getattr(env, "world_dir", None)


def _limits(env: Any) -> tuple[float, int]:
    spec = getattr(env, "spec", None)
    timeout = float(getattr(env, "check_timeout", None) or 30.0)
    return timeout, int(getattr(spec, "max_check_bytes", 16 * 1024 * 1024))


def _small(value: Any, limit: int = 4096) -> Any:
    """``value`` for a verdict's data, or a note of its size: verdicts stay small."""
    try:
        size = len(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError, RecursionError):
        return None
    return value if size <= limit else {"truncated": True, "chars": size}


def _violation(env: Any, name: str, label: str) -> Verdict | None:
    problem = getattr(env, "violation", "")
    if problem:
        return Verdict(name, False, 0.0, f"{label}: the agent broke a limit of the world: {problem}")
    return None


async def _read(env: Any, world: Path, relative: str, limit: int, timeout: float) -> bytes | None:
    """A world file's bytes, read off the event loop under ``timeout`` (see world.read_world_file)."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(read_world_file, world, relative, limit), timeout)
    except TimeoutError:
        raise UnsafeFile(f"reading {relative} took longer than {timeout:g}s (check_timeout)") from None


class McpCall:
    """Call ``tool`` with ``arguments`` (or read ``resource``) at the end of the episode and compare.

    The compared value is the structured content, else the text (parsed as JSON
    when it is JSON); ``path`` (``$.items[0].status``) selects part of it;
    ``exists: false`` passes when the path is absent. ``is_error: true`` expects
    the call to fail (e.g. the ticket was deleted). With no comparison, the call
    only has to succeed.
    """

    def __init__(self, tool: str | None = None, arguments: dict[str, Any] | None = None, resource: str | None = None,
                 path: str | None = None, equals: Any = _UNSET, contains: str | list[Any] | None = None,
                 regex: str | None = None, length: int | None = None, exists: bool = True, is_error: bool = False,
                 ignore_case: bool = False, name: str = "mcp_call") -> None:
        if (tool is None) == (resource is None):
            raise ValueError("mcp_call needs exactly one of 'tool' or 'resource'")
        if arguments is not None and not isinstance(arguments, dict):
            raise ValueError("mcp_call: 'arguments' must be a mapping")
        if path is not None:
            jsonpath.parse(path)  # a bad path is a spec error, raised now
        self.tool, self.arguments, self.resource, self.path = tool, dict(arguments or {}), resource, path
        self.expect = Expectation(equals, contains, regex, length, ignore_case)
        self.exists, self.is_error, self.name = exists, is_error, name

    @property
    def label(self) -> str:
        what = f"{self.tool}({json.dumps(self.arguments, default=str)})" if self.tool else f"resource {self.resource}"
        return what + (f" {self.path}" if self.path else "")

    async def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        from mcp import MCPError

        if not callable(getattr(env, "call_tool", None)) or not callable(getattr(env, "read_resource", None)):
            return Verdict(self.name, False, 0.0, f"{self.label}: the environment is not an MCP environment")
        broken = _violation(env, self.name, self.label)
        if broken is not None:
            return broken
        from .environment import McpCheckFailed

        try:
            if self.tool is not None:
                result = await env.call_tool(self.tool, self.arguments)
                failed = bool(result.is_error)
            else:
                result = await env.read_resource(self.resource)
                failed = False
        except McpCheckFailed as exc:  # the server hung or crashed under the checker: not verified
            return Verdict(self.name, False, 0.0, f"{self.label}: the server broke during the check: {exc}"[:2000],
                           data={"error_kind": "environment"})
        except MCPError as exc:
            result, failed = None, True
            error_text = exc.message
        else:
            error_text = result_text(result) if failed else ""
        if failed != self.is_error:
            if failed:
                return Verdict(self.name, False, 0.0, f"{self.label}: the call failed: {error_text[:300]}")
            return Verdict(self.name, False, 0.0, f"{self.label}: expected an error, but the call succeeded")
        if failed:  # an error was expected; compare its message
            ok, why = self.expect.compare(error_text)
            return Verdict(self.name, ok, float(ok), f"{self.label}: error {why}")
        value = result_value(result)
        text = None
        if self.path is not None:
            try:
                value = jsonpath.get(value, self.path)
            except jsonpath.PathError as exc:
                ok = not self.exists
                return Verdict(self.name, ok, float(ok),
                               f"{self.label}: {'absent as expected' if ok else f'path not found: {exc}'}")
            if not self.exists:
                return Verdict(self.name, False, 0.0, f"{self.label}: expected no value, got {_short(value)}")
        elif result is not None:
            text = result_text(result)
        ok, why = self.expect.compare(value, text)
        return Verdict(self.name, ok, float(ok), f"{self.label}: {why}", data={"value": _small(value)})


class McpFile:
    """A file in the episode's world directory: ``exists`` (default true), its text ``equals`` /
    ``contains`` / ``regex``, its number of non-empty ``lines``, or (``json_path``) a value inside
    a JSON file ``equals`` something."""

    def __init__(self, file: str, exists: bool = True, equals: Any = _UNSET, contains: str | list[Any] | None = None,
                 regex: str | None = None, lines: int | None = None, json_path: str | None = None,
                 ignore_case: bool = False, name: str = "mcp_file") -> None:
        if json_path is not None:
            jsonpath.parse(json_path)
        file = check_relative(str(file), "file")
        self.file, self.exists, self.lines, self.json_path, self.name = file, exists, lines, json_path, name
        self.expect = Expectation(equals, contains, regex, None, ignore_case)

    async def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        world = await _world(env)
        if world is None:
            return Verdict(self.name, False, 0.0, f"{self.file}: the environment has no world directory ('world:')")
        broken = _violation(env, self.name, self.file)
        if broken is not None:
            return broken
        timeout, limit = _limits(env)
        try:
            raw = await _read(env, world, self.file, limit, timeout)
        except UnsafeFile as exc:
            return Verdict(self.name, False, 0.0, f"{self.file}: not read: {exc}")
        if raw is None:
            ok = not self.exists
            return Verdict(self.name, ok, float(ok), f"{self.file}: {'absent as expected' if ok else 'no such file'}")
        if not self.exists:
            return Verdict(self.name, False, 0.0, f"{self.file}: exists, expected it to be absent")
        text = raw.decode("utf-8", errors="replace")
        if self.lines is not None:
            count = sum(1 for line in text.splitlines() if line.strip())
            if count != self.lines:
                return Verdict(self.name, False, 0.0, f"{self.file}: {count} non-empty lines, expected {self.lines}")
        value: Any = text
        if self.json_path is not None:
            try:
                value = jsonpath.get(json.loads(text), self.json_path)
            except ValueError as exc:
                return Verdict(self.name, False, 0.0, f"{self.file}: not JSON: {exc}")
            except jsonpath.PathError as exc:
                return Verdict(self.name, False, 0.0, f"{self.file}: {exc}")
        elif self.expect.equals is not _UNSET and isinstance(self.expect.equals, str):
            value = text.strip()
            self.expect.equals = self.expect.equals.strip()
        ok, why = self.expect.compare(value, text if self.json_path is None else None)
        return Verdict(self.name, ok, float(ok), f"{self.file}: {why}")


class McpSql:
    """Run ``query`` (read-only) on the SQLite file ``db`` in the world directory and compare:
    ``equals`` a scalar (1x1 result), a list of values (one column), or a list of rows;
    ``rows``: the number of rows. Row order matters only with ``ordered: true``."""

    def __init__(self, db: str, query: str, equals: Any = _UNSET, rows: int | None = None, ordered: bool = False,
                 name: str = "mcp_sql") -> None:
        if equals is _UNSET and rows is None:
            raise ValueError("mcp_sql needs 'equals' or 'rows'")
        db = check_relative(str(db), "db")
        self.db, self.query, self.equals, self.rows, self.ordered, self.name = db, query, equals, rows, ordered, name

    async def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        world = await _world(env)
        if world is None:
            return Verdict(self.name, False, 0.0, f"{self.db}: the environment has no world directory ('world:')")
        broken = _violation(env, self.name, self.db)
        if broken is not None:
            return broken
        timeout, _ = _limits(env)
        limit = int(getattr(getattr(env, "spec", None), "max_world_bytes", 1 << 30))
        seeded = (getattr(env, "seeded_schemas", None) or {}).get(self.db, {})
        private = Path(tempfile.mkdtemp(prefix=f"agentsynth-mcp-{os.getpid()}-check-"))
        try:
            copies: dict[str, bytes | None] = {}
            try:
                for suffix in ("", "-wal", "-journal"):
                    copies[suffix] = await _read(env, world, self.db + suffix, limit, timeout)
            except UnsafeFile as exc:
                return Verdict(self.name, False, 0.0, f"{self.db}: not read: {exc}")
            if copies[""] is None:
                return Verdict(self.name, False, 0.0, f"{self.db}: no such database file")
            for suffix, raw in copies.items():
                if raw is not None:
                    (private / f"db{suffix}").write_bytes(raw)
            try:
                result = await asyncio.wait_for(
                    asyncio.to_thread(_query, private / "db", self.query, seeded, time.monotonic() + timeout),
                    timeout + 1)
            except TimeoutError:
                return Verdict(self.name, False, 0.0, f"{self.db}: the query took longer than {timeout:g}s (check_timeout)")
            except _Shadowed as exc:
                return Verdict(self.name, False, 0.0, f"{self.db}: {exc}")
            except sqlite3.Error as exc:
                text = "took longer than the check_timeout" if "interrupt" in str(exc) else str(exc)
                return Verdict(self.name, False, 0.0, f"{self.db}: query failed: {text}")
        finally:
            await asyncio.to_thread(shutil.rmtree, private, True)
        if self.rows is not None and len(result) != self.rows:
            return Verdict(self.name, False, 0.0, f"{self.db}: {len(result)} rows, expected {self.rows}",
                           data={"rows": result[:50]})
        if self.equals is _UNSET:
            return Verdict(self.name, True, 1.0, f"{self.db}: {len(result)} rows", data={"rows": result[:50]})
        actual: Any = result
        expected = self.equals
        if not isinstance(expected, list):
            if len(result) != 1 or len(result[0]) != 1:
                return Verdict(self.name, False, 0.0, f"{self.db}: expected one value, got {_short(result)}")
            actual = result[0][0]
        else:
            if expected and not isinstance(expected[0], list) and all(len(r) == 1 for r in result):
                actual = [r[0] for r in result]
            if not self.ordered:
                actual, expected = sorted(actual, key=_sort_key), sorted(expected, key=_sort_key)
        ok = _equal(actual, expected)
        detail = f"{self.db}: got {_short(actual)}" + ("" if ok else f", expected {_short(expected)}")
        return Verdict(self.name, ok, float(ok), detail, data={"value": actual})


class _Shadowed(Exception):
    """A table of the seeded world was replaced by something else (a view, a trigger's target ...)."""


def _query(path: Path, query: str, seeded: dict[str, str], deadline: float) -> list[list[Any]]:
    """Run a checker's query on a private copy: tables of the seeded world must still be tables,
    the query may not write, and it is interrupted at ``deadline``."""
    conn = sqlite3.connect(path, timeout=1)
    try:
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        now = dict(conn.execute("SELECT name, type FROM sqlite_schema").fetchall())
        for name, kind in seeded.items():
            if kind == "table" and name in now and now[name] != "table":
                raise _Shadowed(f"{name!r} was a table in the seeded world and is now a {now[name]}: checkers read "
                                "the world's real tables, not objects standing in for them")
        conn.execute("PRAGMA query_only = ON")
        return [list(row) for row in conn.execute(query).fetchmany(100_000)]
    finally:
        conn.close()


def _sort_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
