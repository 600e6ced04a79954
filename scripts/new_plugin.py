"""Scaffold plugins/agentsynth-NAME from plugins/_template.

Usage: python scripts/new_plugin.py NAME "one-line description"
Then: python scripts/gen_plugin_table.py (the plugin table), and nox picks the plugin up by itself.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scaffold(name: str, description: str, plugins_dir: Path = ROOT / "plugins") -> Path:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise SystemExit(f"error: plugin name {name!r}: use lowercase letters, digits and '_'")
    target = plugins_dir / f"agentsynth-{name}"
    if target.exists():
        raise SystemExit(f"error: {target} already exists")
    shutil.copytree(plugins_dir / "_template", target, ignore=shutil.ignore_patterns("__pycache__"))
    (target / "agentsynth___name__").rename(target / f"agentsynth_{name}")
    class_name = "".join(part.capitalize() for part in name.split("_"))
    for file in target.rglob("*"):
        if file.is_file():
            text = file.read_text(encoding="utf-8")
            text = text.replace("__name__", name).replace("__Class__", class_name).replace("__description__", description)
            file.write_text(text, encoding="utf-8")
    return target


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(f"created {scaffold(sys.argv[1], sys.argv[2])}")
