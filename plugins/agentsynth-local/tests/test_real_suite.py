"""The real-model suite (``nox -s real-llm``): bench, judge, synth forward and export against the
embedded model, through the command line as a user runs them. Needs agentsynth-sql, -judge, -synth
and -export besides this plugin, and minutes of CPU: skipped unless AGENTSYNTH_REAL_LLM=1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

pytestmark = [
    pytest.mark.real_llm,
    pytest.mark.skipif(os.environ.get("AGENTSYNTH_REAL_LLM") != "1", reason="the real-model suite: nox -s real-llm"),
]

ONLY = ["--only", "lookup-customer-email", "--only", "count-pending-orders", "--only", "update-email"]


def agentsynth(*args: str, cwd, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LLM_CACHE": "off"}
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """The whole core pack on the embedded model, in small-model mode (the default for local)."""
    base = tmp_path_factory.mktemp("real")
    began = time.monotonic()
    # --concurrency 1: the embedded model answers one request at a time, so parallel episodes only
    # queue (their waits count against the episode timeout) and evict each other's prompt cache
    res = agentsynth("bench", "--pack", "core", "--policy", "llm,model=local,max_turns=6", "--concurrency", "1",
                     "--run-dir", "run", "--json", "report.json", "-q", cwd=base)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((base / "report.json").read_text())
    report["wall_s"] = time.monotonic() - began
    print(f"\ncore on local (small-model mode): {report['counts']} in {report['wall_s']:.0f} s")
    return base, report


def test_bench_core_on_the_embedded_model(bench_run):
    _base, report = bench_run
    assert report["episodes"] >= 20 and report["counts"].get("error", 0) == 0, report["counts"]
    assert report["counts"].get("passed", 0) + report["counts"].get("failed", 0) == report["episodes"]


def test_without_small_model_mode_the_path_still_runs(tmp_path):
    res = agentsynth("bench", "--pack", "core", "--policy", "llm,model=local,small_model=false,max_turns=3", *ONLY,
                     "--concurrency", "1",
                     "--json", "report.json", "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    print(f"\ncore subset on local without small-model mode: {report['counts']}")
    assert report["episodes"] == 3 and report["counts"].get("error", 0) == 0


def test_judge_scores_the_run_with_the_embedded_model(bench_run):
    base, report = bench_run
    (base / "judge.yaml").write_text("judge: {type: llm, model: local}\n")
    res = agentsynth("judge", "score", "run", "-o", "scores.jsonl", "--judge-spec", "judge.yaml", cwd=base)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [json.loads(line) for line in (base / "scores.jsonl").read_text().splitlines()]
    scored = [r for r in rows if r.get("score") is not None]
    print(f"\njudge local: {len(scored)} of {len(rows)} scored; {res.stdout.strip()}")
    assert len(rows) == report["episodes"] and len(scored) >= len(rows) // 2  # grammar-constrained replies parse
    assert all(0.0 <= r["score"] <= 1.0 for r in scored)


def test_synth_forward_and_export_with_the_embedded_teacher(tmp_path):
    res = agentsynth("synth", "core", "-g", "forward", "-p", "teachers=[{type: llm, model: local, max_turns: 4}]",
                     "-p", "split=train", "-o", "fw.jsonl", "--run-dir", "fw", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    print(f"\nsynth forward with local: {res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ''}")
    res = agentsynth("bench", "--pack", "core", "--policy", "llm,model=local,max_turns=3", *ONLY, "--concurrency", "1",
                     "--run-dir", "run",
                     "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    res = agentsynth("export", "run", "-f", "openai", "-o", "sft.jsonl", "--filter", "all", "--include-test",
                     cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = (tmp_path / "sft.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["messages"][0]["role"] in ("system", "user")


BT_CONFIG = """
type: back_translation
model: local
n: 2
explorer:
  type: scripted
  actions:
    - {tool: sql_query, arguments: {sql: "SELECT id, name, tier FROM customers WHERE id = 2"}}
    - {tool: sql_execute, arguments: {sql: "UPDATE customers SET tier = 'gold' WHERE id = 2"}}
probes:
  - {tool: sql_query, arguments: {sql: "SELECT tier FROM customers WHERE id = 2"}}
"""


def test_back_translation_accepts_tasks_the_embedded_model_wrote(tmp_path):
    """The path on which synth accepts the tiny model's work: a given chain of calls, the model writes
    the request it fulfils (a prompt that fits its context, a reply constrained to the schema); the
    task is verified by replay and noop, and the written pack passes `pack validate`."""
    (tmp_path / "bt.yaml").write_text(BT_CONFIG)
    res = agentsynth("synth", "core", "-g", "back_translation", "--config", "bt.yaml", "-o", "bt-pack", "--run-dir", "bt", "--json", "bt.json",
                     cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((tmp_path / "bt.json").read_text())
    print(f"\nback_translation with local: {report['accepted']} accepted, rejected {report['rejected']}, "
          f"{report['llm_requests']} requests, {report['duration_s']:.0f} s")
    assert report["accepted"] >= 1, report
    import yaml

    tasks = yaml.safe_load((tmp_path / "bt-pack" / "pack.yaml").read_text())["tasks"]
    assert all(len(t["instruction"]) >= 8 for t in tasks)
    print("instructions written by the model: " + " | ".join(t["instruction"][:120] for t in tasks))
