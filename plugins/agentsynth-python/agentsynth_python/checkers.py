"""Checkers that read the python world's end state, after every process of the agent is dead.

- ``python_file``: a world file exists / equals / contains / matches, or a JSON value at a path,
  or a CSV cell / row count. Read on the host, never through a symlink or hard link, never a
  FIFO, under ``max_check_bytes``.
- ``python_value``: a Python expression evaluated in a FRESH sandbox process over the read-only
  world (``python -I -S``, clean environment, the world not on ``sys.path`` unless
  ``world_on_path``), its JSON value compared on the HOST with ``equals`` / ``contains``.
- ``python_stdout``: a command run in a FRESH sandbox over the read-only world; its stdout and
  exit status compared on the host.

``files`` (value and stdout checkers) are pack files the agent never saw, bound read-only at
``/check/NAME`` (hidden tests). A world that broke its limits fails every check.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

from agentsynth_kernel import Trajectory, Verdict

from .env import CheckError
from .files import UnsafeFile, check_relative, read_world_file

_UNSET: Any = object()


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = repr(text) if isinstance(value, str) else text
    return text if len(text) <= limit else text[:limit] + "..."


def equal(actual: Any, expected: Any, tolerance: float) -> bool:
    """Type-aware equality: numbers within ``tolerance`` (a numeric string counts as its number),
    lists in order, dicts by key; bools only equal bools."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, int | float):
        if isinstance(actual, str):
            try:
                actual = float(actual.strip())
            except ValueError:
                return False
        if isinstance(actual, int | float):
            return math.isfinite(actual) and math.isclose(actual, expected, rel_tol=0, abs_tol=tolerance)
        return False
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            equal(a, e, tolerance) for a, e in zip(actual, expected, strict=True))
    if isinstance(expected, dict):
        return isinstance(actual, dict) and actual.keys() == expected.keys() and all(
            equal(actual[k], expected[k], tolerance) for k in expected)
    return bool(actual == expected)


def json_path(value: Any, path: str) -> Any:
    """``$.a.b[0]`` into ``value``; KeyError with the failing step when it is absent."""
    steps = re.findall(r"\.([^.\[\]]+)|\[(\d+)\]", path.removeprefix("$"))
    if "".join(f".{k}" if k else f"[{i}]" for k, i in steps) != path.removeprefix("$"):
        raise ValueError(f"json_path {path!r}: use $.key.key[0]")
    for key, index in steps:
        if key:
            if not isinstance(value, dict) or key not in value:
                raise KeyError(f"no key {key!r}")
            value = value[key]
        else:
            if not isinstance(value, list) or int(index) >= len(value):
                raise KeyError(f"no index {index}")
            value = value[int(index)]
    return value


class Expect:
    """``equals`` / ``contains`` / ``regex`` shared by the checkers."""

    def __init__(self, equals: Any, contains: Any, regex: str | None, tolerance: float, ignore_case: bool) -> None:
        self.equals, self.tolerance, self.ignore_case = equals, tolerance, ignore_case
        self.contains = [] if contains is None else (contains if isinstance(contains, list) else [contains])
        self.regex = re.compile(regex, re.I if ignore_case else 0) if regex else None
        if tolerance < 0:
            raise ValueError("tolerance must be >= 0")

    @property
    def empty(self) -> bool:
        return self.equals is _UNSET and not self.contains and self.regex is None

    def compare(self, value: Any) -> tuple[bool, str]:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if self.equals is not _UNSET:
            a, e = value, self.equals
            if isinstance(a, str) and isinstance(e, str):
                a, e = a.strip(), e.strip()
                if self.ignore_case:
                    a, e = a.lower(), e.lower()
            if not equal(a, e, self.tolerance):
                return False, f"got {_short(value)}, expected {_short(self.equals)}"
        for needle in self.contains:
            if isinstance(value, list) and not isinstance(needle, str):
                if not any(equal(v, needle, self.tolerance) for v in value):
                    return False, f"{_short(value)} does not contain {_short(needle)}"
                continue
            hay, want = (text.lower(), str(needle).lower()) if self.ignore_case else (text, str(needle))
            if want not in hay:
                return False, f"{_short(text)} does not contain {want!r}"
        if self.regex is not None and not self.regex.search(text):
            return False, f"{_short(text)} does not match /{self.regex.pattern}/"
        return True, f"got {_short(value, 120)}"


# What parsing and comparing an agent's data on the host can raise: JSON nested past the recursion
# limit (RecursionError, also from json.dumps of a value that only just loaded), a CSV field past
# csv.field_size_limit() or a NUL (csv.Error), malformed text (ValueError), an absent key. Any of
# them fails the check; none may leave the episode unscored (a policy could zero a reward at will).
UNREADABLE = (ValueError, KeyError, RecursionError, csv.Error, MemoryError)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to be read"
    if isinstance(exc, MemoryError):
        return "too big to be read"
    return str(exc)[:500]


