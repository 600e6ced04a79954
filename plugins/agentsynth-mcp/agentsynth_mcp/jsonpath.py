"""A tiny JSON path: ``$.items[0].title``, ``items.0.title``, ``$.items[*].id``, ``$['a key']``.

Enough to point a checker at one value of a tool result; ``[*]`` maps the rest
of the path over a list. A missing key or index raises :class:`PathError`.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"""\.?([A-Za-z_][\w\-]*)|\[(\d+|-\d+|\*)\]|\[['"]([^'"]*)['"]\]|\.(\d+)""")


class PathError(LookupError):
    """The path does not exist in the value."""


def parse(path: str) -> list[str | int]:
    """``$.a[0].b`` -> ``["a", 0, "b"]``; ``*`` stays a string."""
    text = path.strip()
    if text.startswith("$"):
        text = text[1:]
    tokens: list[str | int] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"invalid JSON path {path!r} at position {pos + (1 if path.strip().startswith('$') else 0)}")
        name, index, quoted, dotted_index = match.groups()
        if name is not None:
            tokens.append(name)
        elif index is not None:
            tokens.append("*" if index == "*" else int(index))
        elif quoted is not None:
            tokens.append(quoted)
        else:
            tokens.append(int(dotted_index))
        pos = match.end()
    return tokens


def get(value: Any, path: str | list[str | int]) -> Any:
    """The value at ``path``; raises PathError naming the first missing step."""
    tokens = parse(path) if isinstance(path, str) else path
    return _walk(value, tokens, "$")


def _walk(value: Any, tokens: list[str | int], where: str) -> Any:
    for i, token in enumerate(tokens):
        if token == "*":
            if not isinstance(value, list):
                raise PathError(f"{where} is not a list")
            return [_walk(item, tokens[i + 1:], f"{where}[{j}]") for j, item in enumerate(value)]
        if isinstance(token, int):
            if isinstance(value, list):
                try:
                    value = value[token]
                except IndexError:
                    raise PathError(f"{where} has no index {token} (length {len(value)})") from None
                where = f"{where}[{token}]"
                continue
            if isinstance(value, dict) and str(token) in value:
                value = value[str(token)]
                where = f"{where}.{token}"
                continue
            raise PathError(f"{where} is not a list")
        if not isinstance(value, dict):
            raise PathError(f"{where} is not an object (cannot read {token!r})")
        if token not in value:
            keys = ", ".join(sorted(map(str, value))[:10])
            raise PathError(f"{where} has no key {token!r} (keys: {keys})")
        value = value[token]
        where = f"{where}.{token}"
    return value
