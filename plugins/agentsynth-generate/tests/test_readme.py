"""The README's example runs as written (against its scripted stand-in teacher on a free port)."""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from helpers import agentsynth

PLUGIN = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    text = (PLUGIN / "README.md").read_text()
    block = text.split("<!-- example:start -->")[1].split("<!-- example:end -->")[0]
    body = block.split("```bash")[1].split("```")[0].replace("\\\n", " ")
    return [line.strip() for line in body.splitlines() if line.strip()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readme_example(tmp_path: Path) -> None:
    shutil.copytree(PLUGIN / "examples", tmp_path / "examples")
    commands = _commands()
    assert commands[0] == "cd plugins/agentsynth-generate" and commands[1].startswith("python examples/scripted_teacher.py")
    port = str(_free_port())
    server = subprocess.Popen([sys.executable, "examples/scripted_teacher.py", "--port", port], cwd=tmp_path,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "listening on" in server.stdout.readline()
        for command in commands[2:]:
            args = shlex.split(command.replace("8765", port))
            assert args[0] == "agentsynth"
            proc = agentsynth(*args[1:], cwd=tmp_path)
            assert proc.returncode == 0, (command, proc.stderr)
    finally:
        server.terminate()
        server.wait(timeout=10)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["planned"] == 4 and report["accepted"] == 4, report
    assert report["metrics"]["modes"] == {"back": 1, "code_execution": 1, "multi_agent": 1, "single_agent": 1}
    rows = [json.loads(x) for x in (tmp_path / "weather.jsonl").read_text().splitlines()]
    assert {r["id"] for r in rows} == {"lisbon-0-single_agent", "lisbon-1-back", "oslo-0-multi_agent",
                                       "oslo-1-code_execution"}
    back = [json.loads(x) for x in (tmp_path / "back.jsonl").read_text().splitlines()]
    assert len(back) == 4 and all(r["mode"] == "back" and r["query"].startswith("Can you ") for r in back)
    code = next(r for r in rows if r["mode"] == "code_execution")
    assert "Oslo: 48 hours booked" in code["messages"][3]["content"]  # printed by the real sandbox
