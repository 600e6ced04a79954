"""The browser plugin's webshop pack with every plugin installed (the `together` session): its
names (`browser`, `page`, `url`, `app_db`, `webshop`) clash with no other plugin, and the bench
command scores noop 0 % and the oracle 100 % on real headless Chromium."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("agentsynth_browser")

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
TASKS = ("find-price", "fix-cart", "checkout-express", "cancel-order")  # answer, app_db, url, page checkers


def agentsynth(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300)


def test_browser_plugin_loads_cleanly_next_to_the_others(tmp_path):
    done = agentsynth("plugins", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (info,) = [p for p in json.loads(done.stdout) if p["name"] == "browser"]
    assert info["loaded"] and info["errors"] == []
    assert info["registered"]["checker"] == ["page", "url", "app_db"]


def test_bench_webshop_noop_vs_oracle(tmp_path):
    only = [a for t in TASKS for a in ("--only", t)]
    done = agentsynth("bench", "--pack", "webshop", "--compare", "noop", "oracle", *only, "--json", "report.json",
                      "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["a"]["pass_rate"]["rate"] == 0.0 and report["a"]["counts"]["error"] == 0
    assert report["b"]["pass_rate"]["rate"] == 1.0 and report["b"]["episodes"] == len(TASKS)
