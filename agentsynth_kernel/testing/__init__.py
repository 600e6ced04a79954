"""Test helpers for agentsynth and its plugins (public API).

:class:`ScriptedLLMServer` is a real OpenAI-compatible HTTP server on 127.0.0.1
with scripted answers, so LLM code is tested over a real socket with no network
and no API key. For pytest, add ``pytest_plugins = ["agentsynth_kernel.testing.pytest_plugin"]``
to a ``conftest.py`` to get the ``llm_server`` fixture.
"""

from .imports import plugin_load_imports
from .server import (
    LoggedRequest,
    Reply,
    ScriptedLLMServer,
    conversation_handler,
    disconnect,
    echo_handler,
    garbage,
    hang,
    reply,
    status,
    tool_calls,
)

__all__ = [
    "LoggedRequest", "Reply", "ScriptedLLMServer", "conversation_handler", "disconnect", "echo_handler", "garbage",
    "hang", "plugin_load_imports", "reply", "status", "tool_calls",
]
