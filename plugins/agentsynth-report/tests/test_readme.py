"""The README's example, run as written (serve with --port 0 so the test picks a free port)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from conftest import agentsynth, start_server, stop_server

README = Path(__file__).parents[1] / "README.md"


def _commands() -> list[list[str]]:
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S).group(1)
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("agentsynth ")]


def test_readme_example_runs(tmp_path: Path) -> None:
    commands = _commands()
    assert [c[0] for c in commands] == ["bench", "bench", "report", "serve"]
    for args in commands[:-1]:
        done = agentsynth(*args, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
    assert "wrote report.html: 2 run(s), 132 episode(s)" in done.stdout
    html = (tmp_path / "report.html").read_text()
    assert html.startswith("<!doctype html>") and 'id="c1-0"' in html  # the second run's episodes
    serve = commands[-1]
    server = start_server(*(str(tmp_path / a) for a in serve[1:]))
    try:
        names = sorted(r["name"] for r in server.get("/api/runs").json()["runs"])
        assert names == ["oracle", "random"]
    finally:
        stop_server(server)
