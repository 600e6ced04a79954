"""``agentsynth pack new|validate|list``: create scenario packs and prove they are sound.

``validate`` runs every gate and reports each failure with the task and why:

- ``schema``: the pack file parses, every key is known and every ``type:`` is installed;
- ``unique-ids``: no two tasks share an id;
- ``world-state-checkers``: every task has at least one checker that reads the world's end
  state (``answer_contains`` / ``called_tool`` only read the trajectory);
- ``oracle``: the pack's oracle passes every task (100 %);
- ``determinism``: the same seed gives identical trajectories (oracle and random, run twice);
- ``floors``: ``noop``, ``random`` and ``claim_success`` pass no task (0 %); an environment
  that crashes under them (instead of returning an error observation) is reported as a warning;
- ``robustness``: ``pack audit``'s exploits (generic and the world's own) farm no more tasks than
  ``--min-robustness`` allows, and no instruction gives its answer away.

``audit`` runs the adversarial kit alone and prints a per-task robustness table.

Scaffolding for ``new`` comes from plugins through the ``scaffold_pack`` hook (the SQL
plugin turns a CREATE TABLE file into tasks, checkers and a working oracle).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import click

# the library functions behind the commands (re-exported: plugins imported them from here)
from ..validation import FLOOR_POLICIES, Gate, audit_problem, is_world_state, validate_pack  # noqa: E402,F401


@click.group()
def pack() -> None:
    """Create and validate scenario packs."""


# --- new ------------------------------------------------------------------------------------------


GENERIC_PACK = """\
# A pack skeleton for environment {env!r}. Fill in the task's checkers (at least one that reads
# the world's end state) and the oracle, then run `agentsynth pack validate {name}`.
id: {name}
description: TODO what this pack tests
environment:
  type: {env}
oracle: oracle.py
tasks:
  - id: example
    split: train
    tier: 1
    instruction: TODO what the agent must do
    checkers: []
"""

GENERIC_ORACLE = '''\
"""The scripted solution of every task: {task_id: [actions]}.

