"""Arguments that satisfy a tool's JSON Schema, for back-translation chains.

Values come, in order of preference, from earlier results of the chain (a parameter named like a
field an earlier call returned gets that value: outputs feed later inputs), then from the schema
(``const``, ``enum``, ``examples``, ``default``), then from the parameter's name and format
(``*_id``, ``email``, ``date``, ``city``, ``currency`` ...), then from the type and its bounds. Every
value is checked with the kernel's validator; what cannot be satisfied is reported, never guessed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from agentsynth_kernel import validate_arguments

_CITIES = ["Lisbon", "Berlin", "Osaka", "Toronto", "Nairobi", "Lima", "Oslo", "Seoul"]
_WORDS = ["report", "invoice", "summary", "renewal", "shipment", "budget", "forecast", "backlog", "quarterly"]
_CURRENCIES = ["USD", "EUR", "GBP", "JPY"]


def _string(name: str, schema: Mapping[str, Any], rng: random.Random) -> str:
    low = name.lower()
    fmt = schema.get("format", "")
    if fmt == "date" or low.endswith("date") or low in ("check_in", "check_out", "day"):
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if fmt == "date-time":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z"
    if fmt == "email" or "email" in low:
        return f"{rng.choice(['dana', 'li', 'omar', 'sam', 'ines'])}{rng.randint(1, 99)}@example.com"
    if fmt == "uri" or low.endswith("url"):
        return f"https://example.com/{rng.choice(_WORDS)}/{rng.randint(1, 999)}"
    if low.endswith("id") or low.endswith("_account") or low == "account":
        prefix = "".join(w[0] for w in low.replace("_id", "").split("_") if w).upper() or "ID"
        return f"{prefix}-{rng.randint(1000, 9999)}"
    if "city" in low or low in ("origin", "destination", "location"):
        return rng.choice(_CITIES)
    if "currency" in low:
        return rng.choice(_CURRENCIES)
    if low in ("path", "file", "filename"):
        return rng.choice(["README.md", "src/app.py", "tests/test_app.py", "pyproject.toml"])
    if low in ("sql", "query_sql"):
        return "SELECT COUNT(*) FROM orders"
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))
    return words


def _number(schema: Mapping[str, Any], rng: random.Random, integer: bool) -> int | float:
    low = schema.get("minimum", schema.get("exclusiveMinimum", 1 if integer else 1.0))
    high = schema.get("maximum", schema.get("exclusiveMaximum", max(low, 0) + (10 if integer else 500)))
    if integer:
        lo, hi = int(low) + ("exclusiveMinimum" in schema), int(high) - ("exclusiveMaximum" in schema)
        return rng.randint(lo, max(lo, hi))
    return round(rng.uniform(float(low), float(high)), 2)


def sample_value(schema: Mapping[str, Any], rng: random.Random, pool: Mapping[str, list[Any]], name: str = "",
                 depth: int = 0) -> Any:
    """One value for ``schema`` (see the module docstring)."""
    if "const" in schema:
        return schema["const"]
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            return rng.choice(schema[key])
    for member in ("anyOf", "oneOf"):
        if isinstance(schema.get(member), list) and schema[member]:
            options = [o for o in schema[member] if isinstance(o, Mapping) and o.get("type") != "null"] or schema[member]
            return sample_value(rng.choice(options), rng, pool, name, depth + 1)
    if name and pool.get(name):
        for candidate in reversed(pool[name]):
            if not validate_arguments(schema, candidate):
                return candidate
    if "default" in schema and rng.random() < 0.5:
        return schema["default"]
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "string":
        value = _string(name, schema, rng)
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        if isinstance(lo, int) and len(value) < lo:
            value = value + "x" * (lo - len(value))
        if isinstance(hi, int) and len(value) > hi:
            value = value[:hi]
        return value
    if kind == "integer":
        return _number(schema, rng, True)
    if kind == "number":
        return _number(schema, rng, False)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        raw_items = schema.get("items")
        items: Mapping[str, Any] = raw_items if isinstance(raw_items, Mapping) else {"type": "string"}
        count = max(int(schema.get("minItems", 1)), 1)
        count = min(count + rng.randint(0, 1), int(schema.get("maxItems", count + 1)))
        return [sample_value(items, rng, pool, name.rstrip("s"), depth + 1) for _ in range(count)]
    if kind == "object":
        return sample_arguments(schema, rng, pool, depth + 1)
    return _string(name, schema, rng)


def sample_arguments(schema: Mapping[str, Any], rng: random.Random, pool: Mapping[str, list[Any]] | None = None,
                     depth: int = 0) -> dict[str, Any]:
    """Arguments for a tool: every required property, and each optional one with probability 1/2."""
    pool = pool or {}
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    out: dict[str, Any] = {}
    if depth > 4:
        return out
    for pname, pschema in props.items():
        if not isinstance(pschema, Mapping):
            continue
        if pname in required or (pname in pool and rng.random() < 0.8) or rng.random() < 0.5:
            out[pname] = sample_value(pschema, rng, pool, pname, depth)
    return out


def absorb(pool: dict[str, list[Any]], value: Any, depth: int = 0) -> None:
    """Remember the scalar fields of a result (or of arguments) by name, for later calls of the chain."""
    if depth > 4:
        return
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, (str, int, float)) and not isinstance(item, bool):
                pool.setdefault(str(key), []).append(item)
            else:
                absorb(pool, item, depth + 1)
    elif isinstance(value, list):
        for item in value[:20]:
            absorb(pool, item, depth + 1)
