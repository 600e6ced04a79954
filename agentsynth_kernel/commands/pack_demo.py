"""``agentsynth pack new NAME --from-demo FILE``: a pack from one recorded demonstration.

The demonstration's actions run in a fresh world; the world's plugin diffs the end state against
the start (the ``checks_from_demo`` hook) and returns state checks for exactly what changed; the
pack written holds those checks and an oracle that replays the actions. Before anything is
written, the actions are played twice (checks that differ between two replays would not be
deterministic) and the written pack is tried: its oracle must pass and an agent that does nothing
must fail. Nothing is left behind when any step fails (the pack is written to a temporary
directory next to the target and renamed at the end).

The demonstration file (YAML), see docs/pack-from-demo.md::

    environment: {type: sql, schema: schema.sql, seed: seed.sql}   # or: pack: core (+ task: ID)
    instruction: Mark order 3 as shipped.
    actions:
      - {tool: sql_execute, arguments: {sql: "UPDATE orders SET status = 'shipped' WHERE id = 3"}}
      - {answer: Order 3 is shipped.}

``FILE`` may also name a stored episode: ``RUN_DIR/TASK`` (its first trial) or ``RUN_DIR/TASK/TRIAL``.
"""

from __future__ import annotations

import asyncio
import os
import pprint
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs
import click

from .. import (
    SPLITS,
    STORE_FILE,
    AgentsynthError,
    Answer,
    ComponentSpec,
    EpisodeConfig,
    SpecError,
    Step,
    SyncWorker,
    Task,
    ToolCall,
    Trajectory,
    build,
    check_component,
    close_world,
    did_you_mean,
    get_host,
    load_pack,
    load_stored_spec,
    open_run,
    read_yaml,
    run_episode,
    structure,
    to_action,
)

HOOK = "checks_from_demo"
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")  # what a pack id may be (as `pack new`)
MAX_ACTIONS = 500


@attrs.define
class DemoFile:
    """A demonstration file: where the world comes from, the task, and the recorded actions.

    Give ``environment`` (a component spec, relative paths against the file's directory) or
    ``pack`` (a registered pack name or a path) with optionally ``task`` (its id: that task's
    world and, unless ``instruction`` is given, its instruction). ``actions`` are what the
    ``scripted`` policy plays: ``{tool: NAME, arguments: {...}}`` or a last ``{answer: TEXT}``.
    ``expect_answer`` is the part of the answer a demonstration that changes nothing checks
    (default: the number it states, else the whole answer)."""

    actions: list[dict[str, Any]]
    instruction: str | None = None
    environment: ComponentSpec | None = None
    pack: str | None = None
    task: str | None = None
    id: str = "demo"
    seed: int = 0
    split: str = "test"
    tier: str = ""
    description: str = ""
    expect_answer: Any = None  # a string or a number


@attrs.define
class Demo:
    """A demonstration ready to play: the task, its world, the actions, where it came from."""

    source: str
    task: Any  # spec.Task
    environment: Any  # spec.ComponentSpec, the task's merged environment
    base_dir: Path
    actions: list[Any]  # ToolCall / Answer
    seed: int = 0
    description: str = ""
    expect_answer: str | float | None = None
    notes: list[str] = attrs.field(factory=list)


# --- reading a demonstration ----------------------------------------------------------------------


def load_demo(ref: str | Path, *, host: Any) -> Demo:
    """A demonstration from a YAML file, or from a stored episode ``RUN_DIR/TASK[/TRIAL]``."""
    path = Path(ref)
    if path.is_file():
        return _from_file(path, host)
    episode = _stored_episode(path)
    if episode is not None:
        return _from_run(*episode, host=host)
    if path.is_dir():
        raise AgentsynthError(f"{path}: a directory, not a demonstration file (a run's episode is RUN_DIR/TASK)")
    raise AgentsynthError(f"{path}: demonstration file not found")


