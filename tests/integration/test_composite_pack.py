"""The composite plugin with every other plugin installed: registered without conflicts, and the
sql-python pack (sql + python worlds in one episode) passes every gate through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agentsynth_composite")
pytest.importorskip("agentsynth_sql")
pytest.importorskip("agentsynth_python")


def agentsynth(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_composite_is_registered_without_conflicts(tmp_path):
    proc = agentsynth("plugins", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    plugins = {p["name"]: p for p in json.loads(proc.stdout)}
    composite = plugins["composite"]
    assert composite["loaded"] and not composite["errors"]
    assert composite["registered"]["environment"] == ["composite"]
    assert set(composite["registered"]["checker"]) == {"composite", "composite_answer"}
    assert composite["registered"]["pack"] == ["sql-python"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_sql_python_passes_pack_validate_with_every_plugin_installed(tmp_path):
    proc = agentsynth("pack", "validate", "sql-python", "--json", "gates.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all gates pass" in proc.stdout
