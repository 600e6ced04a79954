"""Reading what a user brings: a tool catalog in any of the common shapes, and queries / scenarios.

One parser for tools, :func:`parse_tools`, accepts

- an OpenAI request's ``tools`` block (``[{"type": "function", "function": {...}}]``, or an object
  with a ``tools`` key holding it),
- a bare function list (``[{"name", "description", "parameters"}]``),
- Anthropic tools (``[{"name", "description", "input_schema"}]``),
- an MCP ``tools/list`` result (``{"tools": [{"name", "inputSchema"}]}``, also the whole JSON-RPC
  response ``{"jsonrpc": "2.0", "result": {"tools": [...]}}``).

Every problem names the file and the path inside it (``tools.json: [2].function.parameters:
expected a JSON Schema object, got a string``); all problems are reported at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import SpecError, ToolSpec

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
MAX_FILE_BYTES = 20_000_000


def _describe(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def read_json_file(path: Path, what: str) -> Any:
    """A JSON (or, for ``.jsonl``, line-delimited JSON) file; SpecError naming the file and line."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SpecError(str(path), [f"cannot read {what}: {exc.strerror or exc}"]) from None
    if size > MAX_FILE_BYTES:
        raise SpecError(str(path), [f"{what} is {size:,} bytes; at most {MAX_FILE_BYTES:,} are read"])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), [f"cannot read {what}: {exc}"]) from None
    if path.suffix == ".jsonl":
        rows, problems = [], []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                problems.append(f"line {lineno}: not valid JSON ({exc})")
        if problems:
            raise SpecError(str(path), problems)
        return rows
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SpecError(str(path), [f"not valid JSON ({exc})"]) from None


def parse_tools(data: Any, source: str = "tools") -> list[ToolSpec]:
    """ToolSpecs from a catalog in any supported shape (see the module docstring)."""
    prefix = ""
    if isinstance(data, Mapping):
        if isinstance(data.get("result"), Mapping) and "tools" in data["result"]:  # JSON-RPC response
            data, prefix = data["result"]["tools"], "result.tools"
        elif "tools" in data:
            data, prefix = data["tools"], "tools"
        else:
            raise SpecError(source, ["expected a list of tools, or an object with a 'tools' list "
                                     "(OpenAI tools block, Anthropic tools, MCP tools/list result)"])
    if not isinstance(data, list):
        raise SpecError(source, [f"{prefix or '$'}: expected a list of tools, got {_describe(data)}"])
    if not data:
        raise SpecError(source, [f"{prefix or '$'}: the catalog has no tools"])
    problems: list[str] = []
    tools: list[ToolSpec] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(data):
        where = f"{prefix}[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: expected a tool object, got {_describe(entry)}")
            continue
        fn: Any = entry
        if "function" in entry or entry.get("type") == "function":
            fn = entry.get("function")
            where = f"{where}.function"
            if not isinstance(fn, Mapping):
                problems.append(f"{where}: expected an object with name/description/parameters, got {_describe(fn)}")
                continue
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}.name: missing (every tool needs a name)")
            continue
        if not _NAME_RE.match(name):
            problems.append(f"{where}.name: {name!r} is not a valid tool name (letters, digits, '_', '-', '.', at most 64)")
            continue
        description = fn.get("description", "")
        if not isinstance(description, str):
            problems.append(f"{where}.description: expected a string, got {_describe(description)}")
            description = ""
        key = next((k for k in ("parameters", "input_schema", "inputSchema") if k in fn), None)
        schema: Any = fn[key] if key else {"type": "object", "properties": {}}
        if not isinstance(schema, Mapping):
            problems.append(f"{where}.{key}: expected a JSON Schema object, got {_describe(schema)}")
            continue
        schema_problems = schema_shape_problems(schema, f"{where}.{key}")
        if schema_problems:
            problems += schema_problems
            continue
        if name in seen:
            problems.append(f"{where}.name: duplicate tool {name!r} (also [{seen[name]}])")
            continue
        seen[name] = i
        tools.append(ToolSpec(name, description, dict(schema)))
    if problems:
        raise SpecError(source, problems)
    return tools


