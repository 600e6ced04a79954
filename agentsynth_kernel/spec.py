"""Run specs and scenario packs: YAML -> attrs classes through one strict cattrs converter.

Every problem is reported as ``file: path.inside: what was expected``; unknown
keys are errors with a did-you-mean; ``type:`` names are checked against the
registry (and a component's own parameters against its factory or spec_cls).
No traceback reaches the user for bad input: everything raises SpecError.
"""

from __future__ import annotations

import collections.abc
import functools
import hashlib
import inspect
import math
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import attrs
import cattrs
import yaml
from cattrs.cols import list_structure_factory
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.v import format_exception, transform_error

from .errors import AgentsynthError, SpecError, did_you_mean
from .importing import CodeRef, absolute_code_ref, code_ref_problem
from .plugins import PluginHost, Registration, get_host
from .secrets import is_secret_key, remember

SPLITS = ("train", "test")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class InvalidValue(ValueError):
    """A value error whose message is shown to the user as is."""


@attrs.frozen
class Bounds:
    """``Annotated[int, Bounds(low=1)]`` on a factory parameter: the value must be >= ``low``,
    <= ``high`` and > ``above``, checked when the spec is loaded (not when an episode starts)."""

    low: float | None = None
    high: float | None = None
    above: float | None = None

    def problem(self, value: Any) -> str | None:
        """What is wrong with a number (None when it is in range, or not a number)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high) \
                or (self.above is not None and value <= self.above):
            return f"{self.describe()}, got {value!r}"
        return None

    def describe(self) -> str:
        parts = [f">= {self.low:g}" if self.low is not None else "", f"> {self.above:g}" if self.above is not None else "",
                 f"<= {self.high:g}" if self.high is not None else ""]
        return " and ".join(p for p in parts if p)


# --- schema ---------------------------------------------------------------------------------------


@attrs.frozen
class ComponentSpec:
    """``{type: NAME, ...params}`` in YAML (or just ``NAME``): which component, built with what."""

    type: str
    params: dict[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.params}


@attrs.frozen
class Task:
    """One task of a pack: an instruction for the agent and checkers on the world's end state."""

    id: str
    instruction: str
    checkers: list[ComponentSpec] = attrs.field(factory=list)
    split: str = "test"
    tier: str = ""
    environment: dict[str, Any] = attrs.field(factory=dict)
    max_steps: int | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Pack:
    """A scenario pack: one environment, its tasks, and optionally an oracle.

    ``environment`` params are shared by all tasks; a task's ``environment:``
    mapping is merged over them. ``checkers`` here apply to every task.
    """

    id: str
    tasks: list[Task]
    environment: ComponentSpec | None = None
    description: str = ""
    version: str = "1"
    oracle: str | None = None
    system_prompt: str = ""
    checkers: list[ComponentSpec] = attrs.field(factory=list)
    metadata: dict[str, Any] = attrs.field(factory=dict)
    # A pack over a world with no state to read (a stateless server, a Q&A API) declares that its
    # tasks are checked on the answer: `pack validate` then accepts answer checkers alone, and the
    # robustness gate (canned, stuffed and echoed answers) is what vouches for them.
    answer_checked: bool = False
    # set by the loader, not from YAML
    base_dir: Path = attrs.field(default=Path("."), init=False)
    source: str = attrs.field(default="", init=False)
    content_hash: str = attrs.field(default="", init=False)
    _task_envs: dict[int, tuple[Task, ComponentSpec]] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    def task_environment(self, task: Task) -> ComponentSpec:
        """The pack's environment with the task's overrides merged in: the same object for every
        episode of the task, so what is derived from it (a structured spec) is derived once."""
        cached = self._task_envs.get(id(task))
        if cached is None or cached[0] is not task:
            base = self.environment or ComponentSpec("", {})
            merged = {**base.params, **task.environment}
            env_type = merged.pop("type", base.type)
            cached = self._task_envs[id(task)] = (task, ComponentSpec(env_type, merged))
        return cached[1]

    def task_checkers(self, task: Task) -> list[ComponentSpec]:
        return [*self.checkers, *task.checkers]

    @functools.cached_property  # asked once per episode by the oracle policy; it stats a file
    def oracle_path(self) -> Path | None:
        if self.oracle:
            return self.base_dir / self.oracle
        default = self.base_dir / "oracle.py"
        return default if default.is_file() and self.source.endswith("pack.yaml") else None


