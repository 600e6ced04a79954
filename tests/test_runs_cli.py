"""``agentsynth resume``, ``status``, ``inspect`` and ``verify`` on real run directories."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path

import msgspec
import pytest

from agentsynth_kernel import plugins as plugin_module
from agentsynth_kernel.cli import main
from agentsynth_kernel.records import Verdict
from agentsynth_kernel.store import RunStore

SPEC = """
environment: {type: kv, initial: {a: "1"}}
oracle: oracle.py
trials: 2
tasks:
  - {id: set-b, instruction: Set b to 2, checkers: [{type: kv_equals, key: b, value: "2"}]}
  - {id: del-a, instruction: Delete a, checkers: [{type: kv_equals, key: a, value: null}]}
  - {id: wrong, instruction: Set c to 3, checkers: [{type: kv_equals, key: c, value: "3"}]}
  - {id: crash, instruction: Break it, checkers: [{type: kv_equals, key: c, value: "3"}]}
policy: oracle
"""

ORACLE = """
ORACLE = {
    "set-b": [{"tool": "set", "arguments": {"key": "b", "value": "2"}}, {"tool": "get", "arguments": {"key": "b"}},
              {"answer": "b is 2"}],
    "del-a": [{"tool": "delete", "arguments": {"key": "a"}}, {"tool": "nope", "arguments": {}}, {"answer": "gone"}],
    "wrong": [{"tool": "set", "arguments": {"key": "c", "value": "4"}}, {"answer": "done"}],
    "crash": [{"tool": "fail", "arguments": {}}],
}
"""


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    plugin_module.reset_plugins()
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return int(code or 0), out, err

    yield run
    plugin_module.reset_plugins()


@pytest.fixture
def run_dir(cli, tmp_path) -> Path:
    (tmp_path / "spec.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    (tmp_path / "oracle.py").write_text(textwrap.dedent(ORACLE).lstrip())
    code, _, err = cli("run", "spec.yaml", "--run-dir", "d", "-q")
    assert code == 0, err
    return tmp_path / "d"


def test_status(cli, run_dir):
    code, out, _ = cli("status", "d")
    assert code == 0
    assert "pack spec · policy oracle" in out
    assert "state: complete" in out
    assert "progress: 8/8 episodes (100%)" in out
    assert "pass rate 50.0% (4/8)" in out
    assert "failures by kind: agent: 2, environment: 2" in out
    assert "pass rate without infrastructure failures 66.7% (4/6, 2 left out)" in out
    code, out, _ = cli("status", "d", "--json")
    info = json.loads(out)
    assert info["state"] == "complete" and info["sessions"] == 1 and info["episodes"] == 8
    assert info["run_hash"].startswith("sha256:") and info["errors_by_kind"] == {"environment": 2}


def test_status_of_an_interrupted_and_a_partial_run(cli, run_dir):
    store = RunStore(run_dir)
    store.db.execute("DELETE FROM episodes WHERE task_id = 'wrong'")
    store.event("run_started", pid=2**22 + 12345, host=socket.gethostname(), pending=8, restored=0)  # died
    store.close()
    code, out, _ = cli("status", "d")
    assert "state: interrupted — continue with: agentsynth resume d" in out
    assert "progress: 6/8 episodes (75%)" in out
    # resume uses the stored spec: it works even when the spec file is gone
    (run_dir.parent / "spec.yaml").unlink()
    code, out, err = cli("resume", "d", "--json", "-")
    assert code == 0, err
    report = json.loads(out)
    assert report["episodes"] == 8 and report["complete"]
    code, out, _ = cli("status", "d")
    assert "state: complete" in out and "3 session(s)" in out  # the run, the one that died, the resume


def test_inspect(cli, run_dir):
    code, out, _ = cli("inspect", "d", "del-a", "--trial", "1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("── del-a · trial 1 · seed ") and "· PASSED ·" in lines[0]
    assert "instruction: Delete a" in out
    assert "observation: keys: ['a']" in out
    assert '    1  → delete({"key": "a"})' in out and "       ← ok" in out
    assert "    2  → nope({})  [invalid]" in out and "       ← error: unknown tool 'nope'" in out
    assert "    3  answer: gone" in out
    assert "  ✓ kv_equals: a=None, expected None" in out
    assert "trial 0" not in out
    code, out, _ = cli("inspect", "d", "crash")
    assert out.count("ERROR (environment)") == 2
    assert "error: environment error: RuntimeError: the world broke" in out
    assert "Traceback" in out  # the stored short traceback of the environment's bug
    code, out, _ = cli("inspect", "d", "set-b", "--json")
    data = json.loads(out)
    assert [d["trial"] for d in data] == [0, 1] and data[0]["trajectory"]["steps"][0]["action"]["name"] == "set"


def test_inspect_errors(cli, run_dir):
    code, _, err = cli("inspect", "d", "set-c")
    assert code == 2 and err.strip() == "error: d: no episodes of task 'set-c' (did you mean 'set-b'?)"
    code, _, err = cli("inspect", "d", "set-b", "--trial", "7")
    assert code == 2 and "task 'set-b' has no trial 7" in err
    code, _, err = cli("inspect", "elsewhere", "set-b")
    assert code == 2 and err.strip() == "error: elsewhere: not an agentsynth run directory (does not exist)"


def test_verify_reproduces_an_honest_run(cli, run_dir):
    code, out, err = cli("verify", "d")
    assert code == 0, out + err
    assert "verified 8 episode(s): 6 reproduced, 0 differ, 2 skipped (ended in an error)" in out
    code, out, _ = cli("verify", "d", "--json", "--task", "set-b")
    data = json.loads(out)
    assert data["episodes"] == 2 and data["reproduced"] == 2 and data["warnings"] == []


def _rewrite(run_dir: Path, task_id: str, trial: int, change) -> None:
    store = RunStore(run_dir)
    result = next(r for r in store.results(task_id) if r.trial == trial)
    store.put(change(result))
    store.close()


def test_verify_catches_a_verdict_that_does_not_reproduce(cli, run_dir):
    # a stored "pass" for a trajectory that never solved the task
    _rewrite(run_dir, "wrong", 1, lambda r: msgspec.structs.replace(
        r, status="passed", verdicts=[Verdict("kv_equals", True, 1.0, "c='3', expected '3'")]))
    # a trajectory whose tool calls were edited after the fact: the replayed world disagrees
    def drop_set(r):
        steps = [s for s in r.trajectory.steps if getattr(s.action, "name", "") != "set"]
        return msgspec.structs.replace(r, trajectory=msgspec.structs.replace(r.trajectory, steps=steps))

    _rewrite(run_dir, "set-b", 0, drop_set)
    code, out, _ = cli("verify", "d")
    assert code == 1
    assert "DIFFERS set-b trial 0: stored passed, replay failed: kv_equals: failed (b=None, expected '2')" in out
    assert "DIFFERS wrong trial 1: stored passed, replay failed: kv_equals: failed (c='4', expected '3')" in out
    assert "note: set-b trial 0: observations differ at step(s) 1" in out
    assert "verified 8 episode(s): 4 reproduced, 2 differ, 2 skipped" in out


def test_verify_warns_when_the_pack_changed(cli, run_dir):
    oracle = run_dir.parent / "oracle.py"
    oracle.write_text(oracle.read_text() + "\n# edited\n")
    code, out, err = cli("verify", "d")
    assert code == 0
    assert "warning: pack oracle_hash changed since the run" in err


def test_commands_on_corrupt_and_foreign_dirs(cli, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    for command in ("status", "resume", "verify"):
        code, out, err = cli(command, "notes")
        assert code == 2 and err.strip() == "error: notes: not an agentsynth run directory (has no run.sqlite)"
        code, out, err = cli(command, "broken")
        assert code == 2 and "broken/run.sqlite: not a readable run store" in err, err
        assert "Traceback" not in err


def test_progress_display_counts_in_flight_failures_rate_and_cost():
    from types import SimpleNamespace

    from agentsynth_kernel.commands._runner import RunProgress
    from agentsynth_kernel.records import EpisodeResult, Usage

    progress = RunProgress("pack")
    info = SimpleNamespace(total=10, restored=4, pack=SimpleNamespace(id="pack"))
    progress.started(info, None, 0)
    progress.started(info, None, 1)
    task = progress.live.tasks[0]
    assert (task.completed, task.total) == (4, 10) and task.description == "pack (4 restored)"
    assert "⟳2" in task.fields["tally"]
    progress.finished(info, EpisodeResult("a", 0, 1, "failed", usage=Usage(cost_usd=0.25)), 5)
    progress.finished(info, EpisodeResult("a", 1, 2, "error", error_kind="provider"), 6)
    task = progress.live.tasks[0]
    assert task.completed == 6
    assert "✗1" in task.fields["tally"] and "!1" in task.fields["tally"] and "⟳0" in task.fields["tally"]
    assert task.fields["cost"] == "$0.2500" and task.fields["rate"].endswith(("ep/s", "ep/min"))


def test_json_to_stdout_is_clean_json(cli, run_dir):
    code, out, err = cli("resume", "d", "--json", "-")
    assert code == 0 and json.loads(out)["episodes"] == 8 and err == ""


def test_inspect_without_a_task_lists_every_episode_and_stuck_lists_the_unfinished(cli, run_dir):
    code, out, _ = cli("inspect", "d")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["task", "trial", "outcome"]
    assert len(lines) == 1 + 8 + 1 and "8 episode(s)" in lines[-1]
    assert any(line.startswith("wrong") and "kv_equals" in line for line in lines)
    assert any(line.startswith("crash") and "error (environment)" in line for line in lines)
    code, out, _ = cli("inspect", "d", "--stuck")
    assert code == 0 and "every planned episode finished" in out
    store = RunStore(run_dir)
    store.db.execute("DELETE FROM episodes WHERE task_id = 'wrong' AND trial = 1")
    store.close()
    code, out, _ = cli("inspect", "d", "--stuck")
    assert code == 0 and out.splitlines()[0].startswith("wrong  trial 1  seed ") and "1 episode(s) never finished" in out
    code, out, _ = cli("inspect", "d", "--stuck", "--json")
    [entry] = json.loads(out)
    assert (entry["task_id"], entry["trial"]) == ("wrong", 1)
