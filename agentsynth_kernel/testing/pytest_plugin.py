"""pytest fixtures: ``pytest_plugins = ["agentsynth_kernel.testing.pytest_plugin"]`` in a conftest.py.

``llm_server``: a started :class:`ScriptedLLMServer` (empty script, no latency); add replies
with ``llm_server.add(...)`` or set ``llm_server.handler``. ``llm_client``: an
:class:`~agentsynth_kernel.llm.LLMClient` pointed at it, without cache, with fast retries.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .server import ScriptedLLMServer


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture
def llm_client(llm_server: ScriptedLLMServer) -> object:
    """A plain fixture (works with any pytest-asyncio mode); its pool closes with the test's loop."""
    from ..llm import LLMClient

    return LLMClient(model="openai/scripted-model", api_base=llm_server.base_url, api_key="test-key",
                     cache=False, backoff_base=0.001, backoff_max=0.01, timeout=5.0)