An action is {"tool": NAME, "arguments": {...}} or {"answer": TEXT}.
"""

ORACLE = {
    "example": [{"answer": "TODO"}],
}
'''


@pack.command("new")
@click.argument("name")
@click.option("--from-schema", "schema", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="Generate tasks, checkers and an oracle from a schema file (e.g. CREATE TABLE statements).")
@click.option("--env", "environment", metavar="TYPE", help="The environment type (default: the installed scaffolder).")
@click.option("--dir", "parent", type=click.Path(path_type=Path, file_okay=False), default=Path("."),
              show_default=True, help="Create the pack directory inside this directory.")
@click.option("--from-demo", "demo", metavar="FILE|RUN_DIR/TASK[/TRIAL]",
              help="Record of a demonstration (YAML, or a run's stored episode): its actions run in a fresh world "
                   "and the pack checks exactly what they changed, with an oracle that replays them.")
@click.option("-o", "--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="With --from-demo: the pack directory to write (default: DIR/NAME).")
def new(name: str, schema: Path | None, environment: str | None, parent: Path, demo: str | None,
        out: Path | None) -> None:
    """Create pack NAME: a skeleton with an oracle stub, starter tasks from --from-schema, or the
    checks and oracle of a recorded demonstration (--from-demo)."""
    from ..errors import AgentsynthError
    from ..plugins import get_host
    from ..spec import _ID_RE

    if demo is not None or out is not None:
        from .pack_demo import new_from_demo_option

        new_from_demo_option(name, demo, out, parent=parent, schema=schema, environment=environment)
        return
    if not _ID_RE.match(name):
        raise AgentsynthError(f"{name!r} is not a valid pack name (letters, digits, '_', '-', '.')")
    directory = parent / name
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise AgentsynthError(f"{directory}: already exists and is not empty")
    host = get_host()
    if environment is not None:
        try:
            host.get("environment", environment)
        except KeyError as exc:
            raise AgentsynthError(f"--env: {exc.args[0]}") from None
    directory.mkdir(parents=True, exist_ok=True)
    try:
        written = host.pm.hook.scaffold_pack(name=name, directory=directory, environment=environment, schema=schema)
    except (ValueError, OSError) as exc:
        _cleanup(directory)
        where = f"{schema}: " if schema is not None and str(schema) not in str(exc) else ""
        raise AgentsynthError(f"{where}{exc}") from None
    if written is None:
        if schema is not None or environment is None:
            _cleanup(directory)
            what = f"schema {schema}" if schema is not None else "a default pack"
            env = f" for environment {environment!r}" if environment else ""
            raise AgentsynthError(
                f"no installed plugin scaffolds {what}{env} (install agentsynth-sql, or pass --env TYPE for a "
                "bare skeleton)"
            )
        (directory / "pack.yaml").write_text(GENERIC_PACK.format(name=name, env=environment), encoding="utf-8")
        (directory / "oracle.py").write_text(GENERIC_ORACLE, encoding="utf-8")
        written = [directory / "pack.yaml", directory / "oracle.py"]
        click.echo(f"no plugin scaffolds {environment!r} packs: wrote a bare skeleton; add checkers before validating")
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"next: agentsynth pack validate {directory}")


def _cleanup(directory: Path) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


# --- validate -------------------------------------------------------------------------------------

@pack.command("validate")
@click.argument("ref", metavar="PATH|NAME")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every validation run.")
@click.option("--random-trials", type=click.IntRange(min=1), default=3, show_default=True,
              help="Trials of the random policy per task for the floor gate.")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              help="Seconds per episode.")
@click.option("--min-robustness", type=click.FloatRange(0, 1), default=1.0, show_default=True,
              help="Share of tasks that no exploit of `pack audit` may pass.")
@click.option("--json", "json_path", metavar="PATH", help="Write the gates as JSON ('-' for stdout).")
@click.pass_context
def validate(ctx: click.Context, ref: str, seed: int, random_trials: int, concurrency: int, timeout: float,
             min_robustness: float, json_path: str | None) -> None:
    """Check a pack with every gate: schema, unique ids, world-state checkers, oracle 100%,
    determinism, 0% floors for noop / random / claim_success, and robustness against the
    adversarial kit (see `pack audit`). Exit 1 if any gate fails."""
    pack_obj, gates = validate_pack(ref, seed=seed, random_trials=random_trials, concurrency=concurrency,
                                    timeout=timeout, min_robustness=min_robustness)
    ok = all(g.status != "fail" for g in gates)
    data = {"pack": getattr(pack_obj, "id", str(ref)), "source": getattr(pack_obj, "source", str(ref)),
            "tasks": len(pack_obj.tasks) if pack_obj is not None else 0, "passed": ok,
            "gates": [attrs.asdict(g) for g in gates]}
    _write_json(data, json_path)
    if json_path != "-":
        _print_gates(data, gates)
    if not ok:
        sys.exit(1)  # SystemExit, not ctx.exit(): see commands/bench.py


def _write_json(data: dict[str, Any], json_path: str | None) -> None:
    """``--json PATH`` (``-``: stdout)."""
    if json_path:
        text = json.dumps(data, indent=2)
        if json_path == "-":
            click.echo(text)
        else:
            Path(json_path).write_text(text + "\n", encoding="utf-8")


def _print_gates(data: dict[str, Any], gates: list[Gate]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"pack {data['pack']} · {data['tasks']} tasks · {data['source']}")
    table.add_column("gate")
    table.add_column("result")
    table.add_column("problems", justify="right")
    marks = {"pass": "[green]pass[/]", "fail": "[red]FAIL[/]", "skip": "[yellow]skipped[/]"}
    for g in gates:
        table.add_row(g.name, marks[g.status], str(len(g.problems)) if g.problems else "")
    console.print(table)
    for g in gates:
        for problem in g.problems:
            console.print(f"{g.name}: {problem}", markup=False, highlight=False, soft_wrap=True)
        if g.note:
            console.print(f"{g.name}: {g.note}", markup=False, highlight=False, soft_wrap=True)
    console.print("[green]all gates pass[/]" if data["passed"] else "[red]validation failed[/]")


# --- audit ----------------------------------------------------------------------------------------


@pack.command("audit")
@click.argument("ref", metavar="PATH|NAME")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              help="Seconds per attempt.")
@click.option("--min-robustness", type=click.FloatRange(0, 1), default=1.0, show_default=True,
              help="Exit 1 when the share of tasks no attempt could pass is below this.")
@click.option("--json", "json_path", metavar="PATH", help="Write the audit as JSON ('-' for stdout).")
def audit(ref: str, seed: int, concurrency: int, timeout: float, min_robustness: float,
          json_path: str | None) -> None:
    """Attack every task with trivial and hostile agents (noop, random, claim success, canned and
    stuffed answers, echo of the task, replayed transcripts, and the world's own exploits) and
    print which tasks any of them passes. Exit 1 if robustness is below --min-robustness or an
    attempt touched the host."""
    from ..audit import audit_pack
    from ..plugins import get_host
    from ..spec import load_pack

    host = get_host()
    pack_obj = load_pack(ref, host=host)
    report = audit_pack(pack_obj, host=host, seed=seed, timeout=timeout, concurrency=concurrency)
    data = report.to_dict()
    _write_json(data, json_path)
    if json_path != "-":
        _print_audit(report, min_robustness)
    if report.robustness < min_robustness or any(t.host_problems for t in report.tasks):
        sys.exit(1)


def _print_audit(report: Any, min_robustness: float) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"pack {report.pack} · {len(report.exploits)} attempts per task")
    for column in ("task", "attempts", "errors", "sibling", "result", "passed by / problem"):
        table.add_column(column, justify="right" if column in ("attempts", "errors") else "left")
    for entry in report.tasks:
        mark = "[green]robust[/]" if entry.robust else "[red]FARMABLE[/]"
        table.add_row(entry.task_id, str(entry.attempts), str(entry.errors or ""), entry.sibling or "-", mark,
                      audit_problem(entry) if not entry.robust else "; ".join(entry.notes))
    console.print(table)
    ok = report.robustness >= min_robustness
    colour = "green" if ok else "red"
    console.print(f"[{colour}]robustness {report.robustness:.0%}[/] (tasks no attempt could pass; minimum "
                  f"{min_robustness:.0%})")


# --- list -----------------------------------------------------------------------------------------


@pack.command("teach")
@click.argument("ref", metavar="PATH|NAME")
@click.option("-o", "--out", "out", required=True, type=click.Path(path_type=Path), help="The JSONL file to write.")
@click.option("--split", type=click.Choice(["train", "test", "all"]), default="train", show_default=True,
              help="Training data leaves the test split out unless asked.")
@click.option("-k", "--trials", type=click.IntRange(min=1), default=1, show_default=True,
              help="Episodes per task (seeds differ: worlds with random seeds give varied trajectories).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True)
def teach(ref: str, out: Path, split: str, trials: int, seed: int, timeout: float) -> None:
    """The pack's oracle episodes as gold SFT trajectories (OpenAI chat messages with tool calls and
    the tool schemas, TRL's conversational format), one JSON line per passing episode, checked on
    the world like any other. Exit status 1 if the oracle failed a task (it is left out and named)."""
    from ..engine import run as run_spec
    from ..plugins import get_host
    from ..records import to_openai_messages
    from ..secrets import redact_text
    from ..spec import ComponentSpec, RunSpec, load_pack

    pack_obj = load_pack(ref, host=get_host())
    if pack_obj.oracle_path is None or not pack_obj.oracle_path.is_file():
        raise click.ClickException(f"{pack_obj.source}: the pack has no oracle (add oracle.py next to pack.yaml)")
    spec = RunSpec(policy=ComponentSpec("oracle"), split=split, trials=trials, seed=seed, timeout=timeout)
    report = run_spec(spec, pack_obj)
    out.parent.mkdir(parents=True, exist_ok=True)
    written, failed = 0, []
    with out.open("w", encoding="utf-8") as fp:
        for result in report.results:
            if not result.passed or result.trajectory is None:
                failed.append(f"{result.task_id} (trial {result.trial}): {result.why}")
                continue
            traj = result.trajectory
            record = {"messages": to_openai_messages(traj), "tools": [t.to_openai() for t in traj.tools],
                      "task_id": result.task_id, "split": result.split, "tier": result.tier, "seed": result.seed,
                      "pack": pack_obj.id, "pack_hash": pack_obj.content_hash, "source": "oracle",
                      "verified": [v.checker for v in result.verdicts if v.passed]}
            fp.write(redact_text(json.dumps(record, ensure_ascii=False)) + "\n")
            written += 1
    click.echo(f"wrote {written} gold trajectories of pack {pack_obj.id!r} ({split} split) to {out}")
    for line in failed:
        click.echo(f"error: the oracle did not pass {line}", err=True)
    if failed:
        sys.exit(1)


@pack.command("list")
def list_packs() -> None:
    """The packs installed plugins ship (use them by name: --pack NAME)."""
    from ..plugins import get_host

    host = get_host()
    entries = sorted(host.registry["pack"].values(), key=lambda r: r.name)
    if not entries:
        click.echo("no packs installed (plugins ship them, e.g. agentsynth-sql ships 'core')")
    for reg in entries:
        desc = f"  {reg.description}" if reg.description else ""
        click.echo(f"{reg.name}  ({reg.plugin}){desc}\n    {reg.factory}")