def _from_file(path: Path, host: Any) -> Demo:
    source = str(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise SpecError(source, [f"expected a mapping with 'actions' and 'environment' or 'pack', got "
                                 f"{type(data).__name__}"])
    if not isinstance(data.get("actions"), list):  # before structure(): a clearer line than cattrs'
        raise SpecError(source, ["actions: expected a list of {tool: NAME, arguments: {...}} / {answer: TEXT}"])
    demo = structure(data, DemoFile, source=source)
    if (demo.environment is None) == (demo.pack is None):
        raise SpecError(source, ["give either 'environment' (a world spec) or 'pack' (a pack to start from)"])
    if demo.task is not None and demo.pack is None:
        raise SpecError(source, ["task: only with 'pack' (the task of that pack to start from)"])
    actions = []
    for i, raw in enumerate(demo.actions):
        try:
            actions.append(to_action(raw, f"actions[{i}]"))
        except AgentsynthError as exc:
            raise SpecError(source, [str(exc)]) from None
    for i, action in enumerate(actions[:-1]):
        if isinstance(action, Answer):
            raise SpecError(source, [f"actions[{i}]: an answer ends the demonstration; it must be the last action"])
    if not actions:
        raise SpecError(source, ["actions: the demonstration has no action"])
    if demo.expect_answer is not None and (isinstance(demo.expect_answer, bool)
                                           or not isinstance(demo.expect_answer, str | int | float)):
        raise SpecError(source, [f"expect_answer: expected a string or a number, got {demo.expect_answer!r}"])
    if len(actions) > MAX_ACTIONS:
        raise SpecError(source, [f"actions: {len(actions)} actions, more than {MAX_ACTIONS}"])
    base_dir = path.parent.resolve()
    instruction = demo.instruction
    if demo.pack is not None:
        try:
            pack = load_pack(demo.pack if not (base_dir / demo.pack).exists() else base_dir / demo.pack, host=host)
        except SpecError as exc:
            raise SpecError(source, [f"pack: {m}" for m in str(exc).splitlines()]) from None
        start = None
        if demo.task is not None:
            start = next((t for t in pack.tasks if t.id == demo.task), None)
            if start is None:
                raise SpecError(source, [f"task: pack {pack.id!r} has no task {demo.task!r}"
                                         f"{did_you_mean(demo.task, [t.id for t in pack.tasks])}"])
            instruction = instruction if instruction is not None else start.instruction
        env = pack.task_environment(start) if start is not None else pack.environment
        if env is None:
            raise SpecError(source, [f"pack: pack {pack.id!r} has no environment"])
        base_dir = pack.base_dir
    else:
        env = demo.environment
    if not instruction or not str(instruction).strip():
        raise SpecError(source, ["instruction: the task's instruction is missing (required unless 'task' gives it)"])
    task = structure({"id": demo.id, "instruction": instruction, "split": demo.split, "tier": demo.tier}, Task,
                     source=source)
    problems = [] if ID_RE.match(task.id) else [f"id: {task.id!r} is not a valid task id (letters, digits, '_', "
                                                "'-', '.')"]
    if task.split not in SPLITS:
        problems.append(f"split: expected one of {', '.join(SPLITS)}, got {task.split!r}")
    problems += check_component("environment", env, "environment" if demo.pack is None else "pack.environment",
                                host, base_dir)
    if problems:
        raise SpecError(source, problems)
    return Demo(source, task, env, base_dir, actions, demo.seed, demo.description, demo.expect_answer)


def _stored_episode(path: Path) -> tuple[Path, str, int | None] | None:
    """``RUN_DIR/TASK`` or ``RUN_DIR/TASK/TRIAL`` when RUN_DIR holds a run store."""
    if (path.parent / STORE_FILE).is_file():
        return path.parent, path.name, None
    if path.name.isdigit() and (path.parent.parent / STORE_FILE).is_file():
        return path.parent.parent, path.parent.name, int(path.name)
    return None


def _from_run(run_dir: Path, task_id: str, trial: int | None, *, host: Any) -> Demo:

    source = f"{run_dir}/{task_id}" + (f"/{trial}" if trial is not None else "")
    _spec, pack, _ = load_stored_spec(run_dir)
    store = open_run(run_dir)
    try:
        results = sorted((r for r in store.results(task_id)), key=lambda r: r.trial)
    finally:
        store.close()
    if trial is not None:
        results = [r for r in results if r.trial == trial]
    if not results:
        what = f"task {task_id!r}" + (f" trial {trial}" if trial is not None else "")
        raise AgentsynthError(f"{source}: the run holds no episode of {what}")
    result = results[0]
    task = next((t for t in pack.tasks if t.id == task_id), None)
    if task is None or result.trajectory is None:
        raise AgentsynthError(f"{source}: the stored episode has no trajectory (or its task left the pack)")
    actions: list[Any] = []
    skipped = 0
    for step in result.trajectory.steps:
        if isinstance(step.action, Answer):
            actions.append(step.action)
            break
        if step.invalid or (step.observation is not None and step.observation.error):
            skipped += 1  # a failed call of the agent's: not part of the demonstration
            continue
        assert isinstance(step.action, ToolCall)
        actions.append(ToolCall(step.action.name, dict(step.action.arguments)))
    if not actions:
        raise AgentsynthError(f"{source}: the stored episode has no action")
    notes = [f"left out {skipped} call(s) that failed in the stored episode"] if skipped else []
    demo_task = Task(task.id, task.instruction, split=task.split, tier=task.tier)
    return Demo(source, demo_task, pack.task_environment(task), pack.base_dir, actions, result.seed,
                f"from the stored episode {source} ({result.status})", None, notes)


# --- playing it -----------------------------------------------------------------------------------


async def play(demo: Demo, *, host: Any, timeout: float = 60.0) -> tuple[dict[str, Any], Any]:
    """Run the actions in a fresh world and ask its plugin for the checks: (checks, trajectory).

    The world's sync methods and the hook run on a worker thread, as in an episode: one that
    blocks cannot hold the event loop, so the timeout still ends the demonstration; the world is
    then closed on a fresh thread, not queued behind the stuck call."""
    kind = demo.environment.type
    try:
        env = build("environment", demo.environment, host=host, base_dir=demo.base_dir, task=demo.task)
    except Exception as exc:  # a world that cannot be built is the demonstration's error, named
        raise AgentsynthError(f"{demo.source}: environment {kind!r}: {_why(exc)}") from None
    worker = SyncWorker()
    try:
        return await asyncio.wait_for(_play(demo, host, env, worker), timeout=timeout)
    except TimeoutError:
        raise AgentsynthError(f"{demo.source}: the demonstration did not finish within {timeout:g}s") from None
    finally:
        try:
            await close_world(env, worker)
        except Exception:  # a failing close does not change what the demonstration did
            pass
        finally:
            worker.stop()


def _ask_plugins(hook: Any, kind: str, env: Any, trajectory: Trajectory) -> Any:
    """The hook's answer (a module function: a lambda per call would be kept, world and all, in the
    engine's cache of how to call a function)."""
    return hook(environment=kind, world=env, trajectory=trajectory)


async def _play(demo: Demo, host: Any, env: Any, worker: SyncWorker) -> tuple[dict[str, Any], Any]:
    kind = demo.environment.type
    call = worker.call
    try:
        await call(env.reset, demo.seed)
        tools = list(await call(env.tools))
    except Exception as exc:
        raise AgentsynthError(f"{demo.source}: environment {kind!r} failed to start: {_why(exc)}") from None
    names = {t.name for t in tools}
    traj = Trajectory(demo.task.id, demo.task.instruction)
    traj.tools = tools
    for i, action in enumerate(demo.actions):
        if isinstance(action, Answer):
            traj.steps.append(Step(action, None, i, 0.0))
            break
        where = f"{demo.source}: actions[{i}] ({action.name})"
        if action.name not in names:
            raise AgentsynthError(f"{where}: the world has no tool {action.name!r}"
                                  f"{did_you_mean(action.name, sorted(names))} (tools: {', '.join(sorted(names))})")
        try:
            obs = await call(env.step, action)
        except Exception as exc:
            raise AgentsynthError(f"{where}: the world raised {_why(exc)}") from None
        if obs.error:
            raise AgentsynthError(f"{where}: the world returned an error: {obs.content.strip()[:500]}")
        traj.steps.append(Step(action, obs, i, 0.0))
    hook = getattr(host.pm.hook, HOOK, None)
    result = None
    if hook is not None:
        try:
            result = await call(_ask_plugins, hook, kind, env, traj)
        except ValueError as exc:  # a change the world's plugin cannot check: its message says which
            raise AgentsynthError(f"{demo.source}: {exc}") from None
        except Exception as exc:  # a plugin's bug: named, not a traceback
            raise AgentsynthError(f"{demo.source}: the {kind!r} world's {HOOK} hook failed: {_why(exc)}") from None
    if result is None:
        raise AgentsynthError(f"{demo.source}: no installed plugin writes checks from a demonstration in a "
                              f"{kind!r} world (the {HOOK} hook)")
    return _checked_result(result, demo.source, kind), traj


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, AgentsynthError | ValueError) else str(exc)


