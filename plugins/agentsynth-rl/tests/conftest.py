"""A small real world for this plugin's tests: a key-value store with ``get`` / ``put`` tools and
checkers that read its end state. Registered on a fresh host per test (the kernel's add_plugin),
so the default test session needs no other plugin; tests over the SQL ``core`` and ``support``
packs skip unless agentsynth-sql is installed (``test-with`` in pyproject.toml: it is).

The ``export`` tests (fresh venvs, minutes) run only where asked: ``-m export`` (``nox -s
rl-export``) or with trl installed (``nox -s rl-train``), not in ``plugin(agentsynth-rl)``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentsynth_kernel import (
    Observation,
    ToolCall,
    ToolSpec,
    Verdict,
    get_host,
    hookimpl,
    load_pack,
    reset_plugins,
)


class KvWorld:
    """A dict per episode; sync on purpose (the kernel runs it on the episode's worker thread)."""

    def __init__(self, initial: dict | None = None) -> None:
        self.initial = dict(initial or {})
        self.data: dict[str, str] = {}

    def reset(self, seed: int) -> Observation:
        self.data = dict(self.initial)
        self.seed = seed
        return Observation(f"store ready ({len(self.data)} keys)")

    def tools(self) -> list[ToolSpec]:
        key = {"type": "string", "description": "The key."}
        return [
            ToolSpec("get", "Read a key.", {"type": "object", "properties": {"key": key}, "required": ["key"]}),
            ToolSpec("put", "Write a key.", {"type": "object", "properties": {
                "key": key, "value": {"type": "string", "description": "The value."}}, "required": ["key", "value"]}),
            ToolSpec("boom", "Crash the world.", {"type": "object", "properties": {}}),
        ]

    def step(self, call: ToolCall) -> Observation:
        if call.name == "boom":
            raise RuntimeError("the world crashed")
        key = call.arguments.get("key")
        if not isinstance(key, str):
            return Observation("error: 'key' must be a string", error=True)
        if call.name == "get":
            return Observation(self.data.get(key, "(missing)"))
        value = call.arguments.get("value")
        if not isinstance(value, str):
            return Observation("error: 'value' must be a string", error=True)
        self.data[key] = value
        return Observation(f"{key} = {value}")

    def close(self) -> None:
        self.data = {}


class KvEquals:
    def __init__(self, key: str, value: str) -> None:
        self.key, self.value = key, value

    def check(self, env: KvWorld, trajectory) -> Verdict:
        got = env.data.get(self.key)
        return Verdict("kv_equals", got == self.value, float(got == self.value), f"{self.key}={got!r}")


class KvUnchanged:
    def check(self, env: KvWorld, trajectory) -> Verdict:
        same = env.data == env.initial
        return Verdict("kv_unchanged", same, float(same), "unchanged" if same else "changed")


class PutBPolicy:
    """A scripted agent: put b=2, then answer (the engine's path, for comparing with the gym's)."""

    def act(self, state):
        from agentsynth_kernel import Answer, ToolCall

        return ToolCall("put", {"key": "b", "value": "2"}) if not state.trajectory.steps else Answer("done")


class HalfJudge:
    """A judge that gives every trajectory 0.5 (to test the documented blend)."""

    def score(self, trajectory, verdicts):
        from agentsynth_kernel import JudgeResult

        return JudgeResult(0.5, {"style": 0.5})


class KvPlugin:
    @hookimpl
    def register_policies(self, register):
        register("put_b", PutBPolicy)

    @hookimpl
    def register_judges(self, register):
        register("half", HalfJudge)

    @hookimpl
    def register_environments(self, register):
        register("kv", KvWorld, description="test key-value world")

    @hookimpl
    def register_checkers(self, register):
        register("kv_equals", KvEquals)
        register("kv_unchanged", KvUnchanged)


PACK = """
id: kvpack
system_prompt: You manage a key-value store.
environment: {type: kv, initial: {a: "1"}}
tasks:
  - id: set-b
    instruction: Set b to 2.
    split: train
    checkers: [{type: kv_equals, key: b, value: "2"}]
  - id: set-c
    instruction: Set c to 3.
    split: train
    checkers: [{type: kv_equals, key: c, value: "3"}]
  - id: leave-alone
    instruction: Change nothing, just say hello.
    split: train
    checkers: [kv_unchanged]
  - id: held-out
    instruction: Set d to 4.
    split: test
    checkers: [{type: kv_equals, key: d, value: "4"}]
  - id: two-checks
    instruction: Set b to 2 and leave a alone.
    split: test
    checkers: [{type: kv_equals, key: b, value: "2"}, {type: kv_equals, key: a, value: "9"}]
"""


def pytest_collection_modifyitems(config, items):
    import importlib.util

    if "export" in (config.getoption("-m") or "") or importlib.util.find_spec("trl") is not None:
        return
    skip = pytest.mark.skip(reason="installs exported packages in fresh venvs: nox -s rl-export (or rl-train)")
    for item in items:
        if item.get_closest_marker("export") is not None:
            item.add_marker(skip)


@pytest.fixture
def host():
    reset_plugins()
    host = get_host()
    host.add_plugin(KvPlugin(), "kv-tests")
    yield host
    reset_plugins()


@pytest.fixture
def pack(host, tmp_path: Path):
    (tmp_path / "kvpack").mkdir()
    (tmp_path / "kvpack" / "pack.yaml").write_text(textwrap.dedent(PACK).lstrip())
    return load_pack(tmp_path / "kvpack", host=host)


@pytest.fixture
def core(host):
    pytest.importorskip("agentsynth_sql")
    return load_pack("core", host=host)
