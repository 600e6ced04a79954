from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

WORLD = Path(__file__).parent / "world"
TICKETS = Path(__file__).parents[1] / "agentsynth_rest" / "packs" / "tickets"


def rest_env(**params):
    from agentsynth_rest.env import RestEnvironment

    params.setdefault("base_dir", WORLD)
    return RestEnvironment(**params)


class External:
    """The hostile app as an EXTERNAL API: a real uvicorn process of its own, not started by the world."""

    def __init__(self) -> None:
        self.world = Path(tempfile.mkdtemp(prefix="rest-external-"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentsynth_rest.serve", "--app", "hostile.py:create_app", "--base-dir", str(WORLD),
             "--world", str(self.world), "--seed", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening "), (line, self.proc.stderr.read() if self.proc.stderr else b"")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def external() -> Iterator[External]:
    ext = External()
    yield ext
    ext.stop()
