"""Hook implementations: the ``agentsynth rl`` command group."""

from __future__ import annotations

from typing import Any

import click

from agentsynth_kernel import hookimpl


@hookimpl
def register_commands(cli: Any) -> None:
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
