"""Reading spec and pack files: YAML with limits (size, depth, aliases), ``${VAR}`` expansion and
the content hash that names what a run ran."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError
from ..secrets import is_secret_key, remember
from .hints import _describe

MAX_FILE_BYTES = 5 * 1024 * 1024  # specs and packs are small; a bigger file is a mistake (or an attack)
MAX_DEPTH = 50  # a real pack nests a dozen levels at most
MAX_VALUES = 1_000_000  # values after YAML aliases are expanded (a "billion laughs" file stops here)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: a 5 MB scalar parses in ~0.1 s


class _WholeReference(str):
    """An unquoted YAML value that is one ``${...}``: it takes the type of what it expands to."""


class _SpecLoader(_Loader):  # type: ignore[misc,valid-type]
    """The safe loader, marking unquoted ``${...}`` values (quoted ones stay strings)."""


_SpecLoader.add_implicit_resolver("!agentsynth/reference", re.compile(r"^\$\{[^{}]*\}$"), ["$"])
_SpecLoader.add_constructor("!agentsynth/reference", lambda loader, node: _WholeReference(loader.construct_scalar(node)))


def read_yaml(path: Path, *, loader: type = _Loader) -> Any:
    """Parse a YAML file; a missing file, a syntax error, a file over 5 MB or nested more than 50
    levels is a SpecError (with line and column for syntax errors), never a hang or a traceback."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SpecError(str(path), ["file not found"]) from None
    except IsADirectoryError:
        raise SpecError(str(path), ["is a directory, expected a YAML file"]) from None
    except OSError as exc:
        raise SpecError(str(path), [f"cannot read: {exc}"]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise SpecError(str(path), [f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB: not a spec or pack"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), [f"cannot read: not UTF-8 text ({exc})"]) from None
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(str(path), [f"{where}invalid YAML: {problem}"]) from None
    except RecursionError:
        raise SpecError(str(path), [f"nested more than {MAX_DEPTH} levels deep"]) from None
    except (TypeError, ValueError) as exc:  # e.g. an unhashable key the constructor trips on
        raise SpecError(str(path), [f"invalid YAML: {exc}"]) from None
    check_shape(data, str(path))
    return data


class _ShapeError(Exception):
    def __init__(self, message: str) -> None:
        self.message, self.path = message, ""

    def inside(self, segment: str) -> _ShapeError:
        self.path = segment + ("." + self.path if self.path and not self.path.startswith("[") else self.path)
        return self


def check_shape(data: Any, source: str) -> None:
    """Refuse data nested deeper than MAX_DEPTH, with more than MAX_VALUES values once aliases are
    expanded, or with an alias that contains itself: the structuring code after this recurses."""
    seen: dict[int, tuple[int, int]] = {}  # id(container) -> (values, height): a shared alias is walked once
    active: set[int] = set()
    total = 0

    def walk(node: Any, depth: int) -> tuple[int, int]:
        nonlocal total
        if not isinstance(node, (dict, list)):
            return 1, 0
        key = id(node)
        if key in active:
            raise _ShapeError("a YAML alias contains itself")
        size, height = seen.get(key) or (0, 0)
        if not size:
            if depth >= MAX_DEPTH:
                raise _ShapeError(f"nested more than {MAX_DEPTH} levels deep")
            active.add(key)
            size = 1
            for segment, child in (((str(k), v) for k, v in node.items()) if isinstance(node, dict)
                                   else ((f"[{i}]", v) for i, v in enumerate(node))):
                try:
                    child_size, child_height = walk(child, depth + 1)
                except _ShapeError as exc:
                    raise exc.inside(segment) from None
                size += child_size
                height = max(height, child_height + 1)
            active.discard(key)
            seen[key] = (size, height)
        elif depth + height > MAX_DEPTH:
            raise _ShapeError(f"nested more than {MAX_DEPTH} levels deep")
        total += size
        if total > MAX_VALUES:
            raise _ShapeError(f"more than {MAX_VALUES:,} values (after expanding YAML aliases)")
        return size, height

    try:
        walk(data, 0)
    except _ShapeError as exc:
        raise SpecError(source, [f"{exc.path}: {exc.message}" if exc.path else exc.message]) from None


def read_spec_yaml(path: Path, what: str) -> dict[str, Any]:
    """A spec or pack file as a mapping with its ``${VAR}`` references expanded."""
    data = _top_mapping(read_yaml(path, loader=_SpecLoader), str(path), what)
    expanded: dict[str, Any] = expand_variables(dict(data), str(path))
    return expanded


def _top_mapping(data: Any, source: str, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise SpecError(source, [f"expected a mapping at the top level ({what}), got {_describe(data)}"])
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise SpecError(source, [f"top level: keys must be names, got {_describe(k)}" for k in bad])
    return data


# --- ${VAR} in strings -------------------------------------------------------------------------------

_REFERENCE = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
_VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?::(.*))?$", re.DOTALL)
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
def expand_variables(data: Any, source: str, environ: Mapping[str, str] | None = None) -> Any:
    """``${VAR}`` and ``${VAR:default}`` in every string value (not in keys), ``$${`` for a literal
    ``${``. An unquoted value that is one whole ``${...}`` (read by read_spec_yaml) becomes the
    number or true/false its text spells, as if written in place, so ``trials: ${TRIALS}`` works;
    quoted, it stays a string. An unset variable without a default is a SpecError. What a
    secret-named variable holds is remembered as a secret (see secrets.py), so the run directory
    never holds it (nor values under secret-named keys or URL passwords, masked there too)."""
    env = os.environ if environ is None else environ
    problems: list[str] = []

    def expand(text: str, where: str) -> Any:
        if "$" not in text:
            return text
        pieces: list[str] = []
        position = 0
        for match in _REFERENCE.finditer(text):
            pieces.append(text[position:match.start()])
            position = match.end()
            token = match.group(0)
            if token == "$${":
                pieces.append("${")
                continue
            variable = _VARIABLE.match(match.group(1) or "") if token.endswith("}") else None
            if variable is None:
                problems.append(f"{where}: invalid variable reference {token!r}: expected ${{NAME}} or "
                                f"${{NAME:default}} (write $${{ for a literal ${{)")
                continue
            name, default = variable.group(1), variable.group(2)
            value = env.get(name)
            if value and is_secret_key(name):  # ${DB_PASSWORD}, ${SESSION_SECRET}: masked wherever written
                remember(value)
            elif not value and default is not None:
                value = default
            elif value is None:
                problems.append(f"{where}: environment variable {name} is not set (write ${{{name}:default}} "
                                "for a default)")
                continue
            pieces.append(value)
        pieces.append(text[position:])
        result = "".join(pieces)
        if isinstance(text, _WholeReference) and not problems:
            if _NUMBER.match(result):
                return float(result) if any(c in result for c in ".eE") else int(result)
            if result.lower() in ("true", "false"):
                return result.lower() == "true"
        return result

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, str):
            return expand(node, where)
        if isinstance(node, dict):
            return {k: walk(v, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(node)]
        return node

    expanded = walk(data, "")
    if problems:
        raise SpecError(source, problems)
    return expanded


def content_hash(path: Path) -> str:
    """sha256 over a pack's files (names and bytes), so results can name exactly what they ran."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if "__pycache__" in file.parts or file.suffix in (".pyc", ".db-wal", ".db-shm"):
            continue
        digest.update(str(file.relative_to(path.parent if path.is_file() else path)).encode())
        digest.update(b"\0")
        digest.update(file.read_bytes())
    return "sha256:" + digest.hexdigest()

