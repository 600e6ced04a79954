"""Fixtures: a fresh plugin host per test, a tiny world (a counter) for policy episodes, and a real
OpenAI-compatible server on 127.0.0.1 (the kernel's scripted one, or the embedded model)."""

from __future__ import annotations

import importlib.util
import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel import Observation, ToolCall, ToolSpec, get_host, hookimpl, reset_plugins  # noqa: E402  # noqa: E402

HAS_RUNTIME = importlib.util.find_spec("llama_cpp") is not None
needs_runtime = pytest.mark.skipif(not HAS_RUNTIME, reason="llama-cpp-python is not installed (pip install llama-cpp-python)")


class Counter:
    """A world with one number: ``add(n)`` adds to it, ``read()`` shows it."""

    def reset(self, seed: int) -> Observation:
        self.value = 0
        return Observation("The counter is 0.")

    def tools(self) -> list[ToolSpec]:
        return [
            ToolSpec("add", "Add n to the counter", {"type": "object", "properties": {"n": {"type": "integer"}},
                                                     "required": ["n"]}),
            ToolSpec("read", "Read the counter", {"type": "object", "properties": {}}),
        ]

    def step(self, call: ToolCall) -> Observation:
        if call.name == "add":
            self.value += int(call.arguments["n"])
        return Observation(f"counter = {self.value}")

    def close(self) -> None:
        pass


class CounterWorld:
    @hookimpl
    def register_environments(self, register):
        register("counter", Counter, description="a counter")

    @hookimpl
    def register_checkers(self, register):
        class AtLeast:
            def __init__(self, value: int = 1):
                self.value = value

            def check(self, env, trajectory):
                from agentsynth_kernel import Verdict

                return Verdict("counter_at_least", env.value >= self.value, detail=f"counter {env.value}")

        register("counter_at_least", AtLeast)


@pytest.fixture
def host(monkeypatch, tmp_path):
    """A fresh host with the counter world; the LLM cache in the test's tmp dir."""
    monkeypatch.setenv("AGENTSYNTH_LLM_CACHE", str(tmp_path / "llm-cache"))
    reset_plugins()
    host = get_host()
    host.add_plugin(CounterWorld(), "counter-world")
    yield host
    reset_plugins()


@pytest.fixture
def write(tmp_path):
    import textwrap

    def _write(name: str, text: str):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    return _write
