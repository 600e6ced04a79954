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

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import attrs
import click

FLOOR_POLICIES = ("noop", "random", "claim_success")
TRAJECTORY_CHECKERS_PLUGIN = "builtins"  # the kernel's own checkers read the trajectory, not the world


@attrs.define
class Gate:
    name: str
    status: str = "pass"  # pass / fail / skip
    problems: list[str] = attrs.field(factory=list)
    note: str = ""

    def fail(self, problem: str) -> None:
        self.status = "fail"
        self.problems.append(problem)


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
def new(name: str, schema: Path | None, environment: str | None, parent: Path) -> None:
    """Create pack NAME: a skeleton with an oracle stub, or starter tasks from --from-schema."""
    from ..errors import AgentsynthError
    from ..plugins import get_host
    from ..spec import _ID_RE

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


def is_world_state(cspec: Any, host: Any) -> bool:
    """Does this checker read the world's end state? A checker class says so with ``world_state``,
    or, when that depends on its parameters (a checker wrapping another), with
    ``world_state_for(params)``; otherwise the kernel's own checkers (trajectory only) do not and
    plugin checkers do."""
    try:
        reg = host.get("checker", cspec.type)
    except KeyError:
        return False
    decide = getattr(reg.factory, "world_state_for", None)
    if callable(decide):
        return bool(decide(cspec.params))
    declared = getattr(reg.factory, "world_state", None)
    if declared is not None:
        return bool(declared)
    return reg.plugin != TRAJECTORY_CHECKERS_PLUGIN


def _run(pack: Any, policy: str, *, seed: int, trials: int, concurrency: int, timeout: float) -> list[Any]:
    from ..engine import execute
    from ..spec import ComponentSpec, RunSpec

    spec = RunSpec(policy=ComponentSpec(policy), trials=trials, seed=seed, concurrency=concurrency,
                   timeout=timeout)
    return asyncio.run(execute(spec, pack)).results


def _why(result: Any, limit: int = 300) -> str:
    text = result.why
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_difference(a: Any, b: Any) -> str:
    from ..records import to_json

    if a.status != b.status:
        return f"status {a.status} vs {b.status}"
    ta, tb = a.trajectory, b.trajectory
    if ta is None or tb is None:
        return "one run has no trajectory"
    if ta.initial_observation != tb.initial_observation:
        return "the first observation differs"
    for i, (sa, sb) in enumerate(zip(ta.steps, tb.steps, strict=False)):
        if to_json(sa.action) != to_json(sb.action):
            return f"step {i}: the action differs"
        if to_json(sa.observation) != to_json(sb.observation):
            return f"step {i}: the observation differs"
    if len(ta.steps) != len(tb.steps):
        return f"{len(ta.steps)} vs {len(tb.steps)} steps"
    if ta.final_answer != tb.final_answer:
        return "the final answer differs"
    return ""


