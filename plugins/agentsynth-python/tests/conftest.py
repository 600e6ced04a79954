from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentsynth_kernel import Observation, ToolCall
from agentsynth_python import PythonEnvironment
from agentsynth_python.sandbox import probe

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

needs_bwrap = pytest.mark.skipif(bool(probe()), reason=f"no bwrap sandbox here: {probe()}")


def run(env: PythonEnvironment, code: str) -> Observation:
    return env.step(ToolCall("python_exec", {"code": code}))


def shell(env: PythonEnvironment, command: str) -> Observation:
    return env.step(ToolCall("shell", {"command": command}))


def world_factory(**defaults: Any) -> Iterator[Callable[..., PythonEnvironment]]:
    """A ``make_env`` fixture's body: ``make(**params)`` builds and resets a world with ``defaults``
    under ``params``; every world made is closed at the end."""
    made: list[PythonEnvironment] = []

    def make(**params: Any) -> PythonEnvironment:
        env = PythonEnvironment(**defaults, **params)
        env.reset(0)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


@functools.cache
def container_problem() -> str:
    """'' when the container backend runs here (a runtime, the default image, a real container
    started), else what is missing: the skip reason of every container test."""
    from agentsynth_python.container import ContainerError, ContainerSpec
    from agentsynth_python.container import probe as probe_container

    try:
        probe_container(ContainerSpec())
    except ContainerError as exc:
        return str(exc)
    return ""


needs_container = pytest.mark.skipif(bool(container_problem()),
                                     reason=f"no container runtime: {container_problem()}")
FULL = os.environ.get("AGENTSYNTH_PYTHON_CONTAINER_FULL") == "1"
needs_container_full = pytest.mark.skipif(
    not FULL or bool(container_problem()),
    reason=(f"no container runtime: {container_problem()}" if container_problem() else
            "the pack and the exploit kit on the container backend take minutes: set AGENTSYNTH_PYTHON_CONTAINER_FULL=1"))

BACKENDS = [pytest.param("bwrap", marks=needs_bwrap), pytest.param("container", marks=needs_container)]


def container_pack(where):
    """A copy of the python-data pack whose world runs on the container backend (same tasks,
    oracle and checks): ``pack validate`` and the exploit kit then run against containers."""
    import shutil

    from agentsynth_kernel import load_pack

    pack_dir = where / "python-data-container"
    shutil.copytree(load_pack("python-data").base_dir, pack_dir)
    text = (pack_dir / "pack.yaml").read_text()
    assert "  type: python\n" in text
    (pack_dir / "pack.yaml").write_text(text.replace("  type: python\n", "  type: python\n  isolation: container\n", 1))
    return pack_dir
