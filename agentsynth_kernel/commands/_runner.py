"""What ``run`` and ``bench`` share: executing a spec with progress, then reporting."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from ..engine import RunInfo, RunReport, execute
from ..records import EpisodeResult
from ..report import render_summary, summarize, summary_lines
from ..spec import Pack, RunSpec


def default_run_dir(spec: RunSpec, pack: Pack) -> Path:
    import time

    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{pack.id}-{spec.policy.type}"


def execute_with_progress(spec: RunSpec, pack: Pack, *, run_dir: Path | None, quiet: bool) -> RunReport:
    """Run the engine; show a progress bar on a terminal (stderr), stay silent otherwise."""
    show = not quiet and sys.stderr.isatty()
    if not show:
        return asyncio.run(execute(spec, pack, run_dir=run_dir))
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    counts = {"passed": 0, "failed": 0, "error": 0}
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[tally]}"), TimeRemainingColumn(), console=Console(stderr=True), transient=True,
    ) as progress:
        bar = progress.add_task(pack.id, total=None, tally="")

        def on_result(info: RunInfo, result: EpisodeResult, done: int) -> None:
            counts[result.status] = counts.get(result.status, 0) + 1
            tally = f"✓{counts['passed']} ✗{counts['failed']} !{counts['error']}"
            progress.update(bar, total=info.total, completed=done, tally=tally)

        return asyncio.run(execute(spec, pack, run_dir=run_dir, on_result=on_result))


def report(run: RunReport, *, json_path: str | None, quiet: bool) -> dict[str, Any]:
    """Print the summary table (unless quiet) and write the JSON report; returns the summary."""
    summary = summarize(run)
    if run.info.run_dir is not None:
        summary["run_dir"] = str(run.info.run_dir)
    if json_path:
        text = json.dumps(summary, indent=2, default=str)
        if json_path == "-":
            click.echo(text)
        else:
            Path(json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(json_path).write_text(text + "\n", encoding="utf-8")
    if not quiet and json_path != "-":
        from rich.console import Console

        console = Console()
        console.print(render_summary(summary))
        for line in summary_lines(summary):
            console.print(line)
        if run.info.run_dir is not None:
            console.print(f"run directory: {run.info.run_dir}")
    return summary
