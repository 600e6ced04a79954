"""``agentsynth hub``: serve, token, pack, submit, pull (thin click commands)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import click

from agentsynth_kernel import AgentsynthError

DB_HELP = "Database: a SQLite file or a URL (postgresql+psycopg://...); default $AGENTSYNTH_HUB_DB or hub.sqlite."


def _db(db: str | None):
    from .db import HubDB

    return HubDB(db or os.environ.get("AGENTSYNTH_HUB_DB") or "hub.sqlite")


def db_option(f):
    return click.option("--db", metavar="PATH|URL", help=DB_HELP)(f)


@click.group()
def hub() -> None:
    """A leaderboard hub that verifies submissions by replaying them (agentsynth-hub)."""


@hub.command()
@db_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0: any free port.")
@click.option("--pack", "packs", multiple=True, metavar="PACK", help="Store this pack (name or path) first (repeatable).")
@click.option("--cache", type=click.Path(path_type=Path), help="Where stored packs are extracted (default: next to the db).")
@click.option("--max-upload-mb", type=click.FloatRange(min=0, min_open=True), default=20, show_default=True,
              help="Largest upload accepted, as sent (gzip).")
@click.option("--max-payload-mb", type=click.FloatRange(min=0, min_open=True), default=200, show_default=True,
              help="Largest submission accepted once decompressed.")
@click.option("--rate-limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="Submissions per submitter per window.")
@click.option("--rate-window", type=click.FloatRange(min=1), default=3600, show_default=True, help="Seconds.")
@click.option("--sample", type=click.IntRange(min=0), default=32, show_default=True,
              help="Episodes replayed per submission (passed ones first; with fewer than the passed episodes, a single forged pass escapes with probability 1 - sample/passed).")
def serve(db: str | None, host: str, port: int, packs: tuple[str, ...], cache: Path | None, max_upload_mb: float,
          max_payload_mb: float, rate_limit: int, rate_window: float, sample: int) -> None:
    """Run the hub (Starlette on uvicorn)."""
    import uvicorn

    from .db import database_url
    from .packs import add_pack
    from .server import MB, HubConfig, create_app

    db = db or os.environ.get("AGENTSYNTH_HUB_DB") or "hub.sqlite"
    store = _db(db)
    for ref in packs:
        rec = add_pack(store, ref)
        click.echo(f"pack {rec['pack_id']} {rec['content_hash']}" + (" stored" if rec["added"] else " (already stored)"))
    store.close()
    if cache is None:
        cache = Path(db).resolve().parent / "hub-cache" if "://" not in db else Path.home() / ".cache/agentsynth/hub"
    config = HubConfig(db=database_url(db), cache=cache, max_upload_bytes=int(max_upload_mb * MB),
                       max_payload_bytes=int(max_payload_mb * MB), rate_limit=rate_limit, rate_window_s=rate_window,
                       sample=sample)
    app = create_app(config)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise AgentsynthError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    bound = sock.getsockname()[1]
    click.echo(f"listening http://{host}:{bound}", nl=True)
    click.get_text_stream("stdout").flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])


@hub.group()
def token() -> None:
    """Submitter tokens (stored hashed; shown once)."""


@token.command("create")
@click.argument("name")
@db_option
def token_create(name: str, db: str | None) -> None:
    """Create a token for submitter NAME and print it (once: the hub keeps only its hash)."""
    store = _db(db)
    try:
        value = store.create_token(name)
    finally:
        store.close()
    click.echo(value)
    click.echo(f"token for {name}: give it to the submitter as AGENTSYNTH_HUB_TOKEN; it is not shown again", err=True)


@token.command("revoke")
@click.argument("name")
@db_option
def token_revoke(name: str, db: str | None) -> None:
    """Revoke NAME's token."""
    store = _db(db)
    try:
        if not store.revoke_token(name):
            raise AgentsynthError(f"no token named {name!r}")
    finally:
        store.close()
    click.echo(f"revoked {name}")


@token.command("list")
@db_option
def token_list(db: str | None) -> None:
    """Token names (never their values)."""
    store = _db(db)
    try:
        for row in store.list_tokens():
            click.echo(f"{row['name']}{'  (revoked)' if row['revoked'] else ''}")
    finally:
        store.close()


@hub.group("pack")
def pack_group() -> None:
    """Packs the hub stores (by content hash)."""


@pack_group.command("add")
@click.argument("refs", nargs=-1, required=True, metavar="PACK...")
@db_option
def pack_add(refs: tuple[str, ...], db: str | None) -> None:
    """Store packs (registered names or paths) on the hub."""
    from .packs import add_pack

    store = _db(db)
    try:
        for ref in refs:
            rec = add_pack(store, ref)
            click.echo(f"pack {rec['pack_id']} {rec['content_hash']}" + (" stored" if rec["added"] else " (already stored)"))
    finally:
        store.close()


@hub.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--url", required=True, envvar="AGENTSYNTH_HUB_URL", help="The hub (or $AGENTSYNTH_HUB_URL).")
@click.option("--label", default="", help="How the entry is named on the leaderboard (default: the policy).")
@click.option("--json", "as_json", is_flag=True, help="The hub's answer as JSON.")
@click.pass_context
def submit(ctx: click.Context, run_dir: Path, url: str, label: str, as_json: bool) -> None:
    """Submit RUN_DIR (report, episodes, provenance) to a hub; the token comes from $AGENTSYNTH_HUB_TOKEN.

    Exit status: 0 accepted, 1 refused (the reason is printed)."""
    from .remote import submit_run

    outcome = submit_run(run_dir, url, label=label)
    if as_json:
        click.echo(json.dumps({"status_code": outcome["status_code"], **outcome["answer"]}, indent=2))
    elif outcome["accepted"]:
        click.echo(outcome["message"])
    else:
        click.echo(f"error: {outcome['message']}", err=True)
    if not outcome["accepted"]:
        ctx.exit(1)


@hub.command()
@click.argument("pack_id")
@click.option("--url", required=True, envvar="AGENTSYNTH_HUB_URL", help="The hub (or $AGENTSYNTH_HUB_URL).")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Directory to create (default: ./PACK_ID).")
@click.option("--hash", "content_hash", help="This version (default: the newest).")
def pull(pack_id: str, url: str, output: Path | None, content_hash: str | None) -> None:
    """Download a pack from a hub into a directory (its content hash is checked)."""
    from .remote import fetch_pack

    path, digest = fetch_pack(pack_id, url, output or Path(pack_id), content_hash)
    click.echo(f"pulled {pack_id} {digest} into {path}")