def _python_env(env: Any) -> Any:
    if not callable(getattr(env, "world_for_checks", None)) or not callable(getattr(env, "evaluate", None)):
        raise TypeError(f"this checker needs the 'python' environment, got {type(env).__name__}")
    return env


def _broken(env: Any, name: str, label: str) -> Verdict | None:
    if env.violation:
        return Verdict(name, False, 0.0, f"{label}: the agent broke a limit of the world: {env.violation}")
    return None


def _check_files(base_dir: Path | None, files: list[str] | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in files or []:
        path = (Path(base_dir or ".") / item).resolve()
        if not path.is_file():
            raise ValueError(f"files: {item!r} is not a file of the pack ({path})")
        out.append((str(path), path.name))
    names = [n for _, n in out]
    if len(set(names)) != len(names):
        raise ValueError("files: two check files have the same name")
    return out


class PythonFile:
    """A world file (``file``, relative) checked on the host.

    ``exists: false`` passes when it is absent. With ``json_path`` the file is parsed as JSON and
    the value at the path compared; with ``csv: {column: NAME, row: N}`` or ``csv: {column: NAME,
    where: {COL: VALUE}}`` one cell is compared (the row must be unique), with ``rows: N`` the
    number of data rows; otherwise the text (stripped for ``equals``).
    """

    world_state = True

    def __init__(self, file: str, exists: bool = True, equals: Any = _UNSET, contains: Any = None,
                 regex: str | None = None, json_path: str | None = None, csv: dict[str, Any] | None = None,
                 rows: int | None = None, tolerance: float = 1e-6, ignore_case: bool = False,
                 name: str = "python_file") -> None:
        check_relative(file)
        if json_path is not None and csv is not None:
            raise ValueError("python_file: give json_path or csv, not both")
        if csv is not None:
            if not isinstance(csv, dict) or "column" not in csv or ("row" in csv) == ("where" in csv):
                raise ValueError("python_file: csv needs 'column' and exactly one of 'row' (index) or 'where' (mapping)")
        if json_path is not None:
            _validate_path(json_path)
        self.file, self.exists, self.json_path, self.csv, self.rows = file, exists, json_path, csv, rows
        self.expect = Expect(equals, contains, regex, tolerance, ignore_case)
        self.name = name

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        env = _python_env(env)
        broken = _broken(env, self.name, self.file)
        if broken is not None:
            return broken
        world = env.world_for_checks()
        try:
            data = read_world_file(world, self.file, env.spec.max_check_bytes)
        except UnsafeFile as exc:
            return Verdict(self.name, False, 0.0, f"{self.file}: {exc}")
        if data is None:
            ok = not self.exists
            return Verdict(self.name, ok, float(ok), f"{self.file} does not exist")
        if not self.exists:
            return Verdict(self.name, False, 0.0, f"{self.file} exists, expected it not to")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return Verdict(self.name, False, 0.0, f"{self.file} is not UTF-8 text")
        try:
            value, what = self._select(text)
            if self.expect.empty and self.rows is None:
                return Verdict(self.name, True, 1.0, f"{self.file} exists")
            ok, detail = self.expect.compare(value) if not self.expect.empty else (True, "")
            if ok and self.rows is not None:
                count = len(list(csv.DictReader(io.StringIO(text))))
                ok, detail = count == self.rows, f"{count} data rows, expected {self.rows}"
        except UNREADABLE as exc:  # the agent's bytes, parsed on the host: a failed check, never a crash
            return Verdict(self.name, False, 0.0, f"{self.file}: {_reason(exc)}")
        return Verdict(self.name, ok, float(ok), f"{self.file}{what}: {detail}")

    def _select(self, text: str) -> tuple[Any, str]:
        if self.json_path is not None:
            try:
                doc = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"not JSON ({exc})") from None
            return json_path(doc, self.json_path), f" {self.json_path}"
        if self.csv is not None:
            rows = list(csv.DictReader(io.StringIO(text)))
            column = str(self.csv["column"])
            if "row" in self.csv:
                index = int(self.csv["row"])
                if index >= len(rows):
                    raise KeyError(f"has {len(rows)} data rows, no row {index}")
                row = rows[index]
                where = f" row {index}"
            else:
                cond = {str(k): str(v) for k, v in dict(self.csv["where"]).items()}
                hits = [r for r in rows if all((r.get(k) or "").strip() == v for k, v in cond.items())]
                if len(hits) != 1:
                    raise KeyError(f"{len(hits)} rows where {cond}, expected exactly one")
                row = hits[0]
                where = f" where {cond}"
            if column not in row:
                raise KeyError(f"no column {column!r} (columns: {', '.join(row)})")
            return (row[column] or "").strip(), f"{where} column {column!r}"
        return text, ""


