"""What ``run`` and ``bench`` share: executing a spec with progress, then reporting."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import click

from ..engine import RunInfo, RunReport, execute
from ..records import EpisodeResult
from ..report import render_summary, summarize, summary_lines, write_json
from ..spec import Pack, RunSpec


def default_run_dir(spec: RunSpec, pack: Pack) -> Path:
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{pack.id}-{spec.policy.type}"


def execute_with_progress(spec: RunSpec, pack: Pack, *, run_dir: Path | None, quiet: bool, force: bool = False,
                          spec_file: Path | None = None) -> RunReport:
    """Run the engine; show a progress bar on a terminal (stderr), stay silent otherwise."""
    kwargs: dict[str, Any] = {"run_dir": run_dir, "force": force, "spec_file": spec_file}
    if quiet or not sys.stderr.isatty():
        return asyncio.run(execute(spec, pack, **kwargs))
    progress = RunProgress(pack.id)
    with progress.live:
        return asyncio.run(execute(spec, pack, on_start=progress.started, on_result=progress.finished, **kwargs))


class RunProgress:
    """A rich progress bar: episodes done / failed / errored / in flight, rate, ETA and cost.

    The bar counts restored episodes as done; the tallies, rate and cost are this session's.
    """

    def __init__(self, title: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.live = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[tally]}"), TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
            TextColumn("{task.fields[cost]}"), console=Console(stderr=True), transient=True,
        )
        self.bar = self.live.add_task(title, total=None, tally="", rate="", cost="")
        self.counts = {"passed": 0, "failed": 0, "error": 0}
        self.in_flight = 0
        self.new = 0
        self.cost = 0.0
        self.t0 = time.perf_counter()

    def _update(self, info: RunInfo, done: int | None = None) -> None:
        c = self.counts
        tally = f"[green]✓{c['passed']}[/] [red]✗{c['failed']}[/] [yellow]!{c['error']}[/] ⟳{self.in_flight}"
        elapsed = time.perf_counter() - self.t0
        per_s = self.new / elapsed if self.new and elapsed > 0 else 0.0
        rate = "" if not per_s else (f"{per_s:.1f} ep/s" if per_s >= 1 else f"{per_s * 60:.1f} ep/min")
        fields: dict[str, Any] = {"total": info.total, "tally": tally, "rate": rate,
                                  "cost": f"${self.cost:.4f}" if self.cost else ""}
        if done is not None:
            fields["completed"] = done
        self.live.update(self.bar, **fields)

    def started(self, info: RunInfo, task: Any, trial: int) -> None:
        if not self.new and not self.in_flight:  # first episode: start from what was restored (no ETA jump)
            self.live.reset(self.bar, total=info.total, completed=info.restored)
            if info.restored:
                self.live.update(self.bar, description=f"{info.pack.id} ({info.restored} restored)")
            self.t0 = time.perf_counter()
        self.in_flight += 1
        self._update(info)

    def finished(self, info: RunInfo, result: EpisodeResult, done: int) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        if result.error_kind == "budget":  # not stored: it runs again on resume
            self._update(info)
            return
        self.new += 1
        self.counts[result.status] = self.counts.get(result.status, 0) + 1
        self.cost += result.usage.cost_usd or 0.0
        self._update(info, done)


def with_overrides(spec: RunSpec, *, concurrency: int | None = None, budget_usd: float | None = None,
                   budget_tokens: int | None = None) -> RunSpec:
    """The spec with command-line overrides of the settings a resume may change."""
    import attrs

    if concurrency is not None:
        spec = attrs.evolve(spec, concurrency=concurrency)
    if budget_usd is not None:
        spec = attrs.evolve(spec, budget=attrs.evolve(spec.budget, usd=budget_usd))
    if budget_tokens is not None:
        spec = attrs.evolve(spec, budget=attrs.evolve(spec.budget, tokens=budget_tokens))
    return spec


def with_executor(spec: RunSpec, text: str) -> RunSpec:
    """The spec with ``--executor SPEC`` (``NAME`` or ``NAME,key=value,...``), its name checked."""
    import attrs

    from ..errors import SpecError
    from ..plugins import get_host
    from ..spec import check_component, parse_component

    cspec = parse_component(text, option="--executor")
    problems = check_component("executor", cspec, "--executor", get_host())
    if problems:
        raise SpecError("command line", problems)
    return attrs.evolve(spec, executor=cspec)


def exit_code(run: RunReport) -> int:
    """0 complete, 3 stopped early (budget; resume to continue), 4 an exporter failed, 5 every
    episode ended in an error (nothing was checked: a setup problem, not a result)."""
    if run.stopped:
        return 3
    if run.export_failed:
        return 4
    if nothing_checked(run):
        return 5
    return 0


def nothing_checked(run: RunReport) -> bool:
    """Every episode errored: a policy that cannot be built, a world that cannot start ... (from the
    run's tally: a pass over the stored results would read every episode back)."""
    tally = getattr(run.results, "tally", None)
    if tally is not None:
        return bool(tally.episodes > 0 and tally.counts.get("error", 0) == tally.episodes)
    return bool(run.results) and all(r.status == "error" for r in run.results)


def warn_nothing_checked(run: RunReport) -> bool:
    """Say so, with the first error, when every episode errored (exit 5: a setup problem, not a result)."""
    if not nothing_checked(run):
        return False
    first = run.results[0]
    click.echo(f"error: every episode ended in an error, nothing was checked; the first: "
               f"{first.task_id}: {first.error}", err=True)
    return True


def report(run: RunReport, *, json_path: str | None, quiet: bool) -> dict[str, Any]:
    """Print the summary table (unless quiet) and write the JSON report; returns the summary."""
    summary = summarize(run)
    if run.info.run_dir is not None:
        summary["run_dir"] = str(run.info.run_dir)
    if json_path:
        write_json(summary, json_path)
    if not quiet and json_path != "-":
        from rich.console import Console

        console = Console()
        console.print(render_summary(summary))
        for line in summary_lines(summary):
            console.print(line)
        if run.info.run_dir is not None:
            console.print(f"run directory: {run.info.run_dir}")
    elif run.export_failed:
        for entry in run.exports:
            if "error" in entry:
                click.echo(f"error: export {entry['type']} -> {entry['path']} failed: {entry['error']}", err=True)
    warn_nothing_checked(run)
    return summary
