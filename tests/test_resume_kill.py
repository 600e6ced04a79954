"""kill -9 and resume: a real ``agentsynth run`` subprocess is killed with SIGKILL at many different
points, then run again on the same run directory until it completes. The final store must hold
every episode exactly once, with the verdicts (and trajectories) of an uninterrupted run."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentsynth_kernel import plugins as plugin_module
from agentsynth_kernel.engine import execute, trajectory_bytes
from agentsynth_kernel.spec import load_run_spec
from agentsynth_kernel.store import STORE_FILE, RunStore

TASKS = 12  # 24 episodes: room for 11 kills even when one kill point catches several episodes
TRIALS = 2
TOTAL = TASKS * TRIALS

ORACLE = """
def solve(task):
    value = "v" if int(task.id[1:]) % 3 else "wrong"  # every third task fails its checker
    return [
        {"tool": "sleep", "arguments": {"seconds": 0.15}},
        {"tool": "set", "arguments": {"key": task.id, "value": value}},
        {"tool": "get", "arguments": {"key": task.id}},
        {"answer": "done"},
    ]
"""


def write_spec(tmp_path: Path) -> Path:
    lines = ["environment: {type: kv}", "oracle: oracle.py", "policy: oracle", f"trials: {TRIALS}",
             "concurrency: 2", "tasks:"]
    for i in range(TASKS):
        lines.append(f"  - {{id: t{i}, instruction: 'set t{i}', checkers: [{{type: kv_equals, key: t{i}, value: v}}]}}")
    (tmp_path / "oracle.py").write_text(ORACLE)
    spec = tmp_path / "spec.yaml"
    spec.write_text("\n".join(lines) + "\n")
    return spec


def stored_count(run_dir: Path) -> int:
    path = run_dir / STORE_FILE
    if not path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            return db.execute("SELECT count(*) FROM episodes").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:  # not created yet
        return 0


def start(tmp_path: Path) -> subprocess.Popen:
    # only the built-ins and the kv test world: a quick start-up keeps the loop of kills fast
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LOAD_PLUGINS": "testworld"}
    return subprocess.Popen(
        [sys.executable, "-c", "from agentsynth_kernel.cli import main; main()",
         "run", "spec.yaml", "--run-dir", "run", "-q"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


@pytest.fixture(autouse=True)
def only_testworld(monkeypatch):
    monkeypatch.setenv("AGENTSYNTH_LOAD_PLUGINS", "testworld")
    plugin_module.reset_plugins()
    yield
    plugin_module.reset_plugins()


def test_sigkill_at_many_points_then_resume(tmp_path):
    spec_file = write_spec(tmp_path)
    run_dir = tmp_path / "run"

    # the reference: one uninterrupted run, in memory
    spec, pack = load_run_spec(spec_file)
    reference = asyncio.run(execute(spec, pack)).results
    expected = {r.key: (r.status, [(v.checker, v.passed, v.detail) for v in r.verdicts]) for r in reference}
    assert len(expected) == TOTAL
    assert sum(s == "failed" for s, _ in expected.values()) == 8  # t0, t3, t6, t9 x 2 trials

    kills: list[tuple[str, int]] = []  # (how the kill point was chosen, episodes stored at the kill)
    delays = [0.05, 0.3, 0.6, 0.9]
    for attempt in range(30):
        if len(kills) >= 11:
            break
        before = stored_count(run_dir)
        proc = start(tmp_path)
        if attempt % 3 == 0:  # a fixed delay: start-up, store creation, mid-episode ...
            how = f"after {delays[(attempt // 3) % len(delays)]}s"
            time.sleep(delays[(attempt // 3) % len(delays)])
        else:  # right after the first / second episode of this session was stored
            how = f"after {attempt % 3} new episode(s)"
            deadline = time.monotonic() + 15
            while stored_count(run_dir) < before + attempt % 3 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
        if proc.poll() is not None:  # finished before we could kill it
            assert proc.returncode == 0, proc.stderr.read().decode()
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        kills.append((how, stored_count(run_dir)))

    stored_at_kill = [n for _, n in kills]
    assert len(kills) >= 10, kills
    assert len(set(kills)) >= 10, kills  # ten different kill points
    assert any(n == 0 for n in stored_at_kill) and any(0 < n < TOTAL for n in stored_at_kill), kills

    final = start(tmp_path)
    out, err = final.communicate(timeout=60)
    assert final.returncode == 0, err.decode()

    store = RunStore(run_dir, create=False)
    try:
        rows = store.db.execute("SELECT task_id, trial, seed, count(*) FROM episodes GROUP BY 1, 2, 3").fetchall()
        results = list(store.results())
        sessions = [data for _, kind, data in store.events() if kind == "run_started"]
        assert store.integrity() == "ok"
    finally:
        store.close()
    assert len(rows) == TOTAL and all(n == 1 for *_, n in rows)  # every episode exactly once
    assert {r.key for r in results} == set(expected)
    got = {r.key: (r.status, [(v.checker, v.passed, v.detail) for v in r.verdicts]) for r in results}
    assert got == expected  # the same verdicts as the uninterrupted run
    by_key = {r.key: trajectory_bytes(r) for r in reference}
    assert all(trajectory_bytes(r) == by_key[r.key] for r in results)  # and the same trajectories
    for result in results:  # no half-written episode survived a kill
        assert [s.action.name for s in result.trajectory.steps[:3]] == ["sleep", "set", "get"]
    # every session planned the whole run and restored exactly what earlier sessions had stored
    assert all(s["pending"] + s["restored"] == TOTAL for s in sessions)
    assert sessions[-1]["restored"] == max(stored_at_kill)
    assert [s["restored"] for s in sessions] == sorted(s["restored"] for s in sessions)


def test_status_while_running_then_ctrl_c_then_resume(tmp_path, capsys):
    from agentsynth_kernel.cli import main

    (tmp_path / "oracle.py").write_text(
        "def solve(task):\n    return [{'tool': 'sleep', 'arguments': {'seconds': 0.4}},"
        " {'tool': 'set', 'arguments': {'key': 'k', 'value': 'v'}}]\n")
    tasks = "\n".join(f"  - {{id: t{i}, instruction: x, checkers: [{{type: kv_equals, key: k, value: v}}]}}"
                      for i in range(4))
    (tmp_path / "spec.yaml").write_text(
        f"environment: {{type: kv}}\noracle: oracle.py\npolicy: oracle\ntrials: 2\nconcurrency: 2\ntasks:\n{tasks}\n")
    run_dir = tmp_path / "run"

    def status() -> str:
        try:
            main(["status", str(run_dir)])
        except SystemExit:
            pass
        return capsys.readouterr().out

    proc = start(tmp_path)
    try:
        deadline = time.monotonic() + 20
        while stored_count(run_dir) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert f"state: running (pid {proc.pid})" in status()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130
    out = status()
    assert f"state: interrupted — continue with: agentsynth resume {run_dir}" in out
    assert "progress: 8/8" not in out
    store = RunStore(run_dir, create=False)
    assert store.last_event("run_started", "run_finished")[1]["interrupted"] is True
    store.close()
    try:
        main(["resume", str(run_dir), "-q"])
    except SystemExit as exc:
        assert not exc.code
    assert "state: complete" in status() and stored_count(run_dir) == 8
