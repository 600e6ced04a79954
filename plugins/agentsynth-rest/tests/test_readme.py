"""The README's example, line by line, through the real command line."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def example_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"<!-- example:[^>]*-->\s*```bash\n(.*?)```", text, re.DOTALL)
    assert block, "README.md has no example block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_example_runs(tmp_path):
    lines = example_lines()
    assert lines == ["agentsynth bench --pack tickets --policy oracle", "agentsynth bench --pack tickets --policy noop"]
    code = "import sys; from agentsynth_kernel.cli import main; sys.argv[0] = 'agentsynth'; main()"
    for line in lines:
        run = subprocess.run([sys.executable, "-c", code, *shlex.split(line)[1:]], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
        assert run.returncode == 0, (line, run.stdout[-2000:], run.stderr[-2000:])
        expected = "pass@1 100.0%" if "oracle" in line else "pass@1 0.0%"
        assert expected in run.stdout, (line, run.stdout[-1000:])
