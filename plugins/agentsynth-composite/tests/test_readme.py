"""The README's example and commands work as written, through the real command line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import has_sandbox

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
pytest.importorskip("agentsynth_sql")
pytest.importorskip("agentsynth_python")
needs_bwrap = pytest.mark.skipif(not has_sandbox(), reason="bubblewrap (bwrap) is not installed")


def agentsynth(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


@needs_bwrap
def test_the_example_spec_runs_and_passes(tmp_path):
    (spec,) = re.findall(r"```yaml\n(.*?)```", section("Example"), re.S)
    (tmp_path / "spec.yaml").write_text(spec, encoding="utf-8")
    proc = agentsynth("run", "spec.yaml", "--json", "report.json", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"]["passed"] == report["episodes"] == 1
    verdicts = report["results"][0]["verdicts"]
    assert [v["checker"] for v in verdicts] == ["db.sql", "py.python_file"]


@needs_bwrap
def test_the_bench_command_runs(tmp_path):
    first = re.findall(r"```bash\n(.*?)```", README, re.S)[0]
    line = next(ln for ln in first.splitlines() if ln.startswith("agentsynth bench"))
    proc = agentsynth(*line.split("#")[0].split()[1:], "--min-pass-rate", "100%", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pass@1 100.0%" in proc.stdout


def test_a_bad_spec_is_a_clear_error_not_a_traceback(tmp_path):
    (spec,) = re.findall(r"```yaml\n(.*?)```", section("Example"), re.S)
    (tmp_path / "spec.yaml").write_text(spec.replace("py: {type: python}", "py__x: {type: pyton}"), encoding="utf-8")
    proc = agentsynth("run", "spec.yaml", cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "spec.yaml" in proc.stderr and "worlds.py__x: 'py__x' is not a world name" in proc.stderr
