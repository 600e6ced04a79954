"""Hook implementations: the ``hub`` command group."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import hub

    cli.add_command(hub, "hub")


@hookimpl
def submit_run(run_dir, url):
    from .remote import submit_run as impl

    return impl(run_dir, url)


@hookimpl
def resolve_remote_pack(ref, hub):
    from .remote import resolve_remote_pack as impl

    return impl(ref, hub)