def _checked_result(result: Any, source: str, kind: str) -> dict[str, Any]:
    where = f"{source}: the {kind!r} world's {HOOK}"
    if not isinstance(result, dict) or not isinstance(result.get("checkers"), list):
        raise AgentsynthError(f"{where} returned {type(result).__name__}, not a mapping with a 'checkers' list")
    if not isinstance(result.get("changes", 0), int) or not isinstance(result.get("environment", {}), dict):
        raise AgentsynthError(f"{where}: 'changes' must be an int and 'environment' a mapping")
    for i, c in enumerate(result["checkers"]):
        if not isinstance(c, dict) or not isinstance(c.get("type"), str):
            raise AgentsynthError(f"{where}: checkers[{i}] is not a checker spec ({{type: NAME, ...}})")
    return {"changes": int(result.get("changes", 0)), "checkers": list(result["checkers"]),
            "environment": dict(result.get("environment") or {}), "summary": list(result.get("summary") or []),
            "notes": [str(n) for n in result.get("notes") or []]}


# --- writing the pack -----------------------------------------------------------------------------


def answer_checker(answer: str, expect: str | float | None) -> dict[str, Any] | None:
    """The check of a demonstration's answer: the number it states, else its text."""
    from ..builtins.checkers import numbers_in

    if expect is not None:
        if isinstance(expect, int | float) and not isinstance(expect, bool):
            return {"type": "answer_number", "value": float(expect)}
        return {"type": "answer_contains", "text": str(expect), "max_chars": max(300, 4 * len(str(expect)))}
    if not answer.strip():
        return None
    numbers = sorted(set(numbers_in(answer)))
    if len(numbers) == 1:
        return {"type": "answer_number", "value": numbers[0]}
    return {"type": "answer_contains", "text": answer.strip(), "max_chars": max(300, 2 * len(answer))}


