"""Loading packs and run specs: files -> checked ``Pack`` / ``RunSpec`` objects, with every
component name and run setting checked before anything runs."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ..errors import SpecError, did_you_mean
from ..plugins import PluginHost, get_host
from .loader import content_hash, read_spec_yaml
from .params import absolute_code_refs, check_component
from .schema import _ID_RE, SPLITS, ComponentSpec, Pack, RunSpec, Task, UserSpec
from .structuring import structure

MAX_TRIALS = 1_000_000  # a one-task pack to 1M episodes (long runs stay flat: benchmarks/bench_scale.py)
MAX_CONCURRENCY = 4096
MAX_STEPS = 100_000
MAX_TIMEOUT = 7 * 24 * 3600.0


def located(pack: Pack, *, base_dir: Path, source: str, content_hash: str) -> Pack:
    """A copy of ``pack`` that knows where it was loaded from: its folder (relative paths in it
    resolve there), its file and its content hash (results name what they ran).

    These fields are ``init=False`` so that they are not pack.yaml keys (structuring, the reference
    page and ``unstructure`` skip them), hence not arguments of ``attrs.evolve``: they are set on
    the new copy, which nothing else holds yet, as attrs's own ``__init__`` sets the fields of a
    frozen class. ``pack`` itself is not changed."""
    out = attrs.evolve(pack)
    for name, value in (("base_dir", base_dir), ("source", source), ("content_hash", content_hash)):
        object.__setattr__(out, name, value)
    return out


def load_pack(ref: str | Path, *, host: PluginHost | None = None, validate: bool = True) -> Pack:
    """Load a pack by registered name or by path (a directory with pack.yaml, or a YAML file)."""
    host = host or get_host()
    path = Path(ref)
    if not path.exists():
        if isinstance(ref, str) and ref in host.registry["pack"]:
            path = host.registry["pack"][ref].factory
        else:
            known = host.names("pack")
            raise SpecError(
                str(ref), [f"no such pack: not a file or directory, nor a registered pack{did_you_mean(str(ref), known)}"]
            )
    file = path / "pack.yaml" if path.is_dir() else path
    if path.is_dir() and not file.is_file():
        raise SpecError(str(path), ["pack directory has no pack.yaml"])
    source = str(file)
    data = read_spec_yaml(file, "a pack")
    if isinstance(data.get("id"), str) and not _ID_RE.match(data["id"]):  # it names run directories
        raise SpecError(source, [f"id: {data['id']!r} is not a valid id (letters, digits, '_', '-', '.')"])
    data.setdefault("id", file.parent.name if file.name == "pack.yaml" else file.stem)
    pack = located(structure(data, Pack, source=source), base_dir=file.parent.resolve(), source=source,
                   content_hash=content_hash(file.parent if file.name == "pack.yaml" else file))
    if validate:
        problems = check_pack(pack, host)
        if problems:
            raise SpecError(source, problems)
    return pack


def check_pack(pack: Pack, host: PluginHost, prefix: str = "") -> list[str]:
    """Semantic checks the schema cannot express: ids, splits, and every ``type:`` name."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    base = pack.base_dir
    if pack.environment is not None:
        problems += check_component("environment", pack.environment, f"{prefix}environment", host, base)
    for i, cspec in enumerate(pack.checkers):
        problems += check_component("checker", cspec, f"{prefix}checkers[{i}]", host, base)
    if not pack.tasks:
        problems.append(f"{prefix}tasks: a pack needs at least one task")
    for i, task in enumerate(pack.tasks):
        where = f"{prefix}tasks[{i}]"
        if not _ID_RE.match(task.id):
            problems.append(f"{where}.id: {task.id!r} is not a valid id (letters, digits, '_', '-', '.')")
        if task.id in seen:
            problems.append(f"{where}.id: duplicate task id {task.id!r} (also tasks[{seen[task.id]}])")
        seen.setdefault(task.id, i)
        if task.split not in SPLITS:
            problems.append(f"{where}.split: expected one of {', '.join(SPLITS)}, got {task.split!r}")
        env = pack.task_environment(task)
        if not env.type:
            problems.append(f"{where}.environment: no environment type (set 'environment: {{type: ...}}' on the pack)")
        elif task.environment:
            problems += check_component("environment", env, f"{where}.environment", host, base)
        for j, cspec in enumerate(task.checkers):
            problems += check_component("checker", cspec, f"{where}.checkers[{j}]", host, base)
        if task.max_steps is not None and not 1 <= task.max_steps <= MAX_STEPS:
            problems.append(f"{where}.max_steps: expected an integer >= 1 and <= {MAX_STEPS}, got {task.max_steps}")
        if task.user is not None:
            problems += user_problems(task.user, f"{where}.user", host, base)
        if not pack.task_checkers(task):
            problems.append(f"{where}.checkers: no checker decides this task (add one to the task or the pack)")
    if pack.oracle and not (pack.base_dir / pack.oracle).is_file():
        problems.append(f"{prefix}oracle: file not found: {pack.base_dir / pack.oracle}")
    return problems



