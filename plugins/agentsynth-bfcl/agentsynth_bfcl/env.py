"""The ``bfcl`` world: a stateless function-calling world whose end state is the calls it received.

A BFCL item offers some functions; the agent calls them; nothing is executed (BFCL's AST
categories have no backend to run them on). Each call is recorded and answered with the same
neutral acknowledgement, which tells the agent nothing about whether the call was right. The
``bfcl_ast`` checker then matches the calls of the trajectory against the item's possible answers.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any

from agentsynth_kernel import Observation, ToolCall, ToolSpec, Trajectory, Verdict

from .matcher import KINDS, match, tool_name

# BFCL's own mapping to JSON Schema (bfcl_eval/constants/type_mappings.py GORILLA_TO_OPENAPI)
JSON_TYPES = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object", "tuple": "array",
    "any": "string", "byte": "integer", "short": "integer", "long": "integer", "double": "number", "char": "string",
    "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object", "Queue": "array",
    "Stack": "array", "Any": "string", "String": "string", "Boolean": "boolean", "Integer": "integer",
}
ACK = ("Call recorded. Calls in this world are scored, not executed, so there is no result to show. "
       "Reply with a short final answer once you have made every call the request needs.")


def _schema(node: Any) -> Any:
    """A BFCL parameter description as JSON Schema (types mapped, ``optional`` flags dropped)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "optional":
            continue
        if key == "type" and isinstance(value, str):
            out[key] = JSON_TYPES.get(value, "string")
            if value == "float":
                out["format"] = "float"
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: _schema(v) for k, v in value.items()}
        elif key == "items":
            out[key] = _schema(value)
        else:
            out[key] = copy.deepcopy(value)
    if "type" not in out and "properties" not in node:
        out["type"] = "string"
    return out


def to_tool(doc: dict[str, Any]) -> ToolSpec:
    """A BFCL function doc as an OpenAI-compatible tool (dots in its name become underscores)."""
    parameters = _schema(doc.get("parameters") or {})
    parameters["type"] = "object"
    parameters.setdefault("properties", {})
    return ToolSpec(tool_name(str(doc["name"])), str(doc.get("description", "")), parameters)


@functools.lru_cache(maxsize=8)
def _index(path: str, mtime_ns: int, size: int) -> dict[str, list[dict[str, Any]]]:
    """``functions.jsonl`` of a pack: item id -> its function docs (read once per file version)."""
    out: dict[str, list[dict[str, Any]]] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                entry = json.loads(line)
                out[entry["id"]] = entry["function"]
    return out


def item_functions(file: Path, item: str) -> list[dict[str, Any]]:
    """The function docs of BFCL item ``item`` from a pack's functions file."""
    stat = os.stat(file)
    table = _index(str(file), stat.st_mtime_ns, stat.st_size)
    if item not in table:
        raise ValueError(f"{file}: no BFCL item {item!r}")
    return table[item]


class BfclEnvironment:
    """The functions of one BFCL item as tools; every call is recorded, none is executed.

    ``functions`` inline, or ``item`` (a BFCL id) looked up in ``functions_file`` (default
    ``functions.jsonl`` next to the pack).
    """

    def __init__(self, functions: list[dict[str, Any]] | None = None, item: str | None = None,
                 functions_file: str = "functions.jsonl", base_dir: Path | None = None) -> None:
        if functions is None:
            if item is None:
                raise ValueError("bfcl environment: give 'functions' (a list of BFCL function docs) or 'item'")
            functions = item_functions((base_dir or Path(".")) / functions_file, item)
        for i, doc in enumerate(functions):
            if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not doc["name"]:
                raise ValueError(f"bfcl environment: functions[{i}]: expected a mapping with a 'name'")
        self.functions = functions
        self.item = item
        self._tools = [to_tool(doc) for doc in functions]
        names = [t.name for t in self._tools]
        clash = sorted({n for n in names if names.count(n) > 1})
        if clash:
            raise ValueError(f"bfcl environment: two functions are offered under the same tool name: {clash}")
        self.received: list[ToolCall] = []

    def reset(self, seed: int) -> Observation:
        self.received = []
        return Observation("")

    def tools(self) -> list[ToolSpec]:
        return list(self._tools)

    def step(self, call: ToolCall) -> Observation:
        self.received.append(call)
        return Observation(ACK, data={"recorded": len(self.received)})

    def close(self) -> None:
        self.received = []


class BfclAst:
    """Passes when the calls of the trajectory match the item's possible answers (BFCL's AST check).

    ``answers``: BFCL's ground truth (``[{function: {param: [allowed values]}}]``, one entry per
    expected call); ``kind``: ``calls``, ``irrelevance`` (passes only with no call) or ``relevance``
    (at least one call of an offered function). Every call counts, including calls of functions
    that do not exist, and calls made in later turns.
    """

    # The calls are this world's end state: they are what the world received, and what BFCL scores.
    world_state = True

    def __init__(self, answers: list[dict[str, dict[str, Any]]] | None = None, kind: str = "calls",
                 category: str = "") -> None:
        if kind not in KINDS:
            raise ValueError(f"bfcl_ast: kind must be one of {', '.join(KINDS)}, got {kind!r}")
        answers = answers or []
        if kind == "calls" and not answers:
            raise ValueError("bfcl_ast: kind 'calls' needs 'answers' (the possible answers of each expected call)")
        for i, answer in enumerate(answers):
            if not isinstance(answer, dict) or len(answer) != 1 or not isinstance(next(iter(answer.values())), dict):
                raise ValueError(f"bfcl_ast: answers[{i}]: expected {{function name: {{parameter: [allowed values]}}}}")
        self.answers, self.kind, self.category = answers, kind, category

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        functions = getattr(env, "functions", None)
        if not isinstance(functions, list):
            return Verdict("bfcl_ast", False, 0.0, "not a bfcl world: no function docs to match the calls against")
        calls = [(c.name, dict(c.arguments)) for c in trajectory.tool_calls]
        result = match(functions, calls, self.answers, self.kind)
        return Verdict("bfcl_ast", result.passed, float(result.passed), result.detail,
                       data={"category": self.category, "calls": len(calls), "pairs": [list(p) for p in result.pairs]})
