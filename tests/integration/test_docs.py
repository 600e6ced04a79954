"""docs/packs.md is generated from the loader's classes and every installed plugin: it must be current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pack_reference_is_current():
    spec = importlib.util.spec_from_file_location("gen_pack_docs", ROOT / "scripts" / "gen_pack_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.render()
    assert "| `answer_checked` | `bool` | `False` |" in expected and "### `sql` (sql)" in expected
    actual = (ROOT / "docs" / "packs.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/packs.md is stale: run `python scripts/gen_pack_docs.py` with every plugin installed"
