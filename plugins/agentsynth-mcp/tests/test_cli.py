"""Through the real `agentsynth` command line: the shipped pack, crash / hang / isError
episodes, bad specs, and `agentsynth mcp tools`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from mcp_helpers import TOY, wait_dead

AGENTSYNTH = shutil.which("agentsynth", path=str(Path(sys.executable).parent)) or "agentsynth"
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def cli(*args: str, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTSYNTH, *args], capture_output=True, text=True, cwd=cwd, env=ENV, timeout=timeout)


def test_pack_oracle_passes_everything_and_noop_nothing(tmp_path):
    """The shipped mcp-tickets pack, by name, through `agentsynth bench`."""
    out = tmp_path / "bench.json"
    proc = cli("bench", "--pack", "mcp-tickets", "--compare", "noop", "oracle", "--json", str(out), "-q",
               "--min-pass-rate", "1.0")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads(out.read_text())
    noop, oracle = report["a"], report["b"]
    assert oracle["episodes"] == noop["episodes"] >= 8
    assert oracle["counts"] == {"passed": oracle["episodes"], "failed": 0, "error": 0}
    assert noop["counts"] == {"passed": 0, "failed": noop["episodes"], "error": 0}
    # the verdicts come from the world's end state
    checkers = {v["checker"] for r in oracle["results"] for v in r["verdicts"]}
    assert checkers == {"mcp_call", "mcp_file", "mcp_sql"}


def test_claim_success_does_not_fool_the_pack(tmp_path):
    spec = tmp_path / "claim.yaml"
    spec.write_text(yaml.safe_dump({"pack": "mcp-tickets", "policy": "claim_success",
                                    "only": ["close-vpn", "export-bob"]}))
    proc = cli("run", str(spec), "--no-store", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["counts"] == {"passed": 0, "failed": 2, "error": 0}


ORACLE = """
ORACLE = {
    "ok": [{"tool": "echo", "arguments": {"text": "hello"}}, {"tool": "bump"}, {"answer": "done"}],
    "tool-error": [{"tool": "fail", "arguments": {"reason": "not allowed"}}, {"answer": "it failed"}],
    "crash": [{"tool": "bump"}, {"tool": "crash"}, {"answer": "unreachable"}],
    "hang": [{"tool": "hang"}, {"answer": "unreachable"}],
}
"""


def test_crash_hang_and_tool_error_episodes_through_run(tmp_path):
    (tmp_path / "oracle.py").write_text(ORACLE)
    (tmp_path / "pids").mkdir()
    spec = {
        "name": "toy",
        "policy": "oracle",
        "oracle": "oracle.py",
        "concurrency": 4,
        "environment": {
            "type": "mcp", "command": "{python}",
            "args": [str(TOY), "--pidfile", "{base_dir}/pids/{seed}.pid"],
            "call_timeout": 2,
            "writable": ["{base_dir}/pids"],  # writes elsewhere outside the episode are refused
            "checks_on": "agent-session",  # the counter lives only in the agent's server process
        },
        "tasks": [
            {"id": "ok", "instruction": "bump once",
             "checkers": [{"type": "mcp_call", "resource": "toy://counter", "equals": 1}]},
            {"id": "tool-error", "instruction": "try the failing tool",
             "checkers": [{"type": "mcp_call", "resource": "toy://counter", "equals": 0},
                          {"type": "called_tool", "tool": "fail"}]},
            {"id": "crash", "instruction": "crash", "checkers": [{"type": "called_tool", "tool": "crash"}]},
            {"id": "hang", "instruction": "hang", "checkers": [{"type": "called_tool", "tool": "hang"}]},
        ],
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = cli("run", str(path), "--run-dir", str(tmp_path / "run"), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    results = {r["task_id"]: r for r in report["results"]}
    assert results["ok"]["status"] == "passed"
    assert results["tool-error"]["status"] == "passed"  # isError is an observation, not a crash
    crash, hang = results["crash"], results["hang"]
    assert (crash["status"], crash["error_kind"]) == ("error", "environment")
    assert "closed the connection during tools/call 'crash' (it crashed or exited)" in crash["error"]
    assert "crashing on purpose" in crash["error"]
    assert (hang["status"], hang["error_kind"]) == ("error", "environment")
    assert "did not answer tools/call 'hang' within 2s" in hang["error"]
    # every server of the run is gone: nothing orphaned
    pids = [int(p.read_text()) for p in (tmp_path / "pids").glob("*.pid")]
    assert len(pids) == 4
    assert all(wait_dead(pid) for pid in pids)
    # the tool error is in the stored trajectory as an error observation the agent saw
    from agentsynth_kernel import RunStore

    store = RunStore(tmp_path / "run")
    try:
        stored = {r.task_id: r for r in store.results()}
    finally:
        store.close()
    step = stored["tool-error"].trajectory.steps[0]
    assert step.observation.error is True and "refused: not allowed" in step.observation.content
    assert {t.name for t in stored["ok"].trajectory.tools} >= {"echo", "fail", "read_resource"}


def test_bad_environment_params_are_path_qualified_errors(tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "pack.yaml").write_text(yaml.safe_dump({
        "id": "bad",
        "environment": {"type": "mcp", "command": "{python}"},
        "tasks": [
            {"id": "t", "instruction": "x", "environment": {"comand": "python"},
             "checkers": [{"type": "mcp_sql", "db": "a.db", "qery": "x"}]},
            {"id": "u", "instruction": "x", "environment": {"args": [["nested"]]},
             "checkers": [{"type": "mcp_call", "tool": "a"}]},
            {"id": "v", "instruction": "x", "environment": {"command": None, "call_timeout": "soon"},
             "checkers": [{"type": "mcp_call", "tool": "a"}]},
            {"id": "w", "instruction": "x", "environment": {"transport": "carrier-pigeon"},
             "checkers": [{"type": "mcp_call", "tool": "a"}]},
        ],
    }))
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"pack": str(pack), "policy": "noop"}))
    proc = cli("run", str(spec), "--no-store")
    assert proc.returncode == 2
    err = proc.stderr
    assert "Traceback" not in err
    assert "tasks[0].environment.comand: unknown key (did you mean 'command'?)" in err
    assert "tasks[0].checkers[0].qery: unknown key for checker 'mcp_sql' (did you mean 'query'?)" in err
    assert "tasks[1].environment: args[0]: expected a string, got ['nested']" in err
    assert "tasks[2].environment.call_timeout: expected a number, got str 'soon'" in err
    assert "tasks[3].environment: transport: expected one of auto, stdio, streamable-http, sse" in err


def test_mcp_tools_command_prints_a_servers_tools():
    proc = cli("mcp", "tools", "--", sys.executable, str(TOY))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("toy 0.1 (protocol ")
    assert "  add(a: integer, b: integer)\n      Add two integers." in proc.stdout
    assert "  fail(reason?: string)" in proc.stdout

    proc = cli("mcp", "tools", "--json", "--all", "--", sys.executable, str(TOY))
    data = json.loads(proc.stdout)
    add = next(t for t in data["tools"] if t["name"] == "add")
    assert add["input_schema"]["required"] == ["a", "b"]
    assert [r["uri"] for r in data["resources"]][:1] == ["toy://readme"]
    assert data["prompts"][0]["name"] == "greet"


def test_mcp_tools_command_errors_are_clean():
    proc = cli("mcp", "tools", "--timeout", "60", "--", sys.executable, str(TOY), "--crash-on-start")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "closed the connection before the handshake finished" in proc.stderr
    assert "cannot start (--crash-on-start)" in proc.stderr
    proc = cli("mcp", "tools")
    assert proc.returncode == 2 and "give a server command after '--'" in proc.stderr


def test_mcp_call_command_calls_one_tool_or_reads_a_resource():
    proc = cli("mcp", "call", "-t", "item", "-a", '{"name": "box"}', "--json", "--", sys.executable, str(TOY))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"name": "box", "tags": ["x", "y"]}
    proc = cli("mcp", "call", "-t", "fail", "-a", '{"reason": "no"}', "--", sys.executable, str(TOY))
    assert proc.returncode == 1 and "refused: no" in proc.stdout  # a tool error: shown, exit 1
    proc = cli("mcp", "call", "-t", "x", "-a", "[1]", "--", sys.executable, str(TOY))
    assert proc.returncode == 2 and "expected a JSON object" in proc.stderr
