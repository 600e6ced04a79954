"""Commands on a run directory: ``resume``, ``status``, ``inspect`` and ``verify``."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import click

from ..errors import AgentsynthError, SpecError, did_you_mean
from ..records import Answer, EpisodeResult, ToolCall, to_builtins

RUN_DIR = click.Path(path_type=Path)


def _open(run_dir: Path) -> Any:
    from ..store import RunStore

    return RunStore(run_dir, create=False)


def load_stored_spec(run_dir: Path) -> tuple[Any, Any, Path | None]:
    """The spec and pack a run directory was run with.

    The stored spec is used as is; when secrets were redacted from it, the original spec file
    (its path is stored too) is read instead, and the usual change check applies on resume.
    """
    from ..plugins import get_host
    from ..secrets import has_redacted
    from ..spec import RunSpec, load_run_spec, resolve_pack, structure
    from ..store import STORE_FILE

    store = _open(run_dir)
    try:
        data, spec_file, pack_meta = store.get_meta("spec"), store.get_meta("spec_file"), store.get_meta("pack") or {}
    finally:
        store.close()
    if not isinstance(data, dict):
        raise AgentsynthError(f"{run_dir}: the run store holds no run spec (it was not written by `agentsynth run`)")
    spec_path = Path(spec_file) if spec_file else None
    if has_redacted(data):
        if spec_path is not None and spec_path.is_file():
            spec, pack = load_run_spec(spec_path)
            return spec, pack, spec_path
        raise AgentsynthError(
            f"{run_dir}: the stored spec had secrets redacted and its file ({spec_file or 'unknown'}) is gone;"
            f" continue with: agentsynth run SPEC --run-dir {run_dir}"
        )
    base_dir = spec_path.parent if spec_path is not None else run_dir
    # inline tasks take the pack id from the spec file's name: keep the one the run had
    source = str(spec_path) if spec_path is not None else str(run_dir / f"{pack_meta.get('id', 'spec')}.yaml")
    label = f"{run_dir / STORE_FILE} (stored spec)"
    spec = structure(data, RunSpec, source=label)
    try:
        pack = resolve_pack(spec, base_dir=base_dir, source=source, host=get_host())
    except SpecError as exc:
        raise SpecError(label, exc.messages) from None
    return spec, pack, spec_path


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


def run_status(run_dir: Path) -> dict[str, Any]:
    """What ``agentsynth status`` shows, as data."""
    from ..engine import session_state
    from ..report import summarize_results
    from ..results import ResultSet

    store = _open(run_dir)
    try:
        meta = store.meta()
        results = ResultSet.of_store(store)
        state, last = session_state(store)
        sessions = sum(1 for _, kind, _ in store.events() if kind == "run_started")
    finally:
        store.close()
    spec = meta.get("spec") or {}
    planned = int(meta.get("planned") or len(results))
    summary = summarize_results(
        results, run_id=meta.get("run_id", ""), pack=meta.get("pack") or {}, policy=spec.get("policy") or {},
        trials=int(spec.get("trials", 1)), seed=int(spec.get("seed", 0)), planned=planned,
        stopped=last.get("stopped", "") if state == "stopped" else "",
    )
    summary.pop("results", None)
    summary.update(run_dir=str(run_dir), run_hash=meta.get("run_hash", ""), state=state, sessions=sessions,
                   pid=last.get("pid") if state == "running" else None, created_at=meta.get("created_at"),
                   # a run written by a plugin (e.g. a generator) names itself and keeps its own tallies
                   made_by=meta.get("made_by") or "", status_lines=list(meta.get("status_lines") or ()))
    return summary


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


def unfinished_episodes(run_dir: Path) -> list[tuple[str, int, int]]:
    """(task, trial, seed) of every planned episode the store does not hold: never started, or
    cut off by a kill, a crash or a budget stop. Rebuilt from the stored spec, so nothing is
    written per episode to know it."""
    from ..engine import plan_episodes
    from ..spec import select_tasks

    spec, pack, _ = load_stored_spec(run_dir)
    store = _open(run_dir)
    try:
        stored = store.keys()
    finally:
        store.close()
    plan = [(task.id, trial, seed) for task, trial, seed in plan_episodes(spec, select_tasks(spec, pack))]
    return [key for key in plan if key not in stored]


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
    store = _open(run_dir)
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


async def verify_run(run_dir: Path, *, task_ids: list[str] | None = None) -> dict[str, Any]:
    """Replay every stored trajectory in a fresh world and compare the checkers' verdicts."""
    from ..engine import RunInfo, pack_record
    from ..episode import replay_episode
    from ..plugins import get_host

    spec, pack, _ = load_stored_spec(run_dir)
    store = _open(run_dir)
    try:
        integrity = store.integrity()
        stored_pack = store.get_meta("pack") or {}
        results = [r for r in store.results() if not task_ids or r.task_id in task_ids]
        run_id = store.get_meta("run_id") or ""
    finally:
        store.close()
    host = get_host()
    tasks = {t.id: t for t in pack.tasks}
    info = RunInfo(run_id, spec, pack, run_dir, total=len(results))
    warnings = []
    if integrity != "ok":
        warnings.append(f"store integrity check: {integrity}")
    current = pack_record(pack, spec)
    for key in ("content_hash", "oracle_hash"):
        if stored_pack.get(key) != current.get(key):
            warnings.append(f"pack {key} changed since the run ({stored_pack.get(key)} -> {current.get(key)})")
    limit = asyncio.Semaphore(max(1, spec.concurrency))
    rows: list[dict[str, Any]] = []

    async def one(result: EpisodeResult) -> None:
        row: dict[str, Any] = {"task_id": result.task_id, "trial": result.trial, "seed": result.seed,
                               "stored": result.status}
        rows.append(row)
        if result.status == "error" or result.trajectory is None:
            row["outcome"] = "skipped"
            row["reason"] = f"the episode ended with an error ({result.error_kind})"
            return
        task = tasks.get(result.task_id)
        if task is None:
            row["outcome"], row["reason"] = "differs", "the task is no longer in the pack"
            return
        async with limit:
            replay = await replay_episode(host, pack, task, result.seed, result.trajectory, timeout=spec.timeout,
                                          run=info)
        row["replayed"] = replay.status
        if replay.drift:
            row["drift_steps"] = replay.drift
        before = [(v.checker, v.passed) for v in result.verdicts]
        after = [(v.checker, v.passed) for v in replay.verdicts]
        if replay.status == result.status and before == after:
            row["outcome"] = "reproduced"
            return
        row["outcome"] = "differs"
        row["reason"] = replay.error or "; ".join(
            f"{v.checker}: {'passed' if v.passed else 'failed'} ({v.detail})" for v in replay.verdicts
        )
        row["stored_verdicts"] = [f"{v.checker}: {'passed' if v.passed else 'failed'} ({v.detail})" for v in result.verdicts]

    await asyncio.gather(*(one(r) for r in results))
    rows.sort(key=lambda r: (r["task_id"], r["trial"]))
    tally = {k: sum(r["outcome"] == k for r in rows) for k in ("reproduced", "differs", "skipped")}
    return {"run_dir": str(run_dir), "episodes": len(rows), **tally, "warnings": warnings, "results": rows}


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
