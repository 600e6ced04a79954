"""The ``agentsynth report`` and ``agentsynth serve`` commands (thin: the work is in html.py / server.py)."""

from __future__ import annotations

from pathlib import Path

import click

RUN_DIR = click.Path(path_type=Path)


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...", type=RUN_DIR)
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=Path("report.html"),
              show_default=True, help="The HTML file to write.")
@click.option("--title", default="", help="The page title (default: the packs and the number of runs).")
@click.option("--label", "labels", multiple=True, metavar="NAME",
              help="A name for each run, in order (default: policy · pack).")
def report(run_dirs: tuple[Path, ...], output: Path, title: str, labels: tuple[str, ...]) -> None:
    """Write one self-contained HTML report of RUN_DIR... (opens with no network).

    pass@1 and pass^k decay curves with 95 % bands (overall and per tier), a task x trial grid,
    failure attribution, cost and tokens, judge dimensions, flaky tasks, a viewer for every
    episode's trajectory, and with two runs the paired comparison.

      agentsynth bench --pack core --policy oracle --run-dir runs/oracle
      agentsynth report runs/oracle runs/noop -o report.html
    """
    from .html import build_report

    if len(labels) > len(run_dirs):
        raise click.BadParameter(f"given {len(labels)} times for {len(run_dirs)} run(s)", param_hint="--label")
    info = build_report(list(run_dirs), output, title=title, labels=labels)
    click.echo(f"wrote {info['path']}: {info['runs']} run(s), {info['episodes']:,} episode(s), "
               f"{info['bytes'] / 1e6:.2f} MB in {info['seconds']:.2f} s")


@click.command()
@click.argument("run_dirs", nargs=-1, metavar="[RUN_DIR|DIR]...", type=RUN_DIR)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback exposes your runs and the playground: say so with --public.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="0: any free port.")
@click.option("--public", is_flag=True, help="Allow binding a non-loopback address.")
def serve(run_dirs: tuple[Path, ...], host: str, port: int, public: bool) -> None:
    """A local web app over run directories: browse runs, follow a running one live, open any
    episode, compare runs, a per-pack leaderboard, and a playground to watch a policy act.

    Each argument is a run directory or a directory holding run directories (default: ./runs).

      agentsynth serve runs/
    """
    from .server import check_bind, run_server

    check_bind(host, public)
    roots = list(run_dirs) or [Path("runs")]
    run_server(roots, host=host, port=port)