def validate_pack(ref: str | Path, *, seed: int = 0, random_trials: int = 3, concurrency: int = 4,
                  timeout: float = 60.0, min_robustness: float = 1.0) -> tuple[Any, list[Gate]]:
    """Run every gate on a pack; returns (pack or None, gates)."""
    from ..errors import SpecError
    from ..plugins import get_host
    from ..spec import check_pack, load_pack

    host = get_host()
    names = ("schema", "unique-ids", "world-state-checkers", "oracle", "determinism", "floors", "robustness")
    gates = {n: Gate(n) for n in names}

    def skip_rest(after: str, why: str) -> None:
        for n in names[names.index(after) + 1:]:
            if gates[n].status == "pass" and not gates[n].problems:
                gates[n].status, gates[n].note = "skip", why

    try:
        pack = load_pack(ref, host=host, validate=False)
    except SpecError as exc:
        for message in exc.messages:
            gates["schema"].fail(f"{exc.source}: {message}")
        skip_rest("schema", "the pack does not load")
        return None, list(gates.values())
    for problem in check_pack(pack, host):
        gates["unique-ids" if "duplicate task id" in problem else "schema"].fail(f"{pack.source}: {problem}")
    for task in pack.tasks:
        checks = pack.task_checkers(task)
        if not checks:
            gates["world-state-checkers"].fail(f"task {task.id!r}: has no checkers")
        elif pack.answer_checked:
            gates["world-state-checkers"].note = ("the pack declares answer_checked: its tasks are checked on the "
                                                  "answer, vouched for by the robustness gate")
        elif not any(is_world_state(c, host) for c in checks):
            kinds = ", ".join(c.type for c in checks)
            gates["world-state-checkers"].fail(
                f"task {task.id!r}: no checker reads the world's end state (only {kinds}, which read the "
                "trajectory); add one that checks the outcome"
            )
    if gates["schema"].status == "fail" or gates["unique-ids"].status == "fail":
        skip_rest("world-state-checkers", "fix the schema / ids first")
        return pack, list(gates.values())

    opts = {"seed": seed, "concurrency": concurrency, "timeout": timeout}
    tasks = {t.id: t for t in pack.tasks}
    # oracle: 100 %
    oracle_first: dict[str, Any] = {}
    if pack.oracle_path is None or not pack.oracle_path.is_file():
        gates["oracle"].fail("the pack has no oracle (add oracle.py next to pack.yaml, or 'oracle: FILE')")
        gates["determinism"].note = "checked with the random policy only (no oracle)"
    else:
        oracle_first = {r.task_id: r for r in _run(pack, "oracle", trials=1, **opts)}
        for task_id in tasks:
            r = oracle_first[task_id]
            if not r.passed:
                gates["oracle"].fail(f"task {task_id!r}: the oracle does not pass ({r.status}): {_why(r)}")
    # determinism: the same seed twice -> identical trajectories
    pairs: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if oracle_first:
        pairs.append(("oracle", oracle_first, {r.task_id: r for r in _run(pack, "oracle", trials=1, **opts)}))
    random_runs = _run(pack, "random", trials=random_trials, **opts)
    random_first = {r.task_id: r for r in random_runs if r.trial == 0}
    pairs.append(("random", random_first, {r.task_id: r for r in _run(pack, "random", trials=1, **opts)}))
    for policy, first, second in pairs:
        for task_id in tasks:
            diff = _first_difference(first[task_id], second[task_id])
            if diff:
                gates["determinism"].fail(f"task {task_id!r}: policy {policy}: two runs with seed {seed} differ: {diff}")
    # floors: 0 % for noop, random, claim_success, and no environment crash under them
    floor_results = {"random": random_runs}
    crashes: list[str] = []
    for policy in FLOOR_POLICIES:
        if policy not in floor_results:
            floor_results[policy] = _run(pack, policy, trials=1, **opts)
    for policy in FLOOR_POLICIES:
        for r in floor_results[policy]:
            if r.passed:
                gates["floors"].fail(
                    f"task {r.task_id!r}: passes under the {policy} policy (trial {r.trial}); its checkers "
                    "do not depend on the agent's work"
                )
            elif r.status == "error" and r.error_kind in ("environment", "checker"):
                crashes.append(f"task {r.task_id!r}: {policy} policy: {_why(r, 160)}")
    if crashes:  # not a gate of its own: worth knowing, but a world may legitimately refuse garbage
        gates["floors"].note = (f"warning: {len(crashes)} floor episode(s) crashed the environment or a checker "
                                f"instead of getting an error observation, e.g. {crashes[0]}")
    # robustness: the adversarial kit farms nothing (or no more than --min-robustness allows)
    from ..audit import audit_pack

    report = audit_pack(pack, host=host, seed=seed, timeout=timeout, concurrency=concurrency)
    for entry in report.tasks:
        if not entry.robust:
            gates["robustness"].problems.append(f"task {entry.task_id!r}: {_audit_problem(entry)}")
    gates["robustness"].note = (f"robustness {report.robustness:.0%} over {len(report.exploits)} attempts per task "
                                f"(minimum {min_robustness:.0%})")
    if report.robustness < min_robustness or any(e.host_problems for e in report.tasks):
        gates["robustness"].status = "fail"
    return pack, list(gates.values())


def _audit_problem(entry: Any) -> str:
    parts = []
    if entry.farmed_by:
        parts.append("passed by " + ", ".join(entry.farmed_by))
    parts += entry.leaks + [f"host touched: {p}" for p in entry.host_problems] + entry.notes
    return "; ".join(parts)


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
                      _audit_problem(entry) if not entry.robust else "; ".join(entry.notes))
    console.print(table)
    ok = report.robustness >= min_robustness
    colour = "green" if ok else "red"
    console.print(f"[{colour}]robustness {report.robustness:.0%}[/] (tasks no attempt could pass; minimum "
                  f"{min_robustness:.0%})")


# --- list -----------------------------------------------------------------------------------------


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
