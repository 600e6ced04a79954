"""The README's examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_the_contamination_example_runs(tmp_path):
    pytest.importorskip("agentsynth_sql")
    (script,) = re.findall(r"```bash\n(.*?)```", section("Contamination: `agentsynth pack contamination`"), re.S)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LOAD_PLUGINS": "export,sql",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "1 of 22 tasks contaminated: mark-shipped" in out and "exit 1" in out
    assert "contamination above 0.5" in proc.stderr
    assert "held-out variant: core-heldout (" in out and "not relabelled: count-pending-orders" in out
    assert "all gates pass" in out and "pass@1 100.0%" in out
    assert (tmp_path / "core-heldout" / "pack.yaml").is_file()


def test_the_secret_scrub_example_runs(tmp_path):
    (code,) = re.findall(r"```python\n(.*?)```", section("The secret scrub"), re.S)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["1000 written", "no secret in out.jsonl", "masked: 1 exact path: 1 records"]
    assert "Zq8W2nXv5Lr7Tb3Kc9Pd" not in (tmp_path / "out.jsonl").read_text()