def _validate_path(path: str) -> None:
    """A malformed path is a spec error (raised at load), an absent key is not."""
    try:
        json_path({}, path)
    except KeyError:
        pass


class PythonValue:
    """``expr`` evaluated in a fresh sandbox over the frozen, read-only world; its JSON value
    compared with ``equals`` (numbers within ``tolerance``) / ``contains``.

    The expression sees ``json``, ``csv``, ``math``, ``os``, ``Path`` and ``read_json(path)``,
    ``read_csv(path)`` (a list of dicts), ``read_text(path)``; ``setup`` runs first (statements).
    ``world_on_path: true`` lets it import the agent's modules: that runs the agent's code in the
    checker, so compare values the agent cannot know (hidden inputs), never a bare True.
    """

    world_state = True

    def __init__(self, expr: str, equals: Any = _UNSET, contains: Any = None, setup: str = "",
                 tolerance: float = 1e-6, world_on_path: bool = False, files: list[str] | None = None,
                 name: str = "python_value", base_dir: Path | None = None) -> None:
        if not isinstance(expr, str) or not expr.strip():
            raise ValueError("python_value: 'expr' must be a Python expression")
        try:
            compile(expr, "<expr>", "eval")
            compile(setup or "", "<setup>", "exec")
        except SyntaxError as exc:
            raise ValueError(f"python_value: {exc.msg} in {'expr' if exc.filename == '<expr>' else 'setup'}") from None
        self.expect = Expect(equals, contains, None, tolerance, False)
        if self.expect.empty:
            raise ValueError("python_value needs 'equals' or 'contains'")
        self.expr, self.setup, self.world_on_path, self.name = expr, setup, world_on_path, name
        self.files = _check_files(base_dir, files)

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        env = _python_env(env)
        broken = _broken(env, self.name, self.expr)
        if broken is not None:
            return broken
        try:
            value = env.evaluate(self.expr, setup=self.setup, world_on_path=self.world_on_path,
                                 check_files=self.files)
        except CheckError as exc:
            return Verdict(self.name, False, 0.0, f"{_short(self.expr, 80)}: {exc}")
        try:
            ok, detail = self.expect.compare(value)
        except UNREADABLE as exc:
            return Verdict(self.name, False, 0.0, f"{_short(self.expr, 80)}: the value is {_reason(exc)}")
        return Verdict(self.name, ok, float(ok), f"{_short(self.expr, 80)}: {detail}")


class PythonStdout:
    """``command`` (a shell line or an argv list) run in a fresh sandbox over the frozen world;
    its stdout compared with ``equals`` / ``contains`` / ``regex`` and its exit status with
    ``returncode`` (default 0; ``null`` for any)."""

    world_state = True

    def __init__(self, command: str | list[str], equals: Any = _UNSET, contains: Any = None, regex: str | None = None,
                 returncode: int | None = 0, files: list[str] | None = None, ignore_case: bool = False,
                 name: str = "python_stdout", base_dir: Path | None = None) -> None:
        if isinstance(command, str) and command.strip():
            self.argv = ["/bin/sh", "-c", command]
        elif isinstance(command, list) and command and all(isinstance(a, str) for a in command):
            self.argv = list(command)
        else:
            raise ValueError("python_stdout: 'command' must be a shell line or a list of strings")
        self.expect = Expect(equals, contains, regex, 1e-9, ignore_case)
        if self.expect.empty and returncode is None:
            raise ValueError("python_stdout needs an expectation (equals / contains / regex / returncode)")
        self.label = command if isinstance(command, str) else " ".join(command)
        self.returncode, self.name = returncode, name
        self.files = _check_files(base_dir, files)

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        env = _python_env(env)
        broken = _broken(env, self.name, self.label)
        if broken is not None:
            return broken
        data, why, code = env.run_check("exec", argv=self.argv, check_files=self.files)
        if why:
            return Verdict(self.name, False, 0.0, f"{self.label}: stopped: {why} (check_seconds)")
        out = data.decode("utf-8", "replace")
        if self.returncode is not None and code != self.returncode:
            return Verdict(self.name, False, 0.0, f"{self.label}: exit status {code}, expected {self.returncode}; "
                                                  f"stdout {_short(out)}")
        if self.expect.empty:
            return Verdict(self.name, True, 1.0, f"{self.label}: exit status {code}")
        ok, detail = self.expect.compare(out)
        return Verdict(self.name, ok, float(ok), f"{self.label}: {detail}")
