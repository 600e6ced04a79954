"""A generation killed with SIGKILL mid-way leaves only complete items; the rerun finishes the rest."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from test_back_translation import params

from agentsynth_kernel import RunStore
from agentsynth_synth import run_generator


def synth_items(run_dir: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT count(*) FROM events WHERE kind = 'synth_item'").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def test_sigkill_mid_run_leaves_complete_items(llm, pack_dir, tmp_path):
    llm.latency = 0.15  # each item: 4 requests, so several items are in flight when the kill comes
    run_dir = tmp_path / "run"
    n = 8
    p = params(llm, n=n, focus=[f"v{i}" for i in range(n)])
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    child = subprocess.Popen([sys.executable, str(Path(__file__).parent / "synth_child.py"), str(pack_dir),
                              str(run_dir), json.dumps(p)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while synth_items(run_dir) < 2 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    done = synth_items(run_dir)
    assert 2 <= done < n, f"the kill came too late or too early ({done} items done)"
    store = RunStore(run_dir, create=False)
    try:
        events = [d for _, kind, d in store.events() if kind == "synth_item"]
        results = list(store.results())
        assert {r.task_id for r in results} == {i for d in events for i in d["accepted"]}
        for r in results:
            synth = r.trajectory.metadata["synth"]
            assert synth["oracle"][-1] == {"answer": "Done."} and synth["task"]["checkers"]
            assert r.passed and r.verdicts and all(v.passed for v in r.verdicts)
    finally:
        store.close()
    llm.latency = 0.0
    resumed = run_generator("back_translation", pack_dir, p, run_dir=run_dir, cache=False)
    assert resumed.restored_items == done and resumed.done_items == n - done
    assert len(resumed.accepted) == n and len({r.task_id for r in resumed.accepted}) == n
