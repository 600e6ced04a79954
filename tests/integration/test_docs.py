"""The generated docs (docs/README.md, docs/hooks.md, docs/reference/) come from the loader's classes,
the kernel and every installed plugin: with every plugin installed they must be current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pack_reference_is_current(tmp_path):
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pages = module.render_all()
    assert "| `answer_checked` | `bool` | `False` |" in pages["reference/pack.md"]
    assert '<a id="sql"></a>' in pages["reference/components/environments.md"]
    module.write(pages, tmp_path)  # generated into a temp dir, compared with the committed pages
    stale = [p for p in pages if not (ROOT / "docs" / p).is_file()
             or (ROOT / "docs" / p).read_text(encoding="utf-8") != (tmp_path / p).read_text(encoding="utf-8")]
    committed = {f"reference/components/{p.name}" for p in (ROOT / "docs" / "reference" / "components").glob("*.md")}
    extra = sorted(committed - set(pages))
    assert not stale and not extra, (f"docs/ is stale: {stale}, no longer generated: {extra}: run "
                                     "`.nox/together/bin/python scripts/gen_reference.py` with every plugin installed")
