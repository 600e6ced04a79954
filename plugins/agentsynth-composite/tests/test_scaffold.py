"""`agentsynth pack new NAME --env composite`: a starter pack over sql and python that works as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import has_sandbox

pytest.importorskip("agentsynth_sql")
pytest.importorskip("agentsynth_python")
needs_bwrap = pytest.mark.skipif(not has_sandbox(), reason="bubblewrap (bwrap) is not installed")


def agentsynth(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@needs_bwrap
def test_the_starter_pack_is_solved_by_its_oracle(tmp_path):
    proc = agentsynth("pack", "new", "starter", "--env", "composite", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrote starter/pack.yaml" in proc.stdout and (tmp_path / "starter" / "oracle.py").is_file()
    proc = agentsynth("bench", "--pack", "starter", "--policy", "oracle", "--min-pass-rate", "100%", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = agentsynth("bench", "--pack", "starter", "--policy", "claim_success", "--min-pass-rate", "0.01",
                      cwd=tmp_path)
    assert proc.returncode == 1  # claiming passes nothing


@needs_bwrap
@pytest.mark.slow
def test_the_starter_pack_passes_every_gate(tmp_path):
    assert agentsynth("pack", "new", "starter", "--env", "composite", cwd=tmp_path).returncode == 0
    proc = agentsynth("pack", "validate", "starter", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all gates pass" in proc.stdout


def test_without_its_worlds_the_scaffold_says_what_to_install(tmp_path):
    from agentsynth_composite.scaffold import scaffold

    class NoWorlds:
        def names(self, kind: str) -> list[str]:
            return ["composite", "sql"]

    with pytest.raises(ValueError, match="runs the python world.s.: install agentsynth-python"):
        scaffold("x", tmp_path, NoWorlds())
    assert not list(tmp_path.iterdir())