def _copy_files(params: dict[str, Any], base_dir: Path, directory: Path) -> dict[str, Any]:
    """The environment's parameters with every relative path to a file or directory copied into
    the pack (the pack stands alone); absolute paths and other values stay as they are."""
    out = dict(params)
    for key, value in params.items():
        if not isinstance(value, str) or "\n" in value or not value.strip() or os.path.isabs(value):
            continue
        src = (base_dir / value.strip()).resolve()
        if not src.exists():
            continue
        try:
            rel = src.relative_to(base_dir.resolve())
        except ValueError:  # outside the demonstration's directory: keep its name only
            rel = Path(src.name)
        dest = directory / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest)
        out[key] = rel.as_posix()
    return out


def render_files(name: str, demo: Demo, checks: dict[str, Any], trajectory: Any, directory: Path,
                 command: str) -> tuple[list[Path], list[str]]:
    """Write pack.yaml, oracle.py and the world's files into ``directory``: (paths, warnings)."""
    import yaml


    warnings: list[str] = []
    checkers = list(checks["checkers"])
    answer = trajectory.final_answer or ""
    if checks["changes"] == 0:
        answer_check = answer_checker(answer, demo.expect_answer)
        if answer_check is None:
            raise AgentsynthError(
                f"{demo.source}: the demonstration changed nothing in the world and gave no answer: checks of its "
                "end state would pass an agent that does nothing. Record a demonstration that changes the world, "
                "or end it with the answer to check ({answer: ...})")
        checkers.append(answer_check)
        warnings.append(f"task {demo.task.id!r} has only answer checks: the demonstration changed nothing in the "
                        f"world, so its {answer_check['type']} check decides, next to the world's checks that "
                        "nothing changed")
    task: dict[str, Any] = {"id": demo.task.id, "split": demo.task.split}
    if demo.task.tier:
        task["tier"] = demo.task.tier
    task["instruction"] = demo.task.instruction
    if checks["environment"]:
        task["environment"] = checks["environment"]
    task["checkers"] = checkers
    env_params = _copy_files(demo.environment.params, demo.base_dir, directory)
    doc = {
        "id": name,
        "description": demo.description or f"Made from the demonstration {demo.source}.",
        "environment": {"type": demo.environment.type, **env_params},
        "oracle": "oracle.py",
        "tasks": [task],
    }
    header = (f"# Generated by `{command}`: the checks pin exactly what the demonstration\n"
              f"# changed ({checks['changes']} change(s)). Check it with `agentsynth pack validate <this dir>`.\n")
    (directory / "pack.yaml").write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True,
                                                                 width=110), encoding="utf-8")
    actions: list[dict[str, Any]] = []
    for action in demo.actions:
        if isinstance(action, Answer):
            actions.append({"answer": action.content})
        else:
            actions.append({"tool": action.name, "arguments": dict(action.arguments)})
    oracle = ('"""The scripted solution: the demonstration\'s actions, replayed (used by `--policy oracle` and\n'
              '`agentsynth pack validate`)."""\n\n'
              f"ORACLE = {pprint.pformat({demo.task.id: actions}, width=100, sort_dicts=False)}\n")
    (directory / "oracle.py").write_text(oracle, encoding="utf-8")
    written = sorted(p for p in directory.rglob("*") if p.is_file())
    return written, warnings


