"""Commands on a run directory: ``resume``, ``status``, ``inspect`` and ``verify``."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import click

from ..errors import AgentsynthError, did_you_mean
from ..records import Answer, EpisodeResult, ToolCall, to_builtins

RUN_DIR = click.Path(path_type=Path)

# the library functions behind the commands (re-exported: plugins imported them from here)
from ..rundirs import load_stored_spec, open_run, run_status, unfinished_episodes, verify_run  # noqa: E402,F401

# --- resume ----------------------------------------------------------------------------------------


@click.command()
@click.argument("run_dir", metavar="RUN_DIR", type=RUN_DIR)
@click.option("--json", "json_path", metavar="PATH", help="Write a machine-readable report ('-' for stdout).")
@click.option("--concurrency", type=click.IntRange(min=1), help="Episodes in flight (may differ from the first session).")
@click.option("--budget-usd", type=click.FloatRange(min=0), help="A new budget in USD (continue after a budget stop).")
@click.option("--budget-tokens", type=click.IntRange(min=0), help="A new budget in tokens.")
@click.option("--executor", "executor", metavar="SPEC",
              help="Where the remaining episodes run: local | NAME,key=value,... (may differ from the first session).")
@click.option("--force", is_flag=True, help="Resume even though the spec file changed since the run started.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no table.")
@click.pass_context
def resume(ctx: click.Context, run_dir: Path, json_path: str | None, concurrency: int | None,
           budget_usd: float | None, budget_tokens: int | None, executor: str | None, force: bool,
           quiet: bool) -> None:
    """Continue a stopped or killed run: finished episodes are kept, the rest run.

    Uses the spec stored in RUN_DIR (or its original file when secrets had to be redacted).
    Exit status: 0 done, 3 stopped early by the budget, 4 an exporter failed.
    """
    from ._runner import execute_with_progress, exit_code, report, with_executor, with_overrides

    spec, pack, spec_file = load_stored_spec(run_dir)
    spec = with_overrides(spec, concurrency=concurrency, budget_usd=budget_usd, budget_tokens=budget_tokens)
    if executor is not None:
        spec = with_executor(spec, executor)
    result = execute_with_progress(spec, pack, run_dir=run_dir, quiet=quiet or json_path == "-", force=force,
                                   spec_file=spec_file)
    report(result, json_path=json_path, quiet=quiet)
    ctx.exit(exit_code(result))


# --- status ----------------------------------------------------------------------------------------


@click.command()
@click.argument("run_dir", metavar="RUN_DIR", type=RUN_DIR)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(run_dir: Path, as_json: bool) -> None:
    """Progress, pass rates so far, cost and failures by kind of RUN_DIR (also while it runs)."""
    from ..report import summary_lines

    info = run_status(run_dir)
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    state = info["state"] + (f" (pid {info['pid']})" if info.get("pid") else "")
    if info["state"] == "interrupted":
        state += f" — continue with: agentsynth resume {run_dir}"
    done, planned = info["episodes"], info["planned"]
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["created_at"])) if info.get("created_at") else "?"
    who = f"policy {info['policy']['type']}" if info["policy"].get("type") else (info.get("made_by") or "policy ?")
    click.echo(f"run {info['run_id'] or '?'} · pack {info['pack'].get('id', '?')} · {who}")
    click.echo(f"run hash {info['run_hash'] or '-'} · created {created} · {info['sessions']} session(s)")
    click.echo(f"state: {state}")
    pct = f" ({done / planned:.0%})" if planned else ""
    if done or not info.get("status_lines"):  # a generation run that stores no episodes reports its own progress
        click.echo(f"progress: {done}/{planned} episodes{pct}")
    if done:
        for line in summary_lines(info):
            click.echo(line)
    for line in info.get("status_lines") or ():  # what the plugin that writes the run keeps there
        click.echo(line)
    usage = info.get("usage") or {}
    if usage.get("prompt_tokens") or usage.get("completion_tokens"):
        click.echo(f"tokens: {usage.get('prompt_tokens', 0)} prompt, {usage.get('completion_tokens', 0)} completion")


# --- inspect ---------------------------------------------------------------------------------------


def _short(text: str, width: int) -> str:
    text = text.replace("\n", "⏎ ")
    return text if width <= 0 or len(text) <= width else text[: width - 1] + "…"


def render_episode(result: EpisodeResult, *, width: int = 200) -> list[str]:
    """A readable trajectory: tool calls, observations, the answer, verdicts and any error."""
    mark = {"passed": "PASSED", "failed": "FAILED"}.get(result.status, f"ERROR ({result.error_kind})")
    cost = f" · ${result.usage.cost_usd:.4f}" if result.usage.cost_usd else ""
    lines = [f"── {result.task_id} · trial {result.trial} · seed {result.seed} · {mark} · {result.duration_s:.2f}s{cost}"]
    traj = result.trajectory
    if traj is not None:
        lines.append(f"instruction: {_short(traj.instruction, width)}")
        if traj.initial_observation:
            lines.append(f"observation: {_short(traj.initial_observation, width)}")
        for i, step in enumerate(traj.steps, 1):
            if step.thought:
                lines.append(f"  {i:>3}  thought: {_short(step.thought, width)}")
            if isinstance(step.action, ToolCall):
                args = json.dumps(step.action.arguments, ensure_ascii=False)
                flag = "  [invalid]" if step.invalid else ""
                lines.append(f"  {i:>3}  → {step.action.name}({_short(args, width)}){flag}")
                if step.observation is not None:
                    content = step.observation.content
                    err = "error: " if step.observation.error and not content.lower().startswith("error") else ""
                    lines.append(f"       ← {err}{_short(step.observation.content, width)}")
            elif isinstance(step.action, Answer):
                lines.append(f"  {i:>3}  answer: {_short(step.action.content, width)}")
        if traj.metadata.get("stopped"):
            lines.append(f"stopped: {traj.metadata['stopped']}")
    for v in result.verdicts:
        lines.append(f"  {'✓' if v.passed else '✗'} {v.checker}: {v.detail}")
    for name, score in result.scores.items():
        lines.append(f"  score {name}: {score:.3f}")
    if result.error:
        lines.append(f"error: {result.error}")
        if traj is not None and traj.metadata.get("traceback"):
            lines.extend("  " + line for line in str(traj.metadata["traceback"]).splitlines())
    return lines


def episode_table(results: list[EpisodeResult], width: int = 100) -> list[str]:
    """One line per stored episode: task, trial, outcome, time, why it did not pass."""
    lines = [f"{'task':<28} {'trial':>5}  {'outcome':<20} {'seconds':>8}  why"]
    for r in results:
        outcome = r.status if r.status != "error" else f"error ({r.error_kind})"
        lines.append(f"{_short(r.task_id, 28):<28} {r.trial:>5}  {outcome:<20} {r.duration_s:>8.2f}  {_short(r.why, width)}")
    return lines


@click.command()
@click.argument("run_dir", metavar="RUN_DIR", type=RUN_DIR)
@click.argument("task_id", metavar="[TASK]", required=False)
@click.option("--trial", type=int, help="Only this trial.")
@click.option("--full", is_flag=True, help="Do not shorten long observations.")
@click.option("--stuck", is_flag=True, help="List the planned episodes that never finished (run them with resume).")
@click.option("--json", "as_json", is_flag=True, help="The stored EpisodeResults as JSON.")
def inspect(run_dir: Path, task_id: str | None, trial: int | None, full: bool, stuck: bool, as_json: bool) -> None:
    """Show TASK's stored trajectories in RUN_DIR (tool calls, observations, verdicts); without TASK,
    a table of every stored episode; with --stuck, the planned episodes that never finished."""
    if stuck:
        missing = unfinished_episodes(run_dir)
        if as_json:
            click.echo(json.dumps([{"task_id": t, "trial": n, "seed": s} for t, n, s in missing], indent=2))
        elif not missing:
            click.echo(f"{run_dir}: every planned episode finished")
        else:
            for t, n, s in missing:
                click.echo(f"{t}  trial {n}  seed {s}  not finished")
            click.echo(f"{len(missing)} episode(s) never finished; continue with: agentsynth resume {run_dir}")
        return
    store = open_run(run_dir)
    try:
        if task_id is None:
            results = [r for r in store.results() if trial is None or r.trial == trial]
        else:
            results = [r for r in store.results(task_id) if trial is None or r.trial == trial]
        known = store.task_ids()
    finally:
        store.close()
    if task_id is None:
        if as_json:
            click.echo(json.dumps([to_builtins(r) for r in results], indent=2))
            return
        for line in episode_table(results, width=0 if full else 100):
            click.echo(line)
        click.echo(f"{len(results)} episode(s); show one with: agentsynth inspect {run_dir} TASK")
        return
    if not results:
        if task_id not in known:
            raise AgentsynthError(f"{run_dir}: no episodes of task {task_id!r}{did_you_mean(task_id, known)}")
        raise AgentsynthError(f"{run_dir}: task {task_id!r} has no trial {trial}")
    if as_json:
        click.echo(json.dumps([to_builtins(r) for r in results], indent=2))
        return
    for result in results:
        for line in render_episode(result, width=0 if full else 200):
            click.echo(line)


# --- verify ----------------------------------------------------------------------------------------


@click.command()
@click.argument("run_dir", metavar="RUN_DIR", type=RUN_DIR)
@click.option("--task", "task_ids", multiple=True, help="Only these tasks (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def verify(ctx: click.Context, run_dir: Path, task_ids: tuple[str, ...], as_json: bool) -> None:
    """Replay RUN_DIR's stored tool calls in fresh worlds (same pack, same seeds), re-run the checkers,
    and report every verdict that does not reproduce. Exit status 1 if any does not."""
    outcome = asyncio.run(verify_run(run_dir, task_ids=list(task_ids) or None))
    if as_json:
        click.echo(json.dumps(outcome, indent=2, default=str))
    else:
        for warning in outcome["warnings"]:
            click.echo(f"warning: {warning}", err=True)
        for row in outcome["results"]:
            if row["outcome"] == "differs":
                click.echo(f"DIFFERS {row['task_id']} trial {row['trial']}: stored {row['stored']},"
                           f" replay {row.get('replayed', '-')}: {row['reason']}")
            if row.get("drift_steps"):
                also = " (verdicts reproduce)" if row["outcome"] == "reproduced" else ""
                click.echo(f"note: {row['task_id']} trial {row['trial']}: observations differ at step(s)"
                           f" {', '.join(str(i + 1) for i in row['drift_steps'])}{also}")
        click.echo(f"verified {outcome['episodes']} episode(s): {outcome['reproduced']} reproduced,"
                   f" {outcome['differs']} differ, {outcome['skipped']} skipped (ended in an error)")
    if outcome["differs"]:
        ctx.exit(1)
