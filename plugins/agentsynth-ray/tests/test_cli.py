"""The real command with ``--executor ray``: a driver killed with kill -9 mid-run and resumed loses
and duplicates nothing; the README's example runs."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from agentsynth_kernel import (
    STORE_FILE,
    ComponentSpec,
    RunSpec,
    get_host,
    plan_episodes,
    resolve_pack,
    select_tasks,
)

README = Path(__file__).parents[1] / "README.md"
TRIALS = 6


def _agentsynth(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _stored(run_dir: Path) -> dict[tuple[str, int, int], float]:
    path = run_dir / STORE_FILE
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        rows = db.execute("SELECT task_id, trial, seed, finished_at FROM episodes").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return {}
    finally:
        db.close()
    return {(t, n, s): at for t, n, s, at in rows}


def test_a_driver_killed_mid_run_resumes_with_nothing_lost_or_played_twice(cli_env, tmp_path):
    spec = RunSpec(policy=ComponentSpec("oracle"), pack="core", trials=TRIALS, seed=3)
    pack = resolve_pack(spec, base_dir=tmp_path, source="test", host=get_host())
    planned = {(t.id, trial, seed) for t, trial, seed in plan_episodes(spec, select_tasks(spec, pack))}
    run_dir = tmp_path / "d"
    proc = _agentsynth(["bench", "--pack", "core", "--policy", "oracle", "--trials", str(TRIALS), "--seed", "3",
                        "--executor", "ray,workers=2,per_worker=2", "--run-dir", "d", "-q"], tmp_path, cli_env)
    try:
        deadline = time.monotonic() + 180
        while len(_stored(run_dir)) < 10 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    before = _stored(run_dir)
    assert 10 <= len(before) < len(planned)  # killed mid-run, with results on disk
    resumed = _agentsynth(["resume", "d", "--executor", "ray,workers=2", "--json", "-", "-q"], tmp_path, cli_env)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    after = _stored(run_dir)
    assert set(after) == planned  # every planned episode, each once (the key is the store's primary key)
    assert {k: after[k] for k in before} == before  # nothing stored before the kill was played again
    summary = json.loads(out)
    assert summary["counts"]["passed"] == len(planned)


def test_the_readme_example_runs(cli_env, tmp_path):
    text = README.read_text()
    block = re.search(r"<!-- example -->\n```(?:bash|console)\n(.*?)```", text, re.S)
    assert block, "README has no example block"
    lines = [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]
    for line in lines:
        result = subprocess.run(line, shell=True, cwd=tmp_path, env={**cli_env, "PATH": f"{Path(sys.executable).parent}:"
                                                                       + cli_env.get("PATH", "")},
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (line, result.stderr[-3000:])
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["counts"] == {"passed": 22, "failed": 0, "error": 0}  # the oracle solves all of core, on Ray


def test_an_unreachable_cluster_fails_each_episode_with_one_clear_line_not_a_hang(tmp_path):
    import os
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("RAY_ADDRESS", None)
    proc = _agentsynth(["bench", "--pack", "core", "--policy", "oracle", "--only", "order-total", "--executor",
                        f"ray,address=127.0.0.1:{port},workers=1,connect_timeout=3", "--json", "out.json", "-q"],
                       tmp_path, env)
    _, err = proc.communicate(timeout=120)
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["counts"]["error"] == 1 and "Traceback" not in err
    error = report["results"][0]["error"]
    assert f"no Ray cluster answered at 127.0.0.1:{port} within 3 s (connect_timeout)" in error, error
