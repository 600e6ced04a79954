"""Hook implementations: the ``agentsynth rl`` command group and ``agentsynth pack export``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentsynth_kernel import hookimpl


def _export_command() -> click.Command:
    @click.command("export")
    @click.argument("pack")
    @click.option("--format", "fmt", required=True, metavar="verifiers|openenv",
                  help="verifiers: a verifiers 0.4+ environment package; openenv: the OpenEnv server layout.")
    @click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="Directory to write the package into (empty or absent).")
    @click.option("--name", default=None, help="Distribution name (default agentsynth-env-PACK / agentsynth-openenv-PACK).")
    @click.option("--split", default="train", show_default=True, type=click.Choice(["train", "test", "all"]),
                  help="The split the package serves by default (test only when asked).")
    @click.option("--require", "require", multiple=True, metavar="DIST",
                  help="Extra requirement of the package (repeatable), e.g. a plugin installed without a distribution.")
    @click.option("--force", is_flag=True, help="Write into a non-empty --out (replacing an earlier export).")
    def export(pack: str, fmt: str, out: Path, name: str | None, split: str, require: tuple[str, ...],
               force: bool) -> None:
        """Write PACK as an installable verifiers or OpenEnv package that depends on agentsynth
        and the pack's plugins; rewards are the pack's checkers' verdicts."""
        from .export import FORMATS, ExportError, export_pack

        if fmt not in FORMATS:
            raise click.UsageError(f"--format: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
        try:
            done = export_pack(pack, fmt, out, name=name, split=split, force=force, require=require)
        except (ExportError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"wrote {done.format} package {done.distribution} ({done.split} split of pack {done.pack_id!r}) "
                   f"to {done.out}: {len(done.files)} files; requires {', '.join(done.requires)}")

    return export


@hookimpl
def register_commands(cli: Any) -> None:
    # `agentsynth pack export`: the kernel owns the pack group, this plugin adds a command to it
    pack_group = cli.commands.get("pack") or cli.get_command(None, "pack")
    if isinstance(pack_group, click.Group) and "export" not in pack_group.commands:
        pack_group.add_command(_export_command(), "export")

    @cli.group()
    def rl() -> None:
        """Use a pack as an RL environment (OpenEnv server, TRL, Gymnasium)."""

    @rl.command()
    @click.argument("pack")
    @click.option("--host", "bind", default="127.0.0.1", show_default=True, help="Address to listen on.")
    @click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
    @click.option("--split", default="train", show_default=True, type=click.Choice(["train", "test", "all"]),
                  help="Which tasks sessions may reset to (test only when asked).")
    @click.option("--max-steps", default=30, show_default=True, type=click.IntRange(1, 100_000))
    @click.option("--reward", default="pass", show_default=True, type=click.Choice(["pass", "score"]))
    @click.option("--max-sessions", default=64, show_default=True, type=click.IntRange(1, 4096),
                  help="Concurrent WebSocket sessions (one world each).")
    def serve(pack: str, bind: str, port: int, split: str, max_steps: int, reward: str, max_sessions: int) -> None:
        """Serve PACK (a registered name or a path) as an OpenEnv environment over HTTP/WebSocket."""
        try:
            import uvicorn

            from .serve import make_app
        except ImportError as exc:
            raise click.ClickException(f"{exc}: install the OpenEnv extra: pip install 'agentsynth-rl[openenv]'") from None
        try:
            app = make_app(pack, split=split, max_steps=max_steps, reward=reward, max_concurrent_envs=max_sessions)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"agentsynth rl: serving pack {pack!r} ({split} split) as OpenEnv on http://{bind}:{port}", err=True)
        uvicorn.run(app, host=bind, port=port, log_level="warning")

    rl.add_command(_export_command(), "export")
