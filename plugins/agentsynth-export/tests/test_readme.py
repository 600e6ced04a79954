"""The README's examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def test_the_dedup_quality_example_runs(tmp_path):
    (code,) = re.findall(r"```python\n(.*?)```", section("Dedup and decontamination"), re.S)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    recall, precision = map(float, proc.stdout.split())
    assert recall >= 0.95 and precision == 1.0
