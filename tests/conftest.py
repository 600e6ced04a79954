"""Shared fixtures for the kernel's tests.

Plugins under test are registered on a fresh PluginHost with ``add_plugin`` and
forgotten afterwards (``reset_plugins``), so no test leaks into another.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel import plugins as plugin_module  # noqa: E402
from agentsynth_kernel.cli import main  # noqa: E402


@pytest.fixture
def host():
    """A freshly loaded plugin host (entry points included); discarded after the test."""
    plugin_module.reset_plugins()
    yield plugin_module.get_host()
    plugin_module.reset_plugins()


@pytest.fixture
def write(tmp_path: Path):
    """write("spec.yaml", text) -> Path: a dedented file in the test's tmp dir."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def cli(host, capsys, monkeypatch, tmp_path):
    """Run the agentsynth CLI in-process from the tmp dir: cli("run", "spec.yaml") -> (code, out, err)."""
    monkeypatch.chdir(tmp_path)

    def _cli(*args: str) -> tuple[int, str, str]:
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return int(code or 0), out, err

    return _cli


def run_agentsynth(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120):
    """The real command in a subprocess (``python -m agentsynth_kernel``)."""
    full_env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=full_env,
        capture_output=True, text=True, timeout=timeout,
    )


KV_SPEC = """
environment: {type: kv, initial: {a: "1"}}
oracle: oracle.py
tasks:
  - id: set-b
    instruction: Set b to 2
    tier: 1
    checkers: [{type: kv_equals, key: b, value: "2"}]
  - id: del-a
    instruction: Delete a
    tier: 2
    split: train
    checkers: [{type: kv_equals, key: a, value: null}]
policy: {type: oracle}
"""

KV_ORACLE = """
from agentsynth_kernel import ToolCall, Answer

ORACLE = {
    "set-b": [{"tool": "set", "arguments": {"key": "b", "value": "2"}}, {"answer": "done"}],
    "del-a": [ToolCall("delete", {"key": "a"}), Answer("deleted")],
}
"""


@pytest.fixture
def kv_spec(write) -> Path:
    """A two-task inline spec on the kv testworld env with an oracle that solves both."""
    write("oracle.py", KV_ORACLE)
    return write("spec.yaml", KV_SPEC)