async def _try_pack(directory: Path, host: Any, timeout: float, source: str) -> None:
    """The written pack's oracle passes and an agent that does nothing fails."""

    pack = load_pack(directory, host=host)
    task = pack.tasks[0]
    for policy, want in (("oracle", "passed"), ("noop", "failed")):
        result = await run_episode(host, pack, task, 0, 0, EpisodeConfig(ComponentSpec(policy), timeout=timeout))
        if result.status != want:
            why = result.error or "; ".join(f"{v.checker}: {v.detail}" for v in result.verdicts if
                                            v.passed != (want == "passed"))
            if policy == "oracle":
                raise AgentsynthError(f"{source}: the generated pack's oracle does not pass its checks ({why})")
            raise AgentsynthError(f"{source}: an agent that does nothing passes the generated checks; they would not tell "
                                  f"a demonstration from a no-op ({why})")


def new_from_demo(name: str, ref: str | Path, out: Path | None = None, *, parent: Path = Path("."),
                  host: Any = None, timeout: float = 60.0, echo: Any = click.echo) -> Path:
    """Write pack NAME from the demonstration ``ref`` into ``out`` (default ``parent/NAME``) and
    return its directory. Raises AgentsynthError (nothing written) when any step fails."""
    host = host or get_host()
    if not ID_RE.match(name):
        raise AgentsynthError(f"{name!r} is not a valid pack name (letters, digits, '_', '-', '.')")
    directory = Path(out) if out is not None else Path(parent) / name
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise AgentsynthError(f"{directory}: already exists and is not empty")
    demo = load_demo(ref, host=host)
    checks, trajectory = asyncio.run(play(demo, host=host, timeout=timeout))
    again, _ = asyncio.run(play(demo, host=host, timeout=timeout))
    if again != checks:
        raise AgentsynthError(f"{demo.source}: two replays of the demonstration gave different end states (a "
                              "timestamp, a random value?): checks of one would fail the other")
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.partial-", dir=directory.parent))
    try:
        command = f"agentsynth pack new {name} --from-demo {ref}"
        written, warnings = render_files(name, demo, checks, trajectory, staging, command)
        asyncio.run(_try_pack(staging, host, timeout, demo.source))
        if directory.exists():
            directory.rmdir()  # empty (checked above)
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp made it private
        staging.rename(directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for note in [*demo.notes, *checks["notes"]]:
        echo(f"note: {note}")
    for line in checks["summary"]:
        echo(f"  changed: {line}")
    for path in written:
        echo(f"wrote {directory / path.relative_to(staging)}")
    for warning in warnings:
        echo(f"warning: {warning}", err=True)
    echo(f"next: agentsynth pack validate {directory}")
    return directory


# --- the command ----------------------------------------------------------------------------------


def new_from_demo_option(name: str, demo: str | None, out: Path | None, *, parent: Path, schema: Path | None,
                         environment: str | None) -> None:
    """``pack new NAME --from-demo FILE [-o DIR]`` (what the ``pack new`` command calls)."""
    if demo is None:
        raise click.UsageError("-o/--out is for --from-demo (use --dir for the other kinds of pack)")
    if schema is not None or environment is not None:
        raise click.UsageError("--from-demo takes the world from the demonstration: leave out "
                               + ("--from-schema" if schema is not None else "--env"))
    new_from_demo(name, demo, out, parent=parent)
