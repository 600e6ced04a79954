"""The README's example, run as a bash script (on a free port), with its printed outcomes checked."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def example_block() -> str:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- example:[^>]*-->\s*```bash\n(.*?)```", text, re.DOTALL)
    assert block, "README.md has no example block"
    return block.group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_readme_example_runs(tmp_path):
    script = example_block()
    assert "agentsynth hub submit runs/oracle" in script and "kill %1" in script
    script = script.replace("8765", str(free_port()))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "COLUMNS": "200"}
    env.pop("AGENTSYNTH_HUB_TOKEN", None)
    run = subprocess.run(["bash", "-e", "-c", "trap 'kill %1 2>/dev/null || true' EXIT\n" + script], cwd=tmp_path,
                         capture_output=True, text=True, timeout=240, env=env)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    out = run.stdout
    assert "accepted as submission #1: rank 1, pass rate 100.0% (95% CI 85.1%-100.0%), 22 episode(s) replayed" in out
    assert "accepted as submission #2: rank 2, pass rate 0.0% (95% CI 0.0%-14.9%), 22 episode(s) replayed" in out
    assert "refused: duplicate: run" in run.stderr and "exit 1" in out
    assert re.findall(r'"rank": (\d+)', out) == ["1", "2"]
    # the token was only ever in the environment: the hub's database holds its hash, no file its value
    token_lines = [line for line in run.stderr.splitlines() if line.startswith("ash_")]
    assert token_lines == []
    db = (tmp_path / "hub.sqlite").read_bytes()
    assert b"ash_" not in db
