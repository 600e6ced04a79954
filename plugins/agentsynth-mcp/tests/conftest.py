from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_helpers import TOY, free_port, wait_port

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def toy() -> Path:
    return TOY


@pytest.fixture(scope="module")
def running_http_server():
    """A toy server already running on 127.0.0.1 (streamable HTTP), for `url:`-only environments."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(TOY), "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
