"""``agentsynth plugins``."""

from __future__ import annotations

import json

import click

PLURAL = {"policy": "policies"}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--hook", help="Only plugins implementing this hook.")
def plugins(as_json: bool, hook: str | None) -> None:
    """List installed plugins: distribution, version, hooks, what each registers, and broken ones."""
    from ..plugins import get_host

    infos = [p for p in get_host().list_plugins() if hook is None or hook in p.hooks]
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in infos], indent=2))
        return
    for info in infos:
        state = "" if info.loaded and not info.errors else (" [BROKEN]" if not info.loaded else " [WARNINGS]")
        dist = f"{info.distribution} {info.version}".strip()
        click.echo(f"{info.name}{state}  ({dist})" if dist else f"{info.name}{state}")
        for kind, names in sorted(info.registered.items()):
            click.echo(f"  {PLURAL.get(kind, kind + 's')}: {', '.join(names)}")
        others = [h for h in info.hooks if not h.startswith("register_") or h == "register_commands"]
        if others:
            click.echo(f"  hooks: {', '.join(others)}")
        for error in info.errors:
            click.echo(f"  error: {error}")