@attrs.frozen
class Budget:
    """A hard cap on what the run may spend; ``None`` = no cap."""

    usd: float | None = None
    tokens: int | None = None


@attrs.frozen
class RunSpec:
    """What ``agentsynth run spec.yaml`` executes.

    Either ``pack`` (a registered name or a path) or inline ``tasks`` with an
    ``environment``. Each selected task runs ``trials`` times.
    """

    policy: ComponentSpec
    pack: str | None = None
    tasks: list[Task] | None = None
    environment: ComponentSpec | None = None
    oracle: str | None = None
    name: str = ""
    split: str = "all"
    only: list[str] = attrs.field(factory=list)
    trials: int = 1
    seed: int = 0
    concurrency: int = 4
    timeout: float = 300.0
    max_steps: int = 30
    judge: ComponentSpec | None = None
    export: list[ComponentSpec] = attrs.field(factory=list)
    budget: Budget = attrs.field(factory=Budget)
    run_dir: str | None = None
    # A generation spec: the named generator synthesises new tasks / trajectories from the pack
    # (the policy, if given, is its default teacher); the plugin that registered it runs it.
    generate: ComponentSpec | None = None
    # Where episodes run (None: in this process); not part of what an episode does, so it may
    # change between sessions of one run (a run started locally can resume on a cluster).
    executor: ComponentSpec | None = None


# --- converter -------------------------------------------------------------------------------------


