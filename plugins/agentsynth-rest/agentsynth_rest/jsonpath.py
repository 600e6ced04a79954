"""A small JSONPath: ``$``, ``.name``, ``['name']``, ``[0]``, ``[-1]``, ``[*]``, ``..`` is not
supported, and filters ``[?(@.field == value)]`` (``==``/``!=``/``<``/``<=``/``>``/``>=``, value a
JSON literal, ``@.a.b`` nested). Enough to pick a record out of a REST answer."""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN = re.compile(
    r"\.(?P<name>[A-Za-z_][A-Za-z0-9_\-]*)"
    r"|\[(?P<index>-?\d+)\]"
    r"|\[(?P<quoted>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]"
    r"|\[(?P<star>\*)\]|\.(?P<dotstar>\*)"
    r"|\[\?\(@(?P<field>(?:\.[A-Za-z_][A-Za-z0-9_\-]*)+)\s*(?P<op>==|!=|<=|>=|<|>)\s*(?P<value>[^)]+?)\s*\)\]"
)
_OPS = {"==": lambda a, b: _same(a, b), "!=": lambda a, b: not _same(a, b), "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


class JsonPath:
    """A parsed path; ``find(doc)`` returns the list of matches, ``single`` whether the path can
    match at most one value (no wildcard, no filter)."""

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text.startswith("$"):
            raise ValueError(f"json_path: expected a path starting with '$', got {text!r}")
        self.text = text
        self.steps: list[tuple[str, Any]] = []
        pos = 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise ValueError(f"json_path: cannot parse {text!r} at position {pos} ({text[pos:pos + 20]!r})")
            if m["name"] is not None:
                self.steps.append(("key", m["name"]))
            elif m["index"] is not None:
                self.steps.append(("index", int(m["index"])))
            elif m["quoted"] is not None:
                self.steps.append(("key", json.loads('"' + m["quoted"][1:-1].replace('"', '\\"') + '"')))
            elif m["star"] is not None or m["dotstar"] is not None:
                self.steps.append(("star", None))
            else:
                try:
                    literal = json.loads(m["value"].replace("'", '"'))
                except ValueError:
                    raise ValueError(f"json_path: {m['value']!r} in {text!r} is not a JSON literal") from None
                self.steps.append(("filter", (m["field"][1:].split("."), m["op"], literal)))
            pos = m.end()
        self.single = all(kind in ("key", "index") for kind, _ in self.steps)

    def find(self, doc: Any) -> list[Any]:
        current = [doc]
        for kind, arg in self.steps:
            nxt: list[Any] = []
            for node in current:
                if kind == "key" and isinstance(node, dict) and arg in node:
                    nxt.append(node[arg])
                elif kind == "index" and isinstance(node, list) and -len(node) <= arg < len(node):
                    nxt.append(node[arg])
                elif kind == "star":
                    nxt += list(node.values()) if isinstance(node, dict) else node if isinstance(node, list) else []
                elif kind == "filter":
                    fields, op, literal = arg
                    for item in (node if isinstance(node, list) else node.values() if isinstance(node, dict) else []):
                        value: Any = item
                        for f in fields:
                            value = value.get(f, _MISSING) if isinstance(value, dict) else _MISSING
                        if value is _MISSING:
                            continue
                        try:
                            if _OPS[op](value, literal):
                                nxt.append(item)
                        except TypeError:
                            continue
            current = nxt
        return current


_MISSING = object()
