"""The command line end to end: a spec run through the real `agentsynth` process, the JSON
report, clean errors for bad input, and a cold start that imports nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import run_agentsynth


def test_run_spec_end_to_end_writes_report_and_store(tmp_path, kv_spec):
    result = run_agentsynth("run", str(kv_spec), "--trials", "2", "--run-dir", "out", "--json", "report.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "pass rate 100.0% (4/4)" in result.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"] == {"passed": 4, "failed": 0, "error": 0}
    assert report["trials"] == 2 and report["complete"] is True
    assert {t["task_id"]: t["pass_hat_2"] for t in report["tasks"]} == {"set-b": 1.0, "del-a": 1.0}
    assert (tmp_path / "out" / "run.sqlite").is_file()


def test_json_to_stdout_is_pure_json(tmp_path, kv_spec):
    result = run_agentsynth("run", str(kv_spec), "--no-store", "--json", "-", "--seed", "5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["seed"] == 5 and report["episodes"] == 2
    assert {r["status"] for r in report["results"]} == {"passed"}


def test_failing_policy_still_exits_zero_with_a_report(tmp_path, kv_spec):
    spec = kv_spec.read_text().replace("policy: {type: oracle}", "policy: noop")
    kv_spec.write_text(spec)
    result = run_agentsynth("run", str(kv_spec), "--no-store", "--json", "-", cwd=tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout)["counts"]["failed"] == 2


def test_bad_input_gives_clean_lines_and_exit_2(cli, write):
    write("spec.yaml", "policy: {type: orcale}\ntrails: 1\n")
    code, out, err = cli("run", "spec.yaml")
    assert code == 2
    assert "Traceback" not in err
    assert err.splitlines() == ["error: spec.yaml: trails: unknown key (did you mean 'trials'?)"]


def test_missing_spec_file(cli):
    code, _, err = cli("run", "missing.yaml")
    assert (code, err.strip()) == (2, "error: missing.yaml: file not found")


def test_unknown_command_suggests(cli):
    code, _, err = cli("rnu")
    assert code == 2 and "No such command 'rnu'" in err


def test_help_is_fast_and_imports_no_plugin_or_heavy_library():
    probe = (
        "import sys\n"
        "from agentsynth_kernel.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('litellm', 'httpx', 'rich', 'yaml', 'cattrs', 'agentsynth_testworld',"
        " 'agentsynth_sql', 'agentsynth_kernel.spec', 'agentsynth_kernel.engine') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert "Commands:" in result.stdout and "run" in result.stdout
    assert "HEAVY []" in result.stdout


def test_plugins_command_lists_registrations(cli):
    code, out, _ = cli("plugins")
    assert code == 0
    assert "builtins  (agentsynth 0.1.0)" in out
    assert "  policies: noop, claim_success, random, callable, scripted, oracle" in out.replace(", llm", "")
    code, out, _ = cli("plugins", "--json", "--hook", "register_environments")
    names = {p["name"] for p in json.loads(out)}
    assert "testworld" in names and "builtins" not in names