def schema_shape_problems(schema: Mapping[str, Any], where: str) -> list[str]:
    """What makes a tool's parameter schema unusable: a non-object top level, properties that are not schemas,
    ``required`` names that are not properties."""
    problems = []
    kind = schema.get("type", "object")
    if kind != "object":
        problems.append(f"{where}.type: a tool's parameters must be a JSON Schema of type 'object', got {kind!r}")
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        problems.append(f"{where}.properties: expected an object of property schemas, got {_describe(props)}")
        props = {}
    for pname, pschema in props.items():
        if not isinstance(pschema, Mapping):
            problems.append(f"{where}.properties.{pname}: expected a JSON Schema object, got {_describe(pschema)}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.append(f"{where}.required: expected a list of property names")
    else:
        for r in required:
            if props and r not in props:
                problems.append(f"{where}.required: {r!r} is not one of the properties ({', '.join(props)})")
    return problems


def load_tools(path: Path) -> list[ToolSpec]:
    """``--tools FILE``."""
    return parse_tools(read_json_file(path, "a tool catalog"), str(path))


# --- queries and scenarios -----------------------------------------------------------------------


@attrs.frozen
class Scenario:
    """One thing to generate trajectories for: a user query, optionally with its domain, a preferred
    mode, and (for a pack's task) the task whose checkers decide it on the world."""

    id: str
    query: str
    domain: str = ""
    mode: str = ""
    source: str = ""
    task: Any = None  # a kernel Task when the scenario is a pack's task
    metadata: dict[str, Any] = attrs.field(factory=dict)


_SCENARIO_KEYS = ("id", "query", "instruction", "domain", "mode", "metadata")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def parse_queries(rows: Any, source: str, *, jsonl: bool = False) -> list[Scenario]:
    """Scenarios from a JSON array (of strings or objects) or JSONL rows. An object has ``query`` (or
    ``instruction``) and optionally ``id``, ``domain``, ``mode``, ``metadata``."""
    from .modes import MODES

    if isinstance(rows, Mapping) and isinstance(rows.get("queries"), list):
        rows = rows["queries"]
    if not isinstance(rows, list):
        raise SpecError(source, [f"expected a JSON array of queries (strings or objects), got {_describe(rows)}"])
    problems: list[str] = []
    out: list[Scenario] = []
    ids: dict[str, str] = {}
    for i, row in enumerate(rows):
        where = f"line {i + 1}" if jsonl else f"[{i}]"
        if isinstance(row, str):
            row = {"query": row}
        if not isinstance(row, Mapping):
            problems.append(f"{where}: expected a string or an object with 'query', got {_describe(row)}")
            continue
        unknown = [k for k in row if k not in _SCENARIO_KEYS]
        if unknown:
            from agentsynth_kernel import did_you_mean

            problems += [f"{where}.{k}: unknown key{did_you_mean(k, _SCENARIO_KEYS)}" for k in unknown]
            continue
        query = row.get("query", row.get("instruction"))
        if not isinstance(query, str) or not query.strip():
            problems.append(f"{where}.query: missing or empty (the user request to generate for)")
            continue
        sid = row.get("id", f"q{len(out)}")
        if not isinstance(sid, str) or not _ID_RE.match(sid):
            problems.append(f"{where}.id: {sid!r} is not a valid id (letters, digits, '_', '-', '.')")
            continue
        if sid in ids:
            problems.append(f"{where}.id: duplicate id {sid!r} (also {ids[sid]})")
            continue
        ids[sid] = where
        mode = row.get("mode", "")
        if mode and mode not in MODES:
            problems.append(f"{where}.mode: expected one of {', '.join(MODES)}, got {mode!r}")
            continue
        domain = row.get("domain", "")
        if not isinstance(domain, str):
            problems.append(f"{where}.domain: expected a string, got {_describe(domain)}")
            continue
        metadata = row.get("metadata", {})
        if not isinstance(metadata, Mapping):
            problems.append(f"{where}.metadata: expected an object, got {_describe(metadata)}")
            continue
        out.append(Scenario(sid, query.strip(), domain, mode, source, None, dict(metadata)))
    if problems:
        raise SpecError(source, problems)
    if not out:
        raise SpecError(source, ["no queries in the file"])
    return out


def load_queries(path: Path) -> list[Scenario]:
    """``--queries FILE``: a JSON array or JSONL."""
    return parse_queries(read_json_file(path, "a queries file"), str(path), jsonl=path.suffix == ".jsonl")
