"""Hook implementations: the ``python`` environment, its checkers, the ``python-data`` pack, exploits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsynth_kernel import hookimpl

PACKS = Path(__file__).parent / "packs"


@hookimpl
def register_environments(register: Any) -> None:
    from .env import PythonEnvironment, PythonEnvSpec

    register("python", PythonEnvironment, spec_cls=PythonEnvSpec,
             description="A fresh sandboxed Python process per episode (bubblewrap or a Podman / Docker container: no network, limits, own world dir)")


@hookimpl
def register_checkers(register: Any) -> None:
    from .checkers import PythonFile, PythonStdout, PythonValue

    register("python_file", PythonFile,
             description="A world file exists / equals / contains / has a JSON value or CSV cell (never via a link)")
    register("python_value", PythonValue,
             description="A Python expression computed in a FRESH sandbox over the frozen world equals a value")
    register("python_stdout", PythonStdout,
             description="The stdout / exit code of a command run in a FRESH sandbox over the frozen world")


@hookimpl
def register_packs(register: Any) -> None:
    register("python-data", PACKS / "python-data",
             description="8 data-analysis and file-manipulation tasks over seeded CSV / JSON files and a buggy script")


@hookimpl
def adversarial_exploits(environment: str) -> list[Any] | None:
    if environment != "python":
        return None
    from .exploits import python_exploits

    return python_exploits()


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import python

    if "python" not in cli.commands:
        cli.add_command(python, "python")
