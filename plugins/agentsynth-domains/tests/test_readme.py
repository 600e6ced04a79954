"""The README's examples run as written (against the demo stand-in on a free port)."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentsynth_domains.demo import demo_handler
from agentsynth_domains.settings import parse_settings
from agentsynth_kernel.testing import ScriptedLLMServer

HERE = Path(__file__).resolve().parent.parent
README = (HERE / "README.md").read_text(encoding="utf-8")


def blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, re.DOTALL)


def test_the_readme_shows_the_example_spec_verbatim():
    assert (HERE / "examples" / "math-scripted.yaml").read_text(encoding="utf-8") in blocks("yaml")


@pytest.mark.parametrize("name", ["math-local.yaml", "docs-qa.yaml", "math-metaopt.yaml", "math-scripted.yaml"])
def test_example_specs_are_valid(name, tmp_path):
    data = yaml.safe_load((HERE / "examples" / name).read_text(encoding="utf-8"))
    settings = parse_settings({k: v for k, v in data["generate"].items() if k != "type"}, source=name, base_dir=tmp_path)
    assert settings.domain in ("math", "docs_qa")


def test_the_reference_spec_block_is_valid(tmp_path):
    spec = next(b for b in blocks("yaml") if "acceptance: rubric" in b)
    data = yaml.safe_load(spec)
    settings = parse_settings({k: v for k, v in data["generate"].items() if k != "type"}, source="README",
                              base_dir=tmp_path)
    assert settings.reflector is None and settings.judge.model == "openai/gpt-4o"


def run(cmd, cwd):
    # the README's commands with `agentsynth` as this interpreter's module
    args = cmd.split()
    assert args[0] == "agentsynth"
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args[1:]], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_the_demo_commands_run(tmp_path):
    commands = [line.strip() for b in blocks("bash") for line in b.splitlines()
                if line.strip().startswith(("agentsynth run examples/math-scripted", "agentsynth status",
                                            "agentsynth init-domain", "agentsynth metaopt examples"))]
    assert len(commands) == 4
    shutil.copytree(HERE / "examples", tmp_path / "examples")
    with ScriptedLLMServer(handler=demo_handler) as server:
        for spec in (tmp_path / "examples").glob("*.yaml"):
            spec.write_text(spec.read_text().replace("127.0.0.1:8765", f"127.0.0.1:{server.port}"))
        outputs = {}
        for cmd in commands:
            result = run(cmd, tmp_path)
            assert result.returncode == 0, f"{cmd}: {result.stderr}"
            outputs[cmd.split()[1]] = result.stdout
    claim = re.search(r"It prints `(.*?)`\s+and writes", " ".join(README.split())).group(1)
    assert claim in " ".join(outputs["run"].split())
    assert (tmp_path / "examples" / "math-demo.jsonl").exists()
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["accepted"] == 4 and report["llm_requests_per_accepted"] == 10
    assert "items: 4 of 4 done · accepted 4" in outputs["status"]
    assert (tmp_path / "capitals.py").exists()
    assert "best h0" in outputs["metaopt"] and (tmp_path / "runs" / "math-metaopt" / "lineage.jsonl").exists()
