"""The README's learned-verifier example works as written: each command of its block, in order (the
``agentsynth`` lines through the real command line, in this process; ``printf`` lines write files)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from conftest import run_cli

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def test_the_learned_verifier_example_runs(tmp_path, monkeypatch, capsys):
    block = re.findall(r"```bash\n(.*?)```", section("Learned verifier and confidence routing"), re.S)[0]
    monkeypatch.chdir(tmp_path)
    ran = []
    for line in block.splitlines():
        words = shlex.split(line.split("  #")[0])
        if not words or words[0] == "pip":
            continue
        if words[0] == "printf":
            assert words[2] == ">", line
            Path(words[3]).write_text(words[1].encode().decode("unicode_escape"), encoding="utf-8")
            continue
        assert words[0] == "agentsynth", line
        assert run_cli(*words[1:]) == 0, line
        ran.append(words[1:3])
    assert ["judge", "train"] in ran and ["judge", "route"] in ran
    out = capsys.readouterr().out
    assert "held out: agreement" in out and "feature version 1" in out
    rows = [json.loads(line) for line in (tmp_path / "routed.jsonl").read_text().splitlines()]
    assert len(rows) == 44  # 22 tasks x 2 trials of the new run
    m = re.search(r"auto-accepted (\d+)\s+auto-dropped (\d+)\s+judged (\d+)", out)
    assert m and sum(map(int, m.groups())) == len(rows)
    assert all(r["world"] == "failed" for r in rows) and not any(r["passed"] for r in rows)
