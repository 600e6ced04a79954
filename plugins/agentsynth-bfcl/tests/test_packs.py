"""BFCL categories as packs through the real engine and command line: the oracle replays the
ground truth and passes, floors pass nothing, `pack validate` passes the call categories, and bad
data or options are clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentsynth_bfcl.convert import CATEGORIES, load_items, write_pack
from agentsynth_kernel import AgentsynthError, get_host, load_pack, validate_pack
from agentsynth_kernel.cli import cli
from conftest import SUBSET


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def agentsynth(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from agentsynth_kernel.cli import main; sys.argv[0] = 'agentsynth'; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_category_with_data_is_registered_as_a_pack():
    names = set(get_host().names("pack"))
    present = {f"bfcl:{c}" for c, cat in CATEGORIES.items() if (SUBSET / f"BFCL_v4_{cat.stem}.json").is_file()}
    assert present and present <= names
    assert "bfcl:live-multiple" not in names  # not in the subset: no pack without data
    pack = load_pack("bfcl:parallel")
    assert pack.id == "bfcl-parallel" and len(pack.tasks) == 8
    task = pack.tasks[0]
    assert task.id == "parallel_0" and "Taylor Swift" in task.instruction
    assert task.checkers[0].type == "bfcl_ast" and len(task.checkers[0].params["answers"]) == 2


def test_bench_simple_oracle_passes_with_pass_hat_k_and_intervals(tmp_path):
    out = tmp_path / "report.json"
    result = invoke("bench", "--pack", "bfcl:simple", "--policy", "oracle", "-k", "2", "--json", str(out), "-q")
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["episodes"] == 24
    assert report["pass_rate"]["rate"] == 1.0 and report["pass_rate"]["ci95"][0] > 0.8
    assert report["pass_rate"]["ci95"][1] == 1.0
    assert any(k.startswith("pass_hat") for k in report)


@pytest.mark.parametrize("policy", ["noop", "random", "claim_success"])
def test_floors_pass_no_call_category(policy, tmp_path):
    for category in ("simple", "multiple", "parallel", "parallel-multiple"):
        out = tmp_path / f"{category}.json"
        result = invoke("bench", "--pack", f"bfcl:{category}", "--policy", policy, "--json", str(out), "-q")
        assert result.exit_code == 0, result.output
        report = json.loads(out.read_text())
        assert report["pass_rate"]["passed"] == 0, (category, policy)


def test_a_failed_call_says_why():
    out = invoke("bench", "--pack", "bfcl:simple", "--policy", "noop", "--only", "simple_python_0", "--json", "-", "-q")
    report = json.loads(out.output)
    why = report["results"][0]["verdicts"][0]["detail"]
    assert "0 call(s) made" in why and "expected 1: calculate_triangle_area" in why


@pytest.mark.parametrize("category", ["parallel", "parallel-multiple"])
def test_call_categories_pass_every_validate_gate(category):
    pack, gates = validate_pack(f"bfcl:{category}", concurrency=4, timeout=30)
    assert pack is not None
    bad = {g.name: g.problems for g in gates if g.status != "pass"}
    assert bad == {}, bad


def test_irrelevance_fails_the_floor_gate_by_design():
    """No call is the right answer to an irrelevance item: the noop policy passes them all. The
    category is meant to be reported next to the call categories, never alone."""
    pack, gates = validate_pack("bfcl:irrelevance", concurrency=4, timeout=30)
    floors = next(g for g in gates if g.name == "floors")
    assert floors.status == "fail" and any("noop policy" in p for p in floors.problems)
    assert next(g for g in gates if g.name == "oracle").status == "pass"


def test_unsatisfiable_items_are_left_out_and_named(tmp_path):
    path = write_pack("live-simple", tmp_path / "ls", SUBSET)
    pack = load_pack(path)
    assert "live_simple_106-63-0" not in {t.id for t in pack.tasks} and len(pack.tasks) == 6
    skipped = pack.metadata["skipped"]
    assert [s["id"] for s in skipped] == ["live_simple_106-63-0"]
    assert "missing required parameter" in skipped[0]["why"]


def test_bfcl_import_writes_a_pack_that_the_oracle_passes(tmp_path):
    out = tmp_path / "mine"
    result = invoke("bfcl", "import", "multiple", "-o", str(out), "--data", str(SUBSET), "--limit", "3")
    assert result.exit_code == 0, result.output
    assert (out / "pack.yaml").is_file() and (out / "functions.jsonl").is_file() and (out / "oracle.py").is_file()
    report = tmp_path / "r.json"
    assert invoke("bench", "--pack", str(out), "--policy", "oracle", "--json", str(report), "-q").exit_code == 0
    assert json.loads(report.read_text())["pass_rate"] == {"passed": 3, "n": 3, "rate": 1.0,
                                                           "ci95": json.loads(report.read_text())["pass_rate"]["ci95"]}


def test_bad_input_is_a_clear_error_never_a_traceback(tmp_path):
    broken = tmp_path / "data"
    (broken / "possible_answer").mkdir(parents=True)
    lines = (SUBSET / "BFCL_v4_simple_python.json").read_text().splitlines()
    (broken / "BFCL_v4_simple_python.json").write_text(lines[0] + "\n{not json\n")
    (broken / "possible_answer" / "BFCL_v4_simple_python.json").write_text(
        (SUBSET / "possible_answer" / "BFCL_v4_simple_python.json").read_text())
    run = agentsynth("bfcl", "import", "simple", "-o", str(tmp_path / "out"), "--data", str(broken), cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"{broken / 'BFCL_v4_simple_python.json'}:2: not JSON" in run.stderr
    assert not (tmp_path / "out").exists()
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("")
    run = agentsynth("bfcl", "import", "simple", "-o", str(full), "--data", str(SUBSET), cwd=tmp_path)
    assert run.returncode == 2 and "already exists and is not empty" in run.stderr
    run = agentsynth("bfcl", "import", "exec-simple", "-o", str(tmp_path / "o"), cwd=tmp_path)
    assert run.returncode == 2 and "exec-simple" in run.stderr and "Traceback" not in run.stderr
    with pytest.raises(AgentsynthError, match="no item 'simple_python_999'"):
        load_items("simple", SUBSET, ids=["simple_python_999"])
    no_truth = tmp_path / "nt"
    (no_truth / "possible_answer").mkdir(parents=True)
    (no_truth / "BFCL_v4_simple_python.json").write_text(lines[0] + "\n")
    (no_truth / "possible_answer" / "BFCL_v4_simple_python.json").write_text("")
    with pytest.raises(AgentsynthError, match="simple_python_0: no ground truth"):
        load_items("simple", no_truth)


def test_bfcl_status_names_the_data_and_the_packs(tmp_path):
    run = agentsynth("bfcl", "status", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert f"data: {SUBSET}" in run.stdout and "bfcl:parallel  8 tasks" in run.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    run = subprocess.run([sys.executable, "-c", "import sys; from agentsynth_kernel.cli import main; main()",
                          "bfcl", "status"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "AGENTSYNTH_BFCL_DATA": str(empty)})
    assert run.returncode == 1 and "no BFCL data files here" in run.stderr and "Traceback" not in run.stderr


def test_the_non_live_group_is_one_pack_with_a_tier_per_category(tmp_path):
    out = tmp_path / "r.json"
    assert invoke("bench", "--pack", "bfcl:non-live", "--policy", "noop", "--json", str(out), "-q").exit_code == 0
    report = json.loads(out.read_text())
    tiers = {t["tier"]: t for t in report["tiers"]} if isinstance(report["tiers"], list) else report["tiers"]
    assert set(tiers) >= {"simple", "multiple", "parallel", "parallel-multiple", "irrelevance"}
    # no call is right only where nothing fits: noop passes the irrelevance tier and nothing else
    passed = {r["task_id"] for r in report["results"] if r["status"] == "passed"}
    assert passed == {t.id for t in load_pack("bfcl:non-live").tasks if t.tier == "irrelevance"} and passed
    assert "bfcl:live" not in get_host().names("pack")  # the subset lacks live-multiple: no partial group
    out2 = tmp_path / "o.json"
    assert invoke("bench", "--pack", "bfcl:non-live", "--policy", "oracle", "--json", str(out2), "-q").exit_code == 0
    assert json.loads(out2.read_text())["pass_rate"]["rate"] == 1.0
