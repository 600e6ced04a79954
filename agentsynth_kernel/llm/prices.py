"""USD per token: the caller's ``prices`` first, else litellm's bundled table (read as JSON, litellm
not imported)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

_PRICE_TABLE: dict[str, Any] | None = None


def _price_table() -> dict[str, Any]:
    """litellm's bundled price map, read as JSON from its package directory (litellm not imported)."""
    global _PRICE_TABLE
    if _PRICE_TABLE is None:
        table: dict[str, Any] = {}
        try:
            spec = importlib.util.find_spec("litellm")
            locations = list(spec.submodule_search_locations or []) if spec else []
            for location in locations:
                path = Path(location) / "model_prices_and_context_window_backup.json"
                if path.is_file():
                    table = msgspec.json.decode(path.read_bytes())
                    break
        except (ImportError, ValueError, OSError, msgspec.DecodeError):
            table = {}
        _PRICE_TABLE = table
    return _PRICE_TABLE


def price_for(model: str, prices: Mapping[str, Any] | None = None, *, batch: bool = False,
              ) -> tuple[float, float] | None:
    """USD per (prompt token, completion token) for ``model``, or None if unknown.

    ``prices`` (``{model: (input_per_token, output_per_token)}`` or ``{model: {"input": ...,
    "output": ...}}``) wins over litellm's table, which is looked up as ``provider/name``, then
    ``name``. A ``local`` model (served on this machine) costs nothing. ``batch``: the price of the
    provider's batch API where the table has one (else the normal price, an upper bound).
    """
    provider, sep, rest = model.partition("/")
    if provider == "local" and not (prices and model in prices):
        return 0.0, 0.0
    candidates = [model] + ([rest] if sep else [])
    for name in candidates:
        if prices and name in prices:
            entry = prices[name]
            if isinstance(entry, Mapping):
                return float(entry.get("input", 0.0)), float(entry.get("output", 0.0))
            return float(entry[0]), float(entry[1])
    table = _price_table()
    for name in candidates:
        entry = table.get(name)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            if batch and "input_cost_per_token_batches" in entry:
                return (float(entry.get("input_cost_per_token_batches") or 0.0),
                        float(entry.get("output_cost_per_token_batches") or entry.get("output_cost_per_token") or 0.0))
            return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
    return None

