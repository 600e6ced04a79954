"""The README's commands and run spec work as written (with every plugin installed)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, f"README has no section {title!r}"
    return match.group(1)


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def agentsynth(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LLM_CACHE": "off"}
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_run_spec_example_runs(tmp_path):
    (spec_text,) = code_blocks(section("A run spec"), "yaml")
    (tmp_path / "spec.yaml").write_text(spec_text)
    result = agentsynth(["run", "spec.yaml", "--json", "report.json", "-q"], tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["trials"] == 3 and report["counts"]["passed"] == report["episodes"] > 0
    assert all("judge" in r["scores"] for r in report["results"])
    lines = (tmp_path / "out" / "sft.jsonl").read_text().splitlines()
    assert len(lines) == report["episodes"] and "messages" in json.loads(lines[0])


@pytest.mark.parametrize(
    "command",
    [line for line in code_blocks(section("Quickstart"), "bash")[0].splitlines()
     if line.startswith("agentsynth ") and "spec.yaml" not in line],
)
def test_quickstart_commands_run(tmp_path, command):
    args = shlex.split(command.split("#")[0])[1:]
    result = agentsynth(args, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pass" in result.stdout


def test_python_api_examples_run_as_written(tmp_path):
    """Every Python block of "From Python" runs, in order, in a fresh interpreter."""
    blocks = code_blocks(section("From Python"), "python")
    assert len(blocks) == 2
    for i, block in enumerate(blocks):
        script = tmp_path / f"example_{i}.py"
        script.write_text(block)
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LLM_CACHE": "off"}
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, f"block {i}:\n{block}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip().splitlines()[-1] == "True True"  # perturb_task found a sibling both ways
