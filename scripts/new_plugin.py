"""Scaffold a plugin distribution agentsynth-NAME from plugins/_template.

Usage: python scripts/new_plugin.py NAME "one-line description" [--dest DIR]

Without --dest it lands in plugins/ (then: python scripts/gen_plugin_table.py, and nox picks it up
by itself); with --dest DIR anywhere else, as a project of its own. As generated, it holds an
environment with state, a checker that reads it, a pack with an oracle, and tests: `pip install
-e .`, `pytest` and `agentsynth pack validate NAME-demo` pass before you change a line.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scaffold(name: str, description: str, plugins_dir: Path = ROOT / "plugins", *,
             template: Path | None = None) -> Path:
    """Copy the template to ``plugins_dir/agentsynth-NAME`` with every placeholder filled in."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise SystemExit(f"error: plugin name {name!r}: use lowercase letters, digits and '_'")
    target = plugins_dir / f"agentsynth-{name}"
    if target.exists():
        raise SystemExit(f"error: {target} already exists")
    shutil.copytree(template or plugins_dir / "_template", target, ignore=shutil.ignore_patterns("__pycache__"))
    (target / "agentsynth___name__").rename(target / f"agentsynth_{name}")
    for packs in (target / f"agentsynth_{name}" / "packs").glob("__name__*"):
        packs.rename(packs.with_name(packs.name.replace("__name__", name)))
    class_name = "".join(part.capitalize() for part in name.split("_"))
    for file in target.rglob("*"):
        if file.is_file():
            text = file.read_text(encoding="utf-8")
            text = text.replace("__name__", name).replace("__Class__", class_name).replace("__description__", description)
            file.write_text(text, encoding="utf-8")
    return target


if __name__ == "__main__":
    args = sys.argv[1:]
    dest = ROOT / "plugins"
    if "--dest" in args:
        at = args.index("--dest")
        if at + 1 >= len(args):
            raise SystemExit("error: --dest needs a directory")
        dest = Path(args[at + 1]).resolve()
        del args[at:at + 2]
    if len(args) != 2:
        raise SystemExit(__doc__)
    dest.mkdir(parents=True, exist_ok=True)
    print(f"created {scaffold(args[0], args[1], dest, template=ROOT / 'plugins' / '_template')}")
