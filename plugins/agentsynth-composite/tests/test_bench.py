"""The benchmark script runs and writes what the README says (one repetition: a smoke run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import has_sandbox

BENCH = Path(__file__).parents[1] / "bench" / "bench_reset_cost.py"


@pytest.mark.skipif(not has_sandbox(), reason="bubblewrap (bwrap) is not installed")
def test_the_reset_benchmark_writes_results_with_load_and_baseline(tmp_path):
    pytest.importorskip("agentsynth_python")
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--repeat", "2", "--out", str(out)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert len(report["machine"]["load_before"]) == 3 and report["warm_pool"] is False
    results = report["results"]
    for key in ("db", "py", "composite", "sum_of_children", "two_python", "sum_of_two_python"):
        assert results[key]["reset"]["n"] == 2 and results[key]["reset"]["median_ms"] > 0
    assert results["ratios"]["composite_reset_vs_sum_of_children"] > 0
