"""``agentsynth run spec.yaml``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from ..spec import RunSpec


@click.command()
@click.argument("spec_file", metavar="SPEC", type=click.Path(path_type=Path))
@click.option("--run-dir", type=click.Path(path_type=Path), help="Where results are stored (default: the spec's run_dir, else runs/<time>-<pack>-<policy>); an "
                   "existing one is resumed.")
@click.option("--no-store", is_flag=True, help="Keep results in memory only (no run directory).")
@click.option("--json", "json_path", metavar="PATH", help="Write a machine-readable report ('-' for stdout).")
@click.option("--concurrency", type=click.IntRange(min=1), help="Override the spec's concurrency.")
@click.option("--trials", type=click.IntRange(min=1), help="Override the spec's trials.")
@click.option("--seed", type=int, help="Override the spec's seed.")
@click.option("--budget-usd", type=click.FloatRange(min=0), help="Override the spec's budget in USD.")
@click.option("--budget-tokens", type=click.IntRange(min=0), help="Override the spec's budget in tokens.")
@click.option("--executor", "executor", metavar="SPEC",
              help="Override where episodes run: local | NAME,key=value,... (e.g. 'ray,address=auto').")
@click.option("--force", is_flag=True, help="Resume an existing run directory even though the spec changed.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no table.")
@click.pass_context
def run(ctx: click.Context, spec_file: Path, run_dir: Path | None, no_store: bool, json_path: str | None,
        concurrency: int | None, trials: int | None, seed: int | None, budget_usd: float | None,
        budget_tokens: int | None, executor: str | None, force: bool, quiet: bool) -> None:
    """Run SPEC: every selected task x trial, checked on the world's end state.

    Results are stored in the run directory as episodes finish. Running again with the same
    --run-dir resumes: finished episodes are kept, interrupted ones run again. A changed spec is
    refused with a diff (unless --force); a new budget or concurrency is always accepted.
    Exit status: 0 done, 2 invalid spec or pack, 3 stopped early by the budget, 4 an exporter
    failed, 5 every episode ended in an error (nothing was checked).

    A spec with ``generate: {type: NAME, ...}`` synthesises data instead: the plugin that
    registered generator NAME runs it (see its README for its exit codes).
    """
    from ..errors import SpecError
    from ..spec import load_run_spec, run_settings_problems
    from ._runner import (
        default_run_dir,
        execute_with_progress,
        exit_code,
        report,
        with_executor,
        with_overrides,
    )

    overrides = {k: v for k, v in (("trials", trials), ("seed", seed)) if v is not None}
    spec, pack = load_run_spec(spec_file, overrides=overrides)
    if spec.generate is not None:
        ctx.exit(run_generation(spec_file, spec, run_dir, json_path, quiet))
    spec = with_overrides(spec, concurrency=concurrency, budget_usd=budget_usd, budget_tokens=budget_tokens)
    if executor is not None:
        spec = with_executor(spec, executor)
    problems = run_settings_problems(spec)  # the options too: --budget-usd nan, --concurrency 10**9
    if problems:
        raise SpecError("command line", problems)
    if no_store:
        run_dir = None
    elif run_dir is None:
        run_dir = Path(spec.run_dir) if spec.run_dir else default_run_dir(spec, pack)
    result = execute_with_progress(spec, pack, run_dir=run_dir, quiet=quiet or json_path == "-", force=force,
                                   spec_file=spec_file)
    report(result, json_path=json_path, quiet=quiet)
    ctx.exit(exit_code(result))


def run_generation(spec_file: Path, spec: RunSpec, run_dir: Path | None, json_path: str | None, quiet: bool) -> int:
    """Hand a generation spec to the plugin that registered its generator."""
    from ..errors import SpecError
    from ..plugins import get_host

    host = get_host()
    code = host.pm.hook.run_generation(spec_file=spec_file, spec=spec, run_dir=run_dir, json_path=json_path,
                                       quiet=quiet)
    if code is None:
        name = spec.generate.type if spec.generate is not None else ""  # run() calls this only with one
        plugin = host.get("generator", name).plugin
        raise SpecError(str(spec_file), [
            f"generate.type: generator {name!r} (plugin {plugin!r}) cannot be run from a spec:"
            " its plugin does not implement the run_generation hook"
        ])
    return int(code)
