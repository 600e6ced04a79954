"""Hook implementations: the ``report`` and ``serve`` commands."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import report, serve

    cli.add_command(report, "report")
    cli.add_command(serve, "serve")
