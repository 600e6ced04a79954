"""Hook implementations: the ``hub`` command group."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import hub

    cli.add_command(hub, "hub")
