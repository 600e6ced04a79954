"""Running the real ``agentsynth`` command line in a subprocess (what a user runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent / "agentsynth"


def agentsynth(*args: str, cwd: Path | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([str(BIN), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