MAX_USER_TURNS = 1_000


def user_problems(user: UserSpec, where: str, host: PluginHost, base: Path) -> list[str]:
    """A simulated user must be played by something, within sane bounds, by components that exist."""
    problems = []
    if user.script is not None and user.policy is not None:
        problems.append(f"{where}: give either 'script' or 'policy', not both")
    elif user.script is None and user.policy is None:
        problems.append(f"{where}: give 'script' (scripted turns) or 'policy' (who plays the user)")
    if not 1 <= user.max_turns <= MAX_USER_TURNS:
        problems.append(f"{where}.max_turns: expected an integer >= 1 and <= {MAX_USER_TURNS:,}, got {user.max_turns}")
    if user.policy is not None:
        problems += check_component("policy", user.policy, f"{where}.policy", host, base)
    for j, cspec in enumerate(user.checks):
        problems += check_component("checker", cspec, f"{where}.checks[{j}]", host, base)
    for key, value in (("usd", user.budget.usd), ("tokens", user.budget.tokens)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            problems.append(f"{where}.budget.{key}: expected a number >= 0, got {value}")
    return problems


def run_settings_problems(spec: RunSpec) -> list[str]:
    """The run's numbers must make sense: an absurd value would run (or fail) every episode."""
    problems = []
    for key, value, high in (("trials", spec.trials, MAX_TRIALS), ("concurrency", spec.concurrency, MAX_CONCURRENCY),
                             ("max_steps", spec.max_steps, MAX_STEPS)):
        if not 1 <= value <= high:
            problems.append(f"{key}: expected an integer >= 1 and <= {high:,}, got {value}")
    if not (math.isfinite(spec.timeout) and 0 < spec.timeout <= MAX_TIMEOUT):
        problems.append(f"timeout: expected seconds > 0 and <= {MAX_TIMEOUT:g} (7 days), got {spec.timeout}")
    if not -(2**63) <= spec.seed < 2**63:
        problems.append(f"seed: expected a 64-bit integer, got {spec.seed}")
    if spec.budget.usd is not None and not (math.isfinite(spec.budget.usd) and spec.budget.usd >= 0):
        problems.append(f"budget.usd: expected a number >= 0, got {spec.budget.usd}")
    if spec.budget.tokens is not None and spec.budget.tokens < 0:
        problems.append(f"budget.tokens: expected an integer >= 0, got {spec.budget.tokens}")
    return problems


def load_run_spec(path: str | Path, *, host: PluginHost | None = None, overrides: Mapping[str, Any] | None = None) -> tuple[RunSpec, Pack]:
    """Load ``spec.yaml`` and the pack it names (or its inline tasks); validate everything."""
    host = host or get_host()
    path = Path(path)
    source = str(path)
    data = read_spec_yaml(path, "a run spec")
    data.update(overrides or {})
    if "generate" in data:  # a generation spec needs no policy of its own
        data.setdefault("policy", "noop")
    return resolve_run(structure(data, RunSpec, source=source), base_dir=path.parent, source=source, host=host)


def resolve_pack(spec: RunSpec, *, base_dir: Path, source: str, host: PluginHost) -> Pack:
    """The pack a run spec selects, with every component name checked. Kept for callers that run
    ``spec`` itself afterwards: it also finishes ``spec`` in place (its policy's and judge's code
    files made absolute, as :func:`resolve_run` returns them). New code: use :func:`resolve_run`,
    which leaves the given spec alone."""
    finished, pack = resolve_run(spec, base_dir=base_dir, source=source, host=host)
    for field in ("policy", "judge"):
        object.__setattr__(spec, field, getattr(finished, field))
    return pack


def resolve_run(spec: RunSpec, *, base_dir: Path, source: str, host: PluginHost) -> tuple[RunSpec, Pack]:
    """The run spec as a run uses it, and the pack it selects, with every component name checked.
    The returned spec is a new one (``spec`` is not changed): its policy's and judge's code files
    are absolute, found from ``base_dir`` (the spec's folder), wherever the pack lives."""
    problems: list[str] = []
    # a generation spec may need no pack at all (a text domain's challenger loop): an empty one
    packless = spec.generate is not None and spec.pack is None and spec.tasks is None
    if (spec.pack is None) == (spec.tasks is None) and not packless:
        raise SpecError(source, ["pack: give either 'pack:' (a name or path) or inline 'tasks:', not both or neither"])
    if spec.pack is not None:
        ref: str | Path = spec.pack
        if (base_dir / spec.pack).exists():
            ref = base_dir / spec.pack
        elif spec.pack not in host.registry["pack"]:
            # a name this machine does not have: a hub may have it (bench --hub URL, or AGENTSYNTH_HUB_URL)
            hub = os.environ.get("AGENTSYNTH_HUB_URL", "")
            remote = host.pm.hook.resolve_remote_pack(ref=spec.pack, hub=hub) if hub else None
            if remote is None:
                where = f", nor on the hub {hub}" if hub else ""
                raise SpecError(source, [f"pack: no such pack {spec.pack!r}: not a file or directory (from {base_dir}), "
                                         f"nor a registered pack{where}{did_you_mean(spec.pack, host.names('pack'))}"])
            ref = Path(remote)
        pack = load_pack(ref, host=host)
        if spec.environment is not None:
            problems.append("environment: set in the pack; 'environment:' here is only for inline tasks")
    else:
        pack = located(Pack(id=spec.name or Path(source).stem, tasks=list(spec.tasks or []),
                            environment=spec.environment, oracle=spec.oracle),
                       base_dir=base_dir.resolve(), source=source, content_hash=content_hash(Path(source)))
        if not packless:
            problems += check_pack(pack, host)
    problems += check_component("policy", spec.policy, "policy", host, base_dir)
    if spec.judge is not None:
        problems += check_component("judge", spec.judge, "judge", host, base_dir)
    if spec.executor is not None:
        problems += check_component("executor", spec.executor, "executor", host, base_dir)
    if spec.generate is not None:  # only the name: the generator's plugin checks its parameters
        try:
            host.get("generator", spec.generate.type)
        except KeyError as exc:
            problems.append(f"generate.type: {exc.args[0]}")
    for i, exp in enumerate(spec.export):
        # `path:` is the engine's (where to write); the rest goes to the exporter's factory
        if not isinstance(exp.params.get("path"), str) or not exp.params["path"]:
            problems.append(f"export[{i}].path: missing required key (the file or directory to write)")
        params = {k: v for k, v in exp.params.items() if k != "path"}
        problems += check_component("exporter", ComponentSpec(exp.type, params), f"export[{i}]", host, base_dir)
    if spec.split not in (*SPLITS, "all"):
        problems.append(f"split: expected one of train, test, all, got {spec.split!r}")
    problems += run_settings_problems(spec)
    ids = {t.id for t in pack.tasks}
    for i, task_id in enumerate(spec.only):
        if task_id not in ids:
            problems.append(f"only[{i}]: no task {task_id!r} in pack {pack.id!r}{did_you_mean(task_id, ids)}")
    if problems:
        raise SpecError(source, problems)
    # The policy and judge were named by this spec (or the command line): their code files are
    # found from its folder, wherever the pack lives.
    judge = absolute_code_refs("judge", spec.judge, base_dir, host) if spec.judge is not None else None
    return attrs.evolve(spec, policy=absolute_code_refs("policy", spec.policy, base_dir, host), judge=judge), pack



def select_tasks(spec: RunSpec, pack: Pack) -> list[Task]:
    """The tasks a run executes: the split, then the ``only`` list, in pack order."""
    tasks = [t for t in pack.tasks if spec.split == "all" or t.split == spec.split]
    if spec.only:
        wanted = set(spec.only)
        tasks = [t for t in tasks if t.id in wanted]
    return tasks
