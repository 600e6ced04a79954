"""The README's quickstart runs as written: one real episode of core on the embedded model.

In the real-model session (``nox -s real-llm``): one episode of up to 8 model turns took 30-130 s
on the shared 2-core machine, too long for the default session (which has real-model episodes on a
counter world and a real ``bench --pack core`` interrupted mid-episode instead)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import needs_runtime

pytestmark = [
    pytest.mark.real_llm,
    pytest.mark.skipif(os.environ.get("AGENTSYNTH_REAL_LLM") != "1", reason="the real-model suite: nox -s real-llm"),
]

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def quickstart() -> list[str]:
    block = re.findall(r"```bash\n(.*?)```", README, re.S)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("agentsynth ")]


@needs_runtime
def test_the_quickstart_runs_a_real_episode(tmp_path):
    [command] = quickstart()
    assert "model=local" in command
    res = subprocess.run([sys.executable, "-m", "agentsynth_kernel", *shlex.split(command)[1:]], cwd=tmp_path,
                         capture_output=True, text=True, timeout=900,
                         env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LLM_CACHE": "off"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert "agentsynth-local: starting SmolLM2-135M-Instruct.Q4_1" in res.stderr and "stopped SmolLM2" in res.stderr
    assert re.search(r"pass@1 \d+\.\d% .* over 1 episodes", res.stdout), res.stdout[-2000:]
    assert "lookup-customer-email" in res.stdout and "errors" in res.stdout