def _strict(kind: type, label: str) -> Callable[[Any, type], Any]:
    def hook(value: Any, _: type) -> Any:
        # bool is an int in Python, but `trials: yes` is a mistake, not 1.
        if isinstance(value, bool) and kind is not bool:
            raise InvalidValue(f"expected {label}, got a boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise InvalidValue(f"expected {label}, got {_describe(value)}")
        if isinstance(value, float) and math.isnan(value):
            raise InvalidValue(f"expected {label}, got nan")
        if isinstance(value, dict):
            _string_keys(value)
        return value

    return hook


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _structure_component(value: Any, _: type) -> ComponentSpec:
    if isinstance(value, str):
        return ComponentSpec(value, {})
    if not isinstance(value, Mapping):
        raise InvalidValue(f"expected a mapping with a 'type:' key (or a type name), got {_describe(value)}")
    if "type" not in value:
        raise InvalidValue("missing required key 'type'")
    kind = value["type"]
    if not isinstance(kind, str) or not kind:
        raise InvalidValue(f"'type' must be a name, got {_describe(kind)}")
    return ComponentSpec(kind, {k: v for k, v in _string_keys(value).items() if k != "type"})


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidValue(f"expected a mapping, got {_describe(value)}")
    return _string_keys(value)


def _string_keys(value: Mapping[Any, Any]) -> Mapping[str, Any]:
    for key in value:
        if not isinstance(key, str):
            raise InvalidValue(f"expected a mapping with string keys, got the key {_describe(key)}")
    return value


def _structure_tier(value: Any, _: type) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidValue(f"expected a name or number, got {_describe(value)}")
    return str(value)


def _make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(float, _strict(float, "a number"))
    conv.register_structure_hook(bool, _strict(bool, "true or false"))
    conv.register_structure_hook(ComponentSpec, _structure_component)
    conv.register_structure_hook(Path, lambda v, _: Path(_strict(str, "a path")(v, str)))
    # cattrs would happily turn `args: "abc"` into ['a', 'b', 'c']: a list field takes lists only.
    def strict_list(type_: Any, conv_: cattrs.Converter) -> Callable[[Any, Any], Any]:
        inner = list_structure_factory(type_, conv_)

        def hook(value: Any, t: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                raise InvalidValue(f"expected a list, got {_describe(value)}")
            return inner(value, t)

        return hook

    conv.register_structure_hook_factory(lambda t: getattr(t, "__origin__", None) is list, strict_list)
    mapping_hook = _strict(dict, "a mapping")
    conv.register_structure_hook_func(lambda t: t == dict[str, Any], mapping_hook)
    return conv


converter = _make_converter()


def _strict_attrs(cls: type, **overrides: Any) -> None:
    """Structure ``cls`` from a mapping only, forbidding unknown keys (with field overrides)."""
    fn: Callable[..., Any] = cattrs.gen.make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **overrides)

    def hook(value: Any, type_: type) -> Any:
        return fn(_mapping(value), type_)

    converter.register_structure_hook(cls, hook)


# `tier: 1` and `tier: easy` are both fine.
_strict_attrs(Task, tier=cattrs.gen.override(struct_hook=_structure_tier))
for _cls in (Pack, Budget, RunSpec):
    _strict_attrs(_cls)


def _format(exc: BaseException, type_: type | None) -> str:
    if isinstance(exc, InvalidValue):
        return str(exc)
    if type(exc) is ValueError and str(exc):  # a spec_cls's own check (cattrs would say "invalid value")
        return f"ValueError: {exc}"
    if isinstance(exc, KeyError):
        return "missing required key"
    if isinstance(exc, ForbiddenExtraKeysError):
        names = [f.name for f in attrs.fields(exc.cl) if f.init] if attrs.has(exc.cl) else []
        # one "<key>\t<message>" line per key; _paths appends the key to the path
        return "\n".join(f"{k}\tunknown key{did_you_mean(k, names)}" for k in sorted(exc.extra_fields))
    if isinstance(exc, AttributeError) and str(exc).endswith("has no attribute 'items'"):
        return "expected a mapping"
    return format_exception(exc, type_)


def _paths(messages: list[str], prefix: str = "") -> list[str]:
    """``msg @ $.a[0].b`` -> ``a[0].b: msg`` (prefixed), the shape every agentsynth error has."""
    out = []
    for message in messages:
        text, _, where = message.rpartition(" @ ")
        if not _:
            text, where = message, "$"
        where = where.removeprefix("$").removeprefix(".")
        if prefix:
            where = f"{prefix}.{where}" if where and not where.startswith("[") else f"{prefix}{where}"
        for line in text.split("\n"):
            key, tab, rest = line.partition("\t")
            path, line_text = (f"{where}.{key}" if where else key, rest) if tab else (where, line)
            out.append(f"{path}: {line_text}" if path else line_text)
    return out


def _field_bounds(obj: Any, where: str) -> list[str]:
    """Problems with ``Annotated[..., Bounds(...)]`` fields of an attrs object (a plugin's
    ``spec_cls``): the same check factory parameters get, which structuring alone skips."""
    if not attrs.has(type(obj)):
        return []
    try:
        hints = typing.get_type_hints(type(obj), include_extras=True)
    except Exception:  # an unresolvable annotation: not checked
        return []
    problems = []
    for field in attrs.fields(type(obj)):
        for marker in _markers(hints.get(field.name)):
            if isinstance(marker, Bounds):
                problem = marker.problem(getattr(obj, field.name))
                if problem:
                    problems.append(f"{where}.{field.name}: expected {problem}" if where else f"{field.name}: expected {problem}")
    return problems


def structure(data: Any, cls: type, *, source: str, prefix: str = "") -> Any:
    """Structure ``data`` into ``cls`` or raise SpecError with one path-qualified line per problem."""
    try:
        obj: Any = converter.structure(data, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        raise SpecError(source, _paths(transform_error(exc, format_exception=_format), prefix)) from None
    except (InvalidValue, TypeError, ValueError, AgentsynthError) as exc:  # incl. a spec_cls's own checks
        text = str(exc) if isinstance(exc, (InvalidValue, AgentsynthError)) else f"{type(exc).__name__}: {exc}"
        raise SpecError(source, [f"{prefix}: {text}" if prefix else text]) from None
    bounds = _field_bounds(obj, prefix)
    if bounds:
        raise SpecError(source, bounds)
    return obj


# --- loading ---------------------------------------------------------------------------------------


MAX_FILE_BYTES = 5 * 1024 * 1024  # specs and packs are small; a bigger file is a mistake (or an attack)
MAX_DEPTH = 50  # a real pack nests a dozen levels at most
MAX_VALUES = 1_000_000  # values after YAML aliases are expanded (a "billion laughs" file stops here)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: a 5 MB scalar parses in ~0.1 s


class _WholeReference(str):
    """An unquoted YAML value that is one ``${...}``: it takes the type of what it expands to."""


class _SpecLoader(_Loader):  # type: ignore[misc,valid-type]
    """The safe loader, marking unquoted ``${...}`` values (quoted ones stay strings)."""


_SpecLoader.add_implicit_resolver("!agentsynth/reference", re.compile(r"^\$\{[^{}]*\}$"), ["$"])
_SpecLoader.add_constructor("!agentsynth/reference", lambda loader, node: _WholeReference(loader.construct_scalar(node)))


def read_yaml(path: Path, *, loader: type = _Loader) -> Any:
    """Parse a YAML file; a missing file, a syntax error, a file over 5 MB or nested more than 50
    levels is a SpecError (with line and column for syntax errors), never a hang or a traceback."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise SpecError(str(path), ["file not found"]) from None
    except IsADirectoryError:
        raise SpecError(str(path), ["is a directory, expected a YAML file"]) from None
    except OSError as exc:
        raise SpecError(str(path), [f"cannot read: {exc}"]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise SpecError(str(path), [f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB: not a spec or pack"])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), [f"cannot read: not UTF-8 text ({exc})"]) from None
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(str(path), [f"{where}invalid YAML: {problem}"]) from None
    except RecursionError:
        raise SpecError(str(path), [f"nested more than {MAX_DEPTH} levels deep"]) from None
    except (TypeError, ValueError) as exc:  # e.g. an unhashable key the constructor trips on
        raise SpecError(str(path), [f"invalid YAML: {exc}"]) from None
    check_shape(data, str(path))
    return data


class _ShapeError(Exception):
    def __init__(self, message: str) -> None:
        self.message, self.path = message, ""

    def inside(self, segment: str) -> _ShapeError:
        self.path = segment + ("." + self.path if self.path and not self.path.startswith("[") else self.path)
        return self


def check_shape(data: Any, source: str) -> None:
    """Refuse data nested deeper than MAX_DEPTH, with more than MAX_VALUES values once aliases are
    expanded, or with an alias that contains itself: the structuring code after this recurses."""
    seen: dict[int, tuple[int, int]] = {}  # id(container) -> (values, height): a shared alias is walked once
    active: set[int] = set()
    total = 0

    def walk(node: Any, depth: int) -> tuple[int, int]:
        nonlocal total
        if not isinstance(node, (dict, list)):
            return 1, 0
        key = id(node)
        if key in active:
            raise _ShapeError("a YAML alias contains itself")
        size, height = seen.get(key) or (0, 0)
        if not size:
            if depth >= MAX_DEPTH:
                raise _ShapeError(f"nested more than {MAX_DEPTH} levels deep")
            active.add(key)
            size = 1
            for segment, child in (((str(k), v) for k, v in node.items()) if isinstance(node, dict)
                                   else ((f"[{i}]", v) for i, v in enumerate(node))):
                try:
                    child_size, child_height = walk(child, depth + 1)
                except _ShapeError as exc:
                    raise exc.inside(segment) from None
                size += child_size
                height = max(height, child_height + 1)
            active.discard(key)
            seen[key] = (size, height)
        elif depth + height > MAX_DEPTH:
            raise _ShapeError(f"nested more than {MAX_DEPTH} levels deep")
        total += size
        if total > MAX_VALUES:
            raise _ShapeError(f"more than {MAX_VALUES:,} values (after expanding YAML aliases)")
        return size, height

    try:
        walk(data, 0)
    except _ShapeError as exc:
        raise SpecError(source, [f"{exc.path}: {exc.message}" if exc.path else exc.message]) from None


def read_spec_yaml(path: Path, what: str) -> dict[str, Any]:
    """A spec or pack file as a mapping with its ``${VAR}`` references expanded."""
    data = _top_mapping(read_yaml(path, loader=_SpecLoader), str(path), what)
    return expand_variables(dict(data), str(path))


def _top_mapping(data: Any, source: str, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise SpecError(source, [f"expected a mapping at the top level ({what}), got {_describe(data)}"])
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise SpecError(source, [f"top level: keys must be names, got {_describe(k)}" for k in bad])
    return data


# --- ${VAR} in strings -------------------------------------------------------------------------------

_REFERENCE = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
_VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?::(.*))?$", re.DOTALL)
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
def expand_variables(data: Any, source: str, environ: Mapping[str, str] | None = None) -> Any:
    """``${VAR}`` and ``${VAR:default}`` in every string value (not in keys), ``$${`` for a literal
    ``${``. An unquoted value that is one whole ``${...}`` (read by read_spec_yaml) becomes the
    number or true/false its text spells, as if written in place, so ``trials: ${TRIALS}`` works;
    quoted, it stays a string. An unset variable without a default is a SpecError. What a
    secret-named variable holds is remembered as a secret (see secrets.py), so the run directory
    never holds it (nor values under secret-named keys or URL passwords, masked there too)."""
    env = os.environ if environ is None else environ
    problems: list[str] = []

    def expand(text: str, where: str) -> Any:
        if "$" not in text:
            return text
        pieces: list[str] = []
        position = 0
        for match in _REFERENCE.finditer(text):
            pieces.append(text[position:match.start()])
            position = match.end()
            token = match.group(0)
            if token == "$${":
                pieces.append("${")
                continue
            variable = _VARIABLE.match(match.group(1) or "") if token.endswith("}") else None
            if variable is None:
                problems.append(f"{where}: invalid variable reference {token!r}: expected ${{NAME}} or "
                                f"${{NAME:default}} (write $${{ for a literal ${{)")
                continue
            name, default = variable.group(1), variable.group(2)
            value = env.get(name)
            if value and is_secret_key(name):  # ${DB_PASSWORD}, ${SESSION_SECRET}: masked wherever written
                remember(value)
            elif not value and default is not None:
                value = default
            elif value is None:
                problems.append(f"{where}: environment variable {name} is not set (write ${{{name}:default}} "
                                "for a default)")
                continue
            pieces.append(value)
        pieces.append(text[position:])
        result = "".join(pieces)
        if isinstance(text, _WholeReference) and not problems:
            if _NUMBER.match(result):
                return float(result) if any(c in result for c in ".eE") else int(result)
            if result.lower() in ("true", "false"):
                return result.lower() == "true"
        return result

    def walk(node: Any, where: str) -> Any:
        if isinstance(node, str):
            return expand(node, where)
        if isinstance(node, dict):
            return {k: walk(v, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(node)]
        return node

    expanded = walk(data, "")
    if problems:
        raise SpecError(source, problems)
    return expanded


def content_hash(path: Path) -> str:
    """sha256 over a pack's files (names and bytes), so results can name exactly what they ran."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if "__pycache__" in file.parts or file.suffix in (".pyc", ".db-wal", ".db-shm"):
            continue
        digest.update(str(file.relative_to(path.parent if path.is_file() else path)).encode())
        digest.update(b"\0")
        digest.update(file.read_bytes())
    return "sha256:" + digest.hexdigest()


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
    pack = structure(data, Pack, source=source)
    object.__setattr__(pack, "base_dir", file.parent.resolve())
    object.__setattr__(pack, "source", source)
    object.__setattr__(pack, "content_hash", content_hash(file.parent if file.name == "pack.yaml" else file))
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
        if not pack.task_checkers(task):
            problems.append(f"{where}.checkers: no checker decides this task (add one to the task or the pack)")
    if pack.oracle and not (pack.base_dir / pack.oracle).is_file():
        problems.append(f"{prefix}oracle: file not found: {pack.base_dir / pack.oracle}")
    return problems


CONTEXT_PARAMS = ("base_dir", "task", "pack", "run")


def check_component(kind: str, cspec: ComponentSpec, where: str, host: PluginHost,
                    base_dir: Path | None = None) -> list[str]:
    """Check that ``type:`` is registered and the parameters fit its factory: names, types and
    bounds from its spec_cls or its annotations; code references (``CodeRef``) must exist,
    relative to ``base_dir`` (the folder of the file that names the component)."""
    try:
        reg = host.get(kind, cspec.type)
    except KeyError as exc:
        return [f"{where}.type: {exc.args[0]}"]
    if reg.spec_cls is not None:
        try:
            structure(cspec.params, reg.spec_cls, source="", prefix=where)
        except SpecError as exc:
            return [m.removeprefix(": ") for m in exc.messages]
        return []
    problems = _check_signature(reg, cspec, where)
    try:
        hints = _parameter_hints(reg.factory)
    except TypeError:  # an unhashable factory object: not cached, not checked
        hints = {}
    for key, value in cspec.params.items():
        hint = hints.get(key)
        if hint is None:
            continue
        problems += _type_problems(value, hint, f"{where}.{key}")
        if isinstance(value, str) and CodeRef in _markers(hint):
            problem = code_ref_problem(value, base_dir)
            if problem:
                problems.append(f"{where}.{key}: {problem}")
    return problems


def _check_signature(reg: Registration, cspec: ComponentSpec, where: str) -> list[str]:
    try:
        sig = inspect.signature(reg.factory)
    except (TypeError, ValueError):
        return []
    params = {n: p for n, p in sig.parameters.items() if n not in CONTEXT_PARAMS}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = [
        n for n, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    problems = []
    if not takes_any:
        for key in cspec.params:
            if key not in named:
                problems.append(f"{where}.{key}: unknown key for {reg.kind} {reg.name!r}{did_you_mean(key, named)}")
    for name in named:
        if params[name].default is inspect.Parameter.empty and name not in cspec.params:
            problems.append(f"{where}.{name}: missing required key for {reg.kind} {reg.name!r}")
    return problems


# --- parameter types from a factory's annotations ----------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _parameter_hints(factory: Any) -> dict[str, Any]:
    """Each parameter's annotation, evaluated (``Annotated`` extras kept). One that cannot be
    evaluated (a name imported only for type checkers) is left out: that parameter is not checked."""
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        return dict(typing.get_type_hints(target, include_extras=True))
    except Exception:  # noqa: BLE001 - fall back to one annotation at a time
        pass
    namespace = getattr(inspect.unwrap(target), "__globals__", {})
    hints: dict[str, Any] = {}
    for name, annotation in getattr(target, "__annotations__", {}).items():
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # noqa: S307 - the plugin's own annotation
            except Exception:  # noqa: BLE001
                continue
        hints[name] = annotation
    return hints


def _markers(hint: Any) -> list[Any]:
    """The ``Annotated`` extras of a hint (or of the members of a union of them), as classes and objects."""
    if typing.get_origin(hint) is Annotated:
        extras = list(hint.__metadata__)
        return extras + [type(e) for e in extras]
    if typing.get_origin(hint) in (Union, types.UnionType):
        return [m for member in typing.get_args(hint) for m in _markers(member)]
    return []


_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.MutableSequence,
              collections.abc.Iterable, collections.abc.Collection, collections.abc.Set)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", Path: "a path",
          type(None): "null"}


def _base(hint: Any) -> Any:
    return typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the outer shape of ``hint`` (items are checked by _type_problems)."""
    hint = _base(hint)
    origin = typing.get_origin(hint) or hint
    if hint is None or hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_fits(value, m) for m in typing.get_args(hint))
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in typing.get_args(hint))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    if hint in (str, Path):
        return isinstance(value, str)
    if origin in _SEQUENCES:
        return isinstance(value, list)
    if origin in _MAPPINGS:
        return isinstance(value, Mapping)
    return True  # Any, object, classes, callables ...: not checked here


def _type_name(hint: Any) -> str:
    hint = _base(hint)
    origin = typing.get_origin(hint) or hint
    if origin in (Union, types.UnionType):
        names = [_type_name(m) for m in typing.get_args(hint)]
        return " or ".join(dict.fromkeys(names))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if hint is None:
        return "null"
    if origin in _SEQUENCES:
        return "a list"
    if origin in _MAPPINGS:
        return "a mapping"
    try:
        return _NAMES[hint]
    except (KeyError, TypeError):
        return getattr(hint, "__name__", str(hint))


def _type_problems(value: Any, hint: Any, where: str) -> list[str]:
    """What is wrong with ``value`` against an annotation: type, items, and ``Bounds`` extras."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        problems = _type_problems(value, args[0], where)
        for mark in args[1:]:
            problem = mark.problem(value) if isinstance(mark, Bounds) and not problems else None
            if problem:
                problems.append(f"{where}: expected {_type_name(args[0])} {problem}")
        return problems
    if origin in (Union, types.UnionType):
        fitting = [m for m in args if _fits(value, m)]
        if not fitting:
            return [f"{where}: expected {_type_name(hint)}, got {_describe(value)}"]
        results = [_type_problems(value, m, where) for m in fitting]
        return [] if any(not r for r in results) else results[0]
    if not _fits(value, hint):
        return [f"{where}: expected {_type_name(hint)}, got {_describe(value)}"]
    if origin in _SEQUENCES and args:
        if origin is tuple and args[-1] is not Ellipsis:
            if len(value) != len(args):
                return [f"{where}: expected a list of {len(args)} values, got {len(value)}"]
            return [p for i, (v, h) in enumerate(zip(value, args, strict=True)) for p in _type_problems(v, h, f"{where}[{i}]")]
        return [p for i, v in enumerate(value) for p in _type_problems(v, args[0], f"{where}[{i}]")]
    if origin in _MAPPINGS and len(args) == 2:
        return [p for k, v in value.items() for p in _type_problems(v, args[1], f"{where}.{k}")]
    return []


@functools.lru_cache(maxsize=1024)
def _parameter_names(factory: Any) -> frozenset[str]:
    """The keyword names a factory takes (cached: build() runs for every component of every episode)."""
    try:
        return frozenset(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return frozenset()


# id(ComponentSpec) -> (that ComponentSpec, its params structured into a *frozen* spec_cls instance).
# A pack's component specs are built again for every episode; structuring them once is enough.
_structured_cache: dict[int, tuple[ComponentSpec, type, Any]] = {}


def _structured(cspec: ComponentSpec, spec_cls: type, source: str) -> Any:
    cached = _structured_cache.get(id(cspec))
    if cached is not None and cached[0] is cspec and cached[1] is spec_cls:
        return cached[2]
    spec = structure(cspec.params, spec_cls, source=source)
    if _is_frozen(spec) and len(_structured_cache) < 4096:  # a mutable spec could be changed by its factory
        _structured_cache[id(cspec)] = (cspec, spec_cls, spec)
    return spec


def _is_frozen(obj: Any) -> bool:
    fields = attrs.fields(type(obj))
    if not fields:
        return True
    try:
        setattr(obj, fields[0].name, getattr(obj, fields[0].name))
    except attrs.exceptions.FrozenInstanceError:
        return True
    return False


def build(kind: str, cspec: ComponentSpec, *, host: PluginHost | None = None, **context: Any) -> Any:
    """Build a component from its spec. Context values (``base_dir``, ``task``, ``pack``, ``run``) are
    passed only to factories that declare them. The object is stamped with what built it, so a
    run can be rebuilt from its records (``__agentsynth_info__``)."""
    host = host or get_host()
    reg = host.get(kind, cspec.type)
    if reg.spec_cls is not None:
        args: tuple[Any, ...] = (_structured(cspec, reg.spec_cls, f"{kind} {cspec.type!r}"),)
        kwargs: dict[str, Any] = {}
    else:
        args, kwargs = (), dict(cspec.params)
    accepted = _parameter_names(reg.factory)
    for key, value in context.items():
        if key in accepted and value is not None:
            kwargs[key] = value
    component = reg.factory(*args, **kwargs)
    try:
        component.__agentsynth_info__ = {"plugin": reg.plugin, "kind": kind, "name": reg.name, "params": cspec.params}
    except (AttributeError, TypeError):  # slotted or builtin objects cannot be stamped
        pass
    return component


def load_run_spec(path: str | Path, *, host: PluginHost | None = None, overrides: Mapping[str, Any] | None = None) -> tuple[RunSpec, Pack]:
    """Load ``spec.yaml`` and the pack it names (or its inline tasks); validate everything."""
    host = host or get_host()
    path = Path(path)
    source = str(path)
    data = read_spec_yaml(path, "a run spec")
    data.update(overrides or {})
    if "generate" in data:  # a generation spec needs no policy of its own
        data.setdefault("policy", "noop")
    spec = structure(data, RunSpec, source=source)
    return spec, resolve_pack(spec, base_dir=path.parent, source=source, host=host)


def resolve_pack(spec: RunSpec, *, base_dir: Path, source: str, host: PluginHost) -> Pack:
    """The pack a run spec selects, with every component name checked."""
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
        pack = Pack(id=spec.name or Path(source).stem, tasks=list(spec.tasks or []),
                    environment=spec.environment, oracle=spec.oracle)
        object.__setattr__(pack, "base_dir", base_dir.resolve())
        object.__setattr__(pack, "source", source)
        object.__setattr__(pack, "content_hash", content_hash(Path(source)))
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
    # found from its folder, wherever the pack lives; the loader finishes the spec as it does a Pack.
    for field in ("policy", "judge"):
        cspec = getattr(spec, field)
        if cspec is not None:
            object.__setattr__(spec, field, absolute_code_refs(field, cspec, base_dir, host))
    return pack


MAX_TRIALS = 10_000
MAX_CONCURRENCY = 4096
MAX_STEPS = 100_000
MAX_TIMEOUT = 7 * 24 * 3600.0


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


def absolute_code_refs(kind: str, cspec: ComponentSpec, base_dir: Path, host: PluginHost) -> ComponentSpec:
    """``cspec`` with its relative ``file.py:attr`` parameters (those marked ``CodeRef``) made
    absolute against ``base_dir``, so they resolve the same wherever the pack lives."""
    try:
        reg = host.get(kind, cspec.type)
        hints = {} if reg.spec_cls is not None else _parameter_hints(reg.factory)
    except (KeyError, TypeError):
        return cspec
    params = {
        key: absolute_code_ref(value, base_dir)
        if isinstance(value, str) and key in hints and CodeRef in _markers(hints[key]) else value
        for key, value in cspec.params.items()
    }
    return cspec if params == cspec.params else ComponentSpec(cspec.type, params)


def select_tasks(spec: RunSpec, pack: Pack) -> list[Task]:
    """The tasks a run executes: the split, then the ``only`` list, in pack order."""
    tasks = [t for t in pack.tasks if spec.split == "all" or t.split == spec.split]
    if spec.only:
        wanted = set(spec.only)
        tasks = [t for t in tasks if t.id in wanted]
    return tasks


converter.register_unstructure_hook(ComponentSpec, ComponentSpec.to_dict)


def unstructure(obj: Any) -> Any:
    """A spec object as plain data (for the run store and reports)."""
    return converter.unstructure(obj)


# --- component specs from the command line ----------------------------------------------------------


def parse_component(text: str, *, option: str = "--policy") -> Any:
    """A ComponentSpec (a policy, an executor ...) as given on a command line: ``NAME``, ``NAME,key=value,...``, inline YAML ``{type: ..., ...}``
    or a YAML file holding such a mapping."""
    import yaml


    text = text.strip()
    if not text:
        raise SpecError(option, ["expected a policy name, e.g. 'oracle'"])
    path = Path(text)
    if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
        data = read_yaml(path)
        if isinstance(data, dict) and "policy" in data and "type" not in data:
            data = data["policy"]
        return structure(data, ComponentSpec, source=str(path), prefix="policy")
    if text.startswith("{"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SpecError(option, [f"invalid inline YAML: {getattr(exc, 'problem', exc)}"]) from None
        return _absolute_files(structure(data, ComponentSpec, source=option))
    name, *pairs = [p.strip() for p in text.split(",")]
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SpecError(option, [f"{pair!r}: expected key=value (e.g. 'llm,model=openai/gpt-4o-mini')"])
        try:
            params[key.strip()] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            params[key.strip()] = value
    return _absolute_files(ComponentSpec(name, params))


def _absolute_files(cspec: Any) -> Any:
    """``function: agent.py:act`` given on the command line means agent.py in the current directory."""
    function = cspec.params.get("function")
    if isinstance(function, str) and ".py:" in function:
        file, _, attr = function.rpartition(":")
        if not Path(file).is_absolute() and Path(file).is_file():
            return ComponentSpec(cspec.type, {**cspec.params, "function": f"{Path(file).resolve()}:{attr}"})
    return cspec
