"""Judge + real world + export, across installed plugins: `agentsynth run` on the sql `core` pack with
`judge: heuristic`, judge scores and reward in the store and in the JSONL export, then
`agentsynth judge calibrate` on an oracle run and a random run (known outcomes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("agentsynth_judge")
pytest.importorskip("agentsynth_sql")
pytest.importorskip("agentsynth_export")

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def agentsynth(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300)


def test_judged_runs_export_and_calibrate(tmp_path):
    (tmp_path / "oracle.yaml").write_text(
        "pack: core\npolicy: oracle\njudge: {type: heuristic}\nexport: [{type: jsonl, path: oracle.jsonl, include_test: true}]\n")
    (tmp_path / "random.yaml").write_text("pack: core\npolicy: {type: random, calls: 3}\njudge: {type: heuristic}\n")
    for name in ("oracle", "random"):
        done = agentsynth("run", f"{name}.yaml", "--run-dir", f"runs/{name}", "-q", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "oracle.jsonl").read_text().splitlines()]
    assert rows and all(r["status"] == "passed" for r in rows)
    assert all(r["scores"]["judge.reward"] >= 0.8 and r["scores"]["judge.passed"] == 1.0 for r in rows)
    done = agentsynth("judge", "calibrate", "runs/oracle", "runs/random", "--json", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    n = len(rows)
    assert report["n"] == 2 * n and report["world_pass_rate"] >= 0.5
    # the blind heuristic tells an oracle from random tool calls on this pack
    assert report["accuracy"] >= 0.9 and report["kappa"] >= 0.8
