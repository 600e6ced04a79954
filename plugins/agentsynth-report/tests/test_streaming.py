"""The report reads a run store once, streaming, and names a damaged episode instead of crashing."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from agentsynth_report.synthetic import write_run
from conftest import agentsynth

PEAK = """
import json, sys, tracemalloc
from pathlib import Path
from agentsynth_report.html import build_report
from agentsynth_report.synthetic import write_run
run = write_run(Path(sys.argv[1]), tasks=int(sys.argv[2]), trials=5, seed=2)
tracemalloc.start()
info = build_report([run], Path(sys.argv[1] + ".html"))
print(json.dumps({"peak": tracemalloc.get_traced_memory()[1], **info}))
"""


def _peak(tmp_path: Path, name: str, tasks: int) -> tuple[int, dict]:
    """Peak traced memory of one report build, in a fresh interpreter (nothing else allocating)."""
    done = subprocess.run([sys.executable, "-c", PEAK, str(tmp_path / name), str(tasks)], capture_output=True,
                          text=True, timeout=300, check=True)
    info = json.loads(done.stdout)
    return info["peak"], info


def test_memory_does_not_grow_with_the_run(tmp_path: Path) -> None:
    small, small_info = _peak(tmp_path, "small", 100)
    large, info = _peak(tmp_path, "large", 500)
    assert info["episodes"] == 2500 and info["episode_json_bytes"] > 8_000_000
    # five times the episodes: holding them would take five times the memory; streaming takes the
    # store's batch, one chunk, and one compact row per episode (for the tables and the grid)
    assert large < 2 * small, (small, large)
    assert large - small < (info["episode_json_bytes"] - small_info["episode_json_bytes"]) / 3
    html = (tmp_path / "large.html").read_text()
    assert len(re.findall(r'<script type="application/gzip\+json" id="c0-\d+">', html)) == 25
    assert info["bytes"] < info["episode_json_bytes"] / 3  # compressed, and shared prompts/tools stored once


def test_a_damaged_episode_is_named(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", tasks=3, trials=2, seed=2)
    db = sqlite3.connect(run / "run.sqlite")
    db.execute("UPDATE episodes SET result = '{\"task_id\": 5' WHERE task_id = 'task-0001' AND trial = 1")
    db.commit()
    db.close()
    done = agentsynth("report", str(run), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2
    assert "episode ('task-0001', trial 1) is corrupt" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.html").exists()
    assert not list(tmp_path.glob(".agentsynth-report-*"))  # no temporary file left behind
