"""``agentsynth bfcl status|import``: where BFCL's data is, and BFCL categories as pack directories."""

from __future__ import annotations

from pathlib import Path

import click

from .convert import CATEGORIES, GROUPS


@click.group()
def bfcl() -> None:
    """BFCL function-calling packs (from the bfcl-eval package's data files)."""


@bfcl.command("status")
def status() -> None:
    """Where BFCL's data is read from, and the packs it gives (use them as --pack bfcl:CATEGORY)."""
    from .convert import DATA_ENV, cached_packs, data_dir, data_version, describe, task_count

    directory = data_dir()
    if directory is None:
        raise click.ClickException(f"BFCL data not found: `pip install --no-deps bfcl-eval`, or set ${DATA_ENV} "
                                   "to a BFCL data directory (with possible_answer/)")
    packs = cached_packs(directory)
    if not packs:
        raise click.ClickException(f"{directory}: no BFCL data files here (BFCL_v4_<category>.json and "
                                   "possible_answer/); unset ${DATA_ENV} to read the installed bfcl-eval's")
    click.echo(f"data: {directory} ({data_version(directory)})")
    for name, path in packs.items():
        click.echo(f"bfcl:{name}  {task_count(path)} tasks  {describe(name)}\n    {path}")


@bfcl.command("import")
@click.argument("category", type=click.Choice([*CATEGORIES, *GROUPS]))
@click.option("-o", "--out", "out", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="The pack directory to write (must not exist, or be empty).")
@click.option("--data", "data", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="A BFCL data directory (default: the installed bfcl-eval's, or $AGENTSYNTH_BFCL_DATA).")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N items.")
@click.option("--ids", help="Only these item ids (comma-separated).")
def import_category(category: str, out: Path, data: Path | None, limit: int | None, ids: str | None) -> None:
    """Write BFCL CATEGORY (or the group non-live / live, one tier per category) as a pack
    directory (pack.yaml, functions.jsonl, oracle.py)."""
    from .convert import skipped_items, write_pack

    chosen = [i.strip() for i in ids.split(",") if i.strip()] if ids else None
    path = write_pack(category, out, data, limit=limit, ids=chosen)
    skipped = skipped_items(path)
    click.echo(f"wrote {path / 'pack.yaml'}")
    for entry in skipped:
        click.echo(f"skipped {entry['id']}: {entry['why']}")
    click.echo(f"next: agentsynth bench --pack {path} --policy oracle")
