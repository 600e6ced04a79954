"""Running the ``agentsynth`` command line: in this process (fast; the same entry point and error
handling as the console script), or as a real subprocess where a test is about separate processes."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent / "agentsynth"


def agentsynth(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``agentsynth ARGS`` through the console entry point (``agentsynth_kernel.cli:main``), in-process."""
    from agentsynth_kernel.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args)) or 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(["agentsynth", *args], int(code), out.getvalue(), err.getvalue())


def agentsynth_process(*args: str, cwd: Path | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """``agentsynth ARGS`` as a separate process."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([str(BIN), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
