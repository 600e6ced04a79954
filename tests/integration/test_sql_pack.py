"""The SQL plugin with every other plugin installed: the `core` pack end to end through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agentsynth_sql")


def agentsynth(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_core_is_registered_without_conflicts(tmp_path):
    proc = agentsynth("plugins", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    plugins = {p["name"]: p for p in json.loads(proc.stdout)}
    sql = plugins["sql"]
    assert sql["loaded"] and not sql["errors"]
    assert sql["registered"]["pack"] == ["core"]
    assert set(sql["registered"]["checker"]) == {"sql", "sql_answer", "no_collateral", "agentsynth_ai_sql"}
    assert set(sql["registered"]["environment"]) == {"sql", "sql_compat"}
    assert "scaffold_pack" in sql["hooks"]


def test_quickstart_bench_core_oracle_with_a_floor(tmp_path):
    proc = agentsynth("bench", "--pack", "core", "--policy", "oracle", "--min-pass-rate", "100%",
                      "--json", "report.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["bench"]["overall"]["pass_at_1"] == 1.0 and report["bench"]["gate"]["passed"]
    assert len(report["tasks"]) >= 16


def test_floor_policies_fail_the_gate(tmp_path):
    proc = agentsynth("bench", "--pack", "core", "--compare", "claim_success", "noop", "--min-pass-rate", "0.01",
                      "--json", "cmp.json", cwd=tmp_path)
    assert proc.returncode == 1
    data = json.loads((tmp_path / "cmp.json").read_text())
    assert data["a"]["counts"]["passed"] == 0 and data["b"]["counts"]["passed"] == 0
    assert data["comparison"]["paired_test"]["p_value"] == 1.0


def test_validate_core_and_a_run_spec_on_it(tmp_path):
    proc = agentsynth("pack", "validate", "core", "--json", "gates.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "gates.json").read_text())["passed"]
    (tmp_path / "spec.yaml").write_text("pack: core\npolicy: oracle\nsplit: test\ntrials: 2\n")
    proc = agentsynth("run", "spec.yaml", "--run-dir", "run", "--json", "run.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["counts"]["failed"] == 0 and run["counts"]["passed"] == run["episodes"] > 0
