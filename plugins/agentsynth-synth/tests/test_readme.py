"""The README's acceptance demo runs as written (the stand-in on a free port, the real sql core pack)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from agentsynth_kernel.testing import ScriptedLLMServer
from agentsynth_synth import make_generator
from agentsynth_synth.demo import demo_handler

HERE = Path(__file__).resolve().parent.parent
README = (HERE / "README.md").read_text(encoding="utf-8")
EXAMPLE = HERE / "examples" / "challenger-verifiable.yaml"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.DOTALL)


def agentsynth(line: str, cwd: Path) -> subprocess.CompletedProcess:
    args = line.split()
    assert args[0] == "agentsynth"
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args[1:]], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_the_readme_shows_the_example_config_verbatim():
    assert EXAMPLE.read_text(encoding="utf-8") in blocks("yaml")


def test_the_settings_block_is_valid():
    block = next(b for b in blocks("yaml") if b.startswith("acceptance: verifiable"))
    gen = make_generator("challenger", {"model": "openai/x", "strong": [{"type": "noop"}], "weak": [{"type": "noop"}],
                                        **yaml.safe_load(block)})
    assert gen.acceptance.mode == "verifiable" and gen.acceptance.reflector.model == "openai/x"
    assert gen.spec.rounds == 3 and gen.acceptance.thresholds.strong_correct_min == 3


def test_the_demo_server_starts():
    proc = subprocess.Popen([sys.executable, "-m", "agentsynth_synth.demo", "--port", "0"], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().startswith("listening on http://127.0.0.1:")
    finally:
        proc.kill()
        proc.wait(10)


def test_the_demo_commands_run(tmp_path):
    commands = [line.strip() for b in blocks("bash") for line in b.splitlines()
                if line.strip().startswith(("agentsynth synth core --config examples/challenger-verifiable",
                                            "agentsynth status runs/ch-verifiable"))]
    assert len(commands) == 2
    shutil.copytree(HERE / "examples", tmp_path / "examples")
    with ScriptedLLMServer(handler=demo_handler) as server:
        spec = tmp_path / "examples" / EXAMPLE.name
        spec.write_text(spec.read_text().replace("127.0.0.1:8766", f"127.0.0.1:{server.port}"))
        outputs = [agentsynth(cmd, tmp_path) for cmd in commands]
    for cmd, result in zip(commands, outputs, strict=True):
        assert result.returncode == 0, f"{cmd}: {result.stdout}\n{result.stderr}"
    claim = re.search(r"It prints `(.*?)`\s+and `(.*?)`", " ".join(README.split()))
    assert claim.group(1) in outputs[0].stdout and claim.group(2) in outputs[0].stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["accepted"] == 4 and report["llm_requests_per_accepted"] == 14.0 and not report["rejected"]
    assert "items: 4 of 4 done · accepted 4" in outputs[1].stdout
    written = yaml.safe_load((tmp_path / "core-hard" / "pack.yaml").read_text())
    assert [t["checkers"][0]["expect"] for t in written["tasks"]] == [5900, 4200, 19900, 3500]
    from agentsynth_kernel import RunStore

    store = RunStore(tmp_path / "runs" / "ch-verifiable", create=False)
    try:
        records = {r.task_id: r.trajectory.metadata["synth"] for r in store.results()}
    finally:
        store.close()
    assert [h["reason"] for h in records["ch-0001"]["history"]] == ["noop_passes", "accepted"]
    assert records["ch-0001"]["history"][0]["reflection"].startswith("Ask for a change")
    for synth in records.values():  # the real SQLite world decided every attempt
        assert [a["passed"] for a in synth["attempts"]] == [False] * 4 + [True] * 4
        assert synth["rationale"].startswith("verifiable: weak solved 0 of 4")
