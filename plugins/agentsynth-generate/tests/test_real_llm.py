"""The embedded real model (agentsynth-local) end to end: `nox -s real-llm` with this plugin installed, or
AGENTSYNTH_REAL_LLM=1 in a venv with agentsynth-local. Minutes of CPU: skipped otherwise."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import agentsynth_process

PLUGIN = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.real_llm,
    pytest.mark.skipif(os.environ.get("AGENTSYNTH_REAL_LLM") != "1" or importlib.util.find_spec("agentsynth_local") is None,
                       reason="the real-model suite: AGENTSYNTH_REAL_LLM=1 and agentsynth-local installed"),
]


def test_generate_with_the_embedded_model_is_reproducible(tmp_path: Path) -> None:
    """Two processes, same inputs and seed, no cache: the embedded model (seeded, llama.cpp) gives the same
    bytes, accepted and rejected alike, and every item is decided (none fails for infrastructure)."""
    shutil.copytree(PLUGIN / "examples", tmp_path / "examples")
    outputs = []
    for run in ("a", "b"):
        proc = agentsynth_process("generate", "--tools", "examples/weather_tools.json", "-q", "What is the weather in Lisbon?",
                                  "-m", "back", "-m", "single_agent", "-n", "2", "--seed", "1", "--model", "local",
                                  "--no-cache", "-o", f"{run}.jsonl", "--rejected", f"{run}-rejected.jsonl",
                                  "--json", f"{run}.json", cwd=tmp_path, timeout=3600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads((tmp_path / f"{run}.json").read_text())
        assert report["planned"] == 4 and report["incomplete"] == 0, report
        outputs.append(((tmp_path / f"{run}.jsonl").read_bytes(), (tmp_path / f"{run}-rejected.jsonl").read_bytes()))
    assert outputs[0] == outputs[1]
