"""Ctrl-C stops a fast run at once: SQL episodes run on the event loop with an inline policy and
never suspend, so the run used to ignore SIGINT until every episode was done."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path


def _stored(run_dir: Path) -> int:
    try:
        with sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM episodes").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_ctrl_c_stops_a_fast_run_and_it_resumes(tmp_path):
    from agentsynth_kernel.store import STORE_FILE

    assert STORE_FILE == "run.sqlite"
    run_dir = tmp_path / "run"
    total = 22 * 300
    cmd = [sys.executable, "-m", "agentsynth_kernel", "bench", "--pack", "core", "--policy", "oracle",
           "--trials", "300", "--run-dir", str(run_dir), "-q"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while _stored(run_dir) < 50 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    done = _stored(run_dir)
    assert proc.returncode == 130, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    assert 50 <= done < total  # stopped in the middle, with what finished kept

