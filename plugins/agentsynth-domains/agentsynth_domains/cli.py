"""``agentsynth init-domain NAME -o FILE`` and ``agentsynth metaopt SPEC``."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("init-domain")
@click.argument("name")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="The Python file to write (refuses to overwrite).")
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
def init_domain(name: str, output: Path, force: bool) -> None:
    """Scaffold a domain module NAME for the autosynth loop; it runs as is (see its docstring)."""
    from .scaffold import render

    try:
        text = render(name, output.name)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    if output.exists() and not force:
        raise click.ClickException(f"{output}: exists (use --force to overwrite)")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output}: domain {name!r}; use it with generate: {{type: autosynth, domain: {output.name}}}")


@click.command("metaopt")
@click.argument("spec_file", metavar="SPEC", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--run-dir", type=click.Path(path_type=Path, file_okay=False), help="Where population and lineage go.")
@click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout).")
@click.option("-q", "--quiet", is_flag=True)
@click.pass_context
def metaopt(ctx: click.Context, spec_file: Path, run_dir: Path | None, json_path: str | None, quiet: bool) -> None:
    """Evolve the autosynth harness of SPEC (rules per role, numeric knobs) over generations."""
    from .metaopt import run_metaopt_command

    ctx.exit(run_metaopt_command(spec_file, run_dir, json_path, quiet))
