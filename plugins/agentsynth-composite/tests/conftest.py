from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsynth_kernel import get_host

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).parent))

import worlds  # noqa: E402

TEST_PLUGIN = "composite-testworlds"


@pytest.fixture(autouse=True, scope="session")
def test_worlds() -> Iterator[None]:
    """The throw-away test worlds, registered through the real plugin host."""
    host = get_host()
    host.add_plugin(worlds, TEST_PLUGIN)
    assert host.plugins[TEST_PLUGIN].loaded, host.plugins[TEST_PLUGIN].errors
    yield
    host.remove_plugin(TEST_PLUGIN)


@pytest.fixture(autouse=True)
def clear_events() -> None:
    worlds.EVENTS.clear()


def has_sandbox() -> bool:
    return shutil.which("bwrap") is not None
