"""Write the reference pages under docs/ from the code, so that they cannot drift from it.

Kernel pages (the same in every venv): ``docs/README.md`` (the index), ``docs/hooks.md`` (through
gen_hook_docs.py), and under ``docs/reference/``: ``pack.md`` (pack.yaml and the oracle),
``run-spec.md``, ``protocols.md`` (the component protocols and records), ``world-state.md``,
``api.md`` (the public Python names) and ``cli.md`` (the kernel's commands). Component pages (``docs/reference/components/<kinds>.md``)
list every component the *installed* plugins register, so they are generated and checked with
every plugin installed (the ``together`` session).

Keys, types, defaults and bounds come from the attrs / msgspec classes, spec classes and factory
annotations; a key's doc is the comment above (or beside) its field or parameter in the source,
else an ``Args:`` entry or a ````key``: text`` phrase of the class docstring. Sphinx roles
in docstrings (``:class:`~pkg.mod.Name```, ``:func:``...) become Markdown links to these pages.
Output is deterministic: sorted, no absolute paths, no versions.

Run:   .nox/together/bin/python scripts/gen_reference.py           (write every page)
       python scripts/gen_reference.py --check [--kernel-only]       (exit 1 naming stale pages)
Tests: tests/test_reference_docs.py (kernel pages), tests/integration/test_docs.py (all pages).
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.util
import inspect
import io
import posixpath
import re
import sys
import sysconfig
import tempfile
import textwrap
import tokenize
import types
import typing
from collections.abc import Callable, Iterable
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal, Union

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import agentsynth_kernel as ak  # noqa: E402

CONTEXT = {"base_dir", "task", "pack", "run", "self"}  # handed in by the kernel, never written in YAML

# kind -> (page title, what the YAML key is, protocol); the order of the index
KIND_PAGES: dict[str, tuple[str, str, str | None]] = {
    "environment": ("Environments", "`environment: {type: NAME, ...}` in pack.yaml (or a run spec with inline tasks)",
                    "Environment"),
    "checker": ("Checkers", "each entry of `checkers:` in pack.yaml (pack-wide or per task)", "Checker"),
    "policy": ("Policies", "`policy:` in a run spec, or `--policy NAME,key=value`", "Policy"),
    "judge": ("Judges", "`judge:` in a run spec", "Judge"),
    "generator": ("Generators", "`generate:` in a run spec (`agentsynth run`)", "Generator"),
    "exporter": ("Exporters", "each entry of `export:` in a run spec (with the engine's own `path:`)", "Exporter"),
    "importer": ("Importers", "a foreign trace format read as trajectories (`--format NAME` of a command that imports "
                              "traces)", "Importer"),
    "executor": ("Executors", "`executor:` in a run spec, or `--executor NAME`", "Executor"),
    "domain": ("Domains", "text-only task families for the generators that need no world", "Domain"),
    "pack": ("Packs", "`pack: NAME` in a run spec, or `agentsynth bench --pack NAME`", None),
}



def page_of(kind: str) -> str:
    """The component page of a kind, under docs/ (``reference/components/policies.md``)."""
    title = KIND_PAGES[kind][0] if kind in KIND_PAGES else f"{kind}s"
    return f"reference/components/{title.lower()}.md"


PROTOCOLS = ("Environment", "Checker", "Policy", "Judge", "Generator", "Exporter", "Importer", "Executor", "Domain")
RECORDS = ("Verdict", "Observation", "Action", "ToolCall", "Answer", "ToolSpec", "Turn", "Step", "Trajectory",
           "EpisodeResult", "Status", "Usage", "Message", "EpisodeState", "JudgeResult")

# A key's doc when its field has no comment in the source ("Class.field": "text"). Empty since the
# kernel's classes document every key beside its field; a comment, when there is one, wins.
FIELD_DOCS: dict[str, str] = {}

ORACLE = """\
The oracle is the scripted solution of every task, used by `--policy oracle` and by
`agentsynth pack validate` (which needs it to pass 100 %). It is a Python file, `oracle.py` next to
pack.yaml (or the file named by `oracle:`), that defines either a table or a function:

```python
ORACLE = {"task-id": [{"tool": "sql_execute", "arguments": {"sql": "..."}}, {"answer": "done"}]}

def solve(task):  # called per episode with the Task; return the same kind of list
    return [{"tool": "...", "arguments": {...}}, {"answer": "..."}]
```

`solve` wins when both are defined; a task missing from `ORACLE` fails its episode. Each action is
one of:

| form | meaning |
|---|---|
| `{"tool": NAME, "arguments": {...}}` | a tool call (`"id": ...` optional) |
| `{"name": NAME, "args": {...}}` | the same, other spelling |
| `{"answer": TEXT}` | the final answer (ends the episode) |
| a `ToolCall` / `Answer` object | as is |

A script that does not end with an answer gets an empty one. `solve` runs for every episode, so a
nondeterministic oracle shows in the `determinism` gate. The file runs as ordinary Python:
`sys.exit()` or an exception in it fails the episode, and an oracle that hangs at import runs into
the episode's `timeout`.
"""

WORLD_STATE_INTRO = """\
agentsynth is *outcome-verified*: a task passes when the world ends up in the state the task asks
for, not when the agent says it is done. A checker **reads the world's end state** when its verdict
depends on the environment after the episode: the rows in the SQLite file, the DOM of the page, a
file in the sandbox, the record behind a REST API. Its `check(env, trajectory)` is called while the
environment is still open, so it can query it. A checker that decides from the trajectory alone
(which tools were called, what the final answer says) reads what the agent *said*, and an agent can
say anything.

## Why the pack gate needs one

`agentsynth pack validate` refuses a task none of whose checkers reads the world's end state (the
`world-state-checkers` gate): such a task can be passed by an agent that calls the right tool with
the wrong arguments, or that claims success. A benchmark score or a training example from that task
would measure talk, not work. The gate is the first line; the `floors` gate (the `noop`, `random`
and `claim_success` policies must pass nothing) and the `robustness` gate (the adversarial kit's
exploits must farm nothing) check that the world-state checkers really depend on the agent's work.

A pack over a world with no state to read (a stateless server, a question-answering API) declares
`answer_checked: true` in pack.yaml: the gate then accepts answer checkers alone, and the robustness
gate (canned, stuffed and echoed answers) is what vouches for them.
"""

WORLD_STATE_DECLARE = """\
## Declaring it in a checker

The attribute is read from the **registered factory**, not from the built object:

```python
class RowCount:
    world_state = True          # reads the world: counts rows in the episode's database

    def check(self, env, trajectory): ...

class AnswerMentions:
    world_state = False         # a plugin checker that reads only the answer must say so

class Wrapper:                  # the answer depends on the parameters (a checker wrapping another)
    @staticmethod
    def world_state_for(params):
        return is_world_state(ComponentSpec(params["checker"]["type"]), get_host())
```

A plugin checker that declares nothing counts as reading the world (the plugin knows its world);
the kernel's own checkers (plugin `{builtins}`) read the trajectory. A factory that is a function
(a registration with `spec_cls=`) carries the attribute itself: `make_checker.world_state = False`.
To test the decision: `is_world_state(ComponentSpec("NAME"), get_host())`.
"""


# --- text helpers ---------------------------------------------------------------------------------


def _replacements(values: bool) -> list[tuple[str, str]]:
    """Machine-specific prefixes that must never reach a page (longest first). The temporary and
    home directories only in values: a docstring may well talk about ``/tmp``."""
    pairs = [(str(ROOT), "<repo>"), (sys.prefix, "<venv>"), (sys.base_prefix, "<python>"),
             (sysconfig.get_paths()["purelib"], "<site-packages>")]
    if values:
        pairs += [(tempfile.gettempdir(), "<tmp>"), (str(Path.home()), "~")]
    return sorted({(a, b) for a, b in pairs if a and a != "/"}, key=lambda p: -len(p[0]))


def scrub(text: str, *, values: bool = False) -> str:
    """Remove what changes per machine or per run: absolute paths and object addresses."""
    for prefix, placeholder in _replacements(values):
        text = text.replace(prefix, placeholder)
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def doc_of(obj: Any, *, inherited: bool = False) -> str:
    """An object's own docstring, dedented ("" when it has none; a class does not get its base's)."""
    raw = inspect.getdoc(obj) if inherited else (obj.__dict__.get("__doc__") if isinstance(obj, type)
                                                  else getattr(obj, "__doc__", None))
    return inspect.cleandoc(raw) if isinstance(raw, str) else ""


def first_paragraph(text: str) -> str:
    return text.split("\n\n", 1)[0].replace("\n", " ").strip()


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\n", " ").replace("|", "\\|")


def code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def anchor(name: str) -> str:
    return re.sub(r"[^a-z0-9_\-.]", "-", name.lower())


def heading(level: int, title: str, anchor_id: str) -> list[str]:
    """A heading with an explicit anchor (GitHub's own anchors mangle code and punctuation)."""
    return [f'<a id="{anchor_id}"></a>', "", f"{'#' * level} {title}", ""]


# --- types, defaults, field docs ------------------------------------------------------------------


def type_text(tp: Any) -> str:
    """A readable annotation: no module prefixes, unions with ``|``, ``Annotated`` extras dropped."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        return type_text(args[0])
    if tp is None or tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if tp is Ellipsis:
        return "..."
    if isinstance(tp, list):
        return "[" + ", ".join(type_text(a) for a in tp) + "]"
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is Literal:
        return "Literal[" + ", ".join(repr(a) for a in args) + "]"
    if origin is not None:
        name = getattr(origin, "__name__", None) or _unqualified(repr(origin))
        return f"{name}[{', '.join(type_text(a) for a in args)}]" if args else name
    if isinstance(tp, typing.ForwardRef):
        return _unqualified(tp.__forward_arg__)
    if isinstance(tp, str):
        return _unqualified(tp)
    if isinstance(tp, (type, typing.TypeVar)):
        return tp.__name__
    return _unqualified(repr(tp))


def _unqualified(text: str) -> str:
    text = re.sub(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])", "", text)
    return text.replace("NoneType", "None")


def markers(tp: Any) -> list[Any]:
    """The ``Annotated`` extras anywhere in an annotation."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        return [*tp.__metadata__, *markers(args[0])]
    return [m for a in args for m in markers(a)] if origin in (Union, types.UnionType) else []


def bounds_text(tp: Any) -> str:
    parts = []
    for mark in markers(tp):
        if isinstance(mark, ak.Bounds):
            parts.append(" and ".join(f"{op} {_number(getattr(mark, key))}" for key, op in
                                      (("low", ">="), ("above", ">"), ("high", "<="))
                                      if getattr(mark, key, None) is not None))
        elif isinstance(mark, ak.CodeRef):
            parts.append("code reference (`file.py:name` or `module:name`)")
    return "; ".join(p for p in parts if p)


def _number(value: float) -> str:
    """A bound as people read it: ``67,108,864``, ``0.1``."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _stable_repr(value: Any) -> str:
    """``repr`` with sets sorted: a set of strings iterates in a per-process hash order."""
    if isinstance(value, (set, frozenset)):
        items = ", ".join(sorted(_stable_repr(v) for v in value))
        if not value:
            return "set()" if isinstance(value, set) else "frozenset()"
        return f"{{{items}}}" if isinstance(value, set) else f"frozenset({{{items}}})"
    if isinstance(value, tuple):
        inner = ", ".join(_stable_repr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_stable_repr(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_stable_repr(k)}: {_stable_repr(v)}" for k, v in value.items()) + "}"
    return repr(value)


def shown(value: Any) -> str:
    if isinstance(value, PurePath):  # PosixPath('.') here, WindowsPath('.') elsewhere
        value = str(value)
    if inspect.isroutine(value) or inspect.isclass(value):  # a function's repr has its address
        return str(getattr(value, "__qualname__", None) or getattr(value, "__name__", "(a function)"))
    text = _stable_repr(value)
    if " at 0x" in text or text.startswith("<object object"):
        return "(not given)"  # a sentinel object: its address changes per run
    text = scrub(text, values=True)
    return text if len(text) <= 120 else text[:119] + "…"


def attrs_default(field: Any) -> str:
    if field.default is attrs.NOTHING:
        return "required"
    if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
        if field.default.takes_self:
            return "(computed)"
        try:
            return shown(field.default.factory())
        except Exception:  # noqa: BLE001 - a factory that needs context: say so
            return "(computed)"
    return shown(field.default)


def class_source(cls: type) -> str:
    """A class's source, dedented. ``inspect.getsource`` fails for a class whose ``__module__`` is
    the package re-exporting it (``agentsynth_kernel.spec``): then the files of its methods and of
    that package are searched for its definition."""
    try:
        return textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        pass
    files: list[str] = []
    for value in vars(cls).values():
        fn = getattr(value, "fget", None) or getattr(value, "func", None) or getattr(value, "__func__", None) or value
        filename = getattr(getattr(fn, "__code__", None), "co_filename", "")
        if filename.endswith(".py") and filename not in files:
            files.append(filename)
    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    package_dir = Path(getattr(module, "__file__", "") or ".").parent if module else None
    if package_dir is not None and package_dir.name != "." and (package_dir / "__init__.py").is_file():
        files += sorted(str(p) for p in package_dir.rglob("*.py") if str(p) not in files)
    for filename in files:
        text = _file_text(filename)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
                return textwrap.dedent(ast.get_source_segment(text, node, padded=True) or "")
    return ""


@functools.cache
def _file_text(filename: str) -> str:
    try:
        return Path(filename).read_text(encoding="utf-8")
    except OSError:
        return ""


@functools.cache
def field_comments(cls: type) -> dict[str, str]:
    """Each field's doc from the source: the ``#`` lines right above it, then a comment beside it."""
    source = class_source(cls)
    if not source:
        return {}
    comments = _comments(source)
    tree = ast.parse(source)
    classdef = next((n for n in tree.body if isinstance(n, ast.ClassDef)), None)
    out: dict[str, str] = {}
    for node in classdef.body if classdef else []:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = _comment_for(comments, node.lineno, node.end_lineno or node.lineno)
            if text:
                out[node.target.id] = text
    return out


def field_doc(cls: type, name: str, metadata: Any = None) -> str:
    """A field's doc: attrs ``metadata["doc"]``, the source comment, then FIELD_DOCS."""
    if metadata and isinstance(metadata.get("doc"), str):
        return str(metadata["doc"])
    for klass in getattr(cls, "__mro__", (cls,)):
        found = field_comments(klass).get(name) if isinstance(klass, type) else None
        if found:
            return found
    fields = [f.name for f in attrs.fields(cls)] if attrs.has(cls) else [name]
    return (FIELD_DOCS.get(f"{cls.__name__}.{name}", "") or docstring_args(cls).get(name, "")
            or docstring_keys(cls, fields).get(name, ""))


@attrs.frozen
class Param:
    name: str
    type: str
    default: str
    bounds: str = ""
    doc: str = ""


def _hints(target: Any) -> dict[str, Any]:
    """Evaluated annotations (``Annotated`` kept). When one names something imported only for type
    checkers, the others are still evaluated one at a time; that one stays a string."""
    try:
        return dict(typing.get_type_hints(target, include_extras=True))
    except Exception:  # noqa: BLE001 - fall back to one annotation at a time
        pass
    raw = dict(getattr(target, "__annotations__", {}) or {})
    namespace = dict(getattr(inspect.unwrap(target), "__globals__", None) or
                     vars(sys.modules.get(getattr(target, "__module__", ""), types.ModuleType("_"))))
    out = {}
    for name, annotation in raw.items():
        try:
            out[name] = eval(annotation, namespace) if isinstance(annotation, str) else annotation  # noqa: S307
        except Exception:  # noqa: BLE001 - unresolvable: shown as written
            out[name] = annotation
    return out


def class_params(cls: type) -> list[Param]:
    """The keys of an attrs class or a msgspec Struct, in declaration order."""
    hints = _hints(cls)
    if attrs.has(cls):
        return [Param(f.name, type_text(hints.get(f.name, f.type)), attrs_default(f),
                      bounds_text(hints.get(f.name)), field_doc(cls, f.name, f.metadata))
                for f in attrs.fields(cls) if f.init]
    import msgspec

    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        out = []
        for f in msgspec.structs.fields(cls):
            if f.default is not msgspec.NODEFAULT:
                default = shown(f.default)
            elif f.default_factory is not msgspec.NODEFAULT:
                default = shown(f.default_factory())
            else:
                default = "required"
            out.append(Param(f.name, type_text(hints.get(f.name, f.type)), default, "", field_doc(cls, f.name)))
        return out
    return []


@functools.cache
def param_comments(fn: Any) -> dict[str, str]:
    """A function's parameter docs from its source: the comment beside a parameter, or the ``#``
    lines right above it inside the signature."""
    try:
        source = textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return {}
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    comments = _comments(source)
    out = {}
    for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
        text = _comment_for(comments, arg.lineno, arg.lineno, stop=node.lineno)
        if text:
            out[arg.arg] = text
    return out


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """Line -> (comment text, the line is only a comment)."""
    lines = source.splitlines()
    out: dict[int, tuple[str, bool]] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                row = tok.start[0]
                out[row] = (tok.string.lstrip("#").strip(), lines[row - 1].strip().startswith("#"))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {}
    return out


def _comment_for(comments: dict[int, tuple[str, bool]], first: int, last: int, stop: int = 0) -> str:
    above: list[str] = []
    row = first - 1
    while row > stop and row in comments and comments[row][1] and not comments[row][0].startswith("---"):
        above.insert(0, comments[row][0])
        row -= 1
    beside = [comments[r][0] for r in range(first, last + 1) if r in comments and not comments[r][1]]
    return " ".join([*above, *beside]).strip()


def docstring_args(obj: Any) -> dict[str, str]:
    """``name: text`` items of the Google-style ``Args:`` sections of a factory's docstrings (the
    class's and its ``__init__``'s)."""
    out: dict[str, str] = {}
    texts = [doc_of(obj)] + ([doc_of(vars(obj).get("__init__"))] if inspect.isclass(obj) and "__init__" in vars(obj)
                             else [])
    for text in texts:
        for line in _google_sections(text).split("\n"):
            item = re.match(r"^- ((?:`\w+`(?:, )?)+)(?: \([^)]*\))?: (.*)$", line)
            if item:
                for name in re.findall(r"`(\w+)`", item.group(1)):
                    out.setdefault(name, item.group(2))
    return out


def docstring_keys(obj: Any, names: Iterable[str]) -> dict[str, str]:
    """Prose key docs of a docstring, ```` ``name``: text ```` (up to the next such key or the end of the
    paragraph), for the given names only."""
    wanted = set(names)
    out: dict[str, str] = {}
    texts = [doc_of(obj)] + ([doc_of(vars(obj).get("__init__"))] if inspect.isclass(obj) and "__init__" in vars(obj)
                             else [])
    for text in texts:
        for paragraph in re.split(r"\n\s*\n", text):
            flat = " ".join(paragraph.split())
            marks = list(re.finditer(r"(?:^|(?<=\s))``(\w+)``: ", flat))
            for mark, after in zip(marks, [*marks[1:], None], strict=False):
                name = mark.group(1)
                if name in wanted and name not in out:
                    end = after.start() if after else len(flat)
                    out[name] = flat[mark.end():end].strip().rstrip(";,").strip()
    return out


def factory_params(factory: Any) -> list[Param]:
    """The YAML keys of a factory without a spec class: its keyword parameters, minus context."""
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return []
    hints = _hints(target)
    out = []
    for name, param in signature.parameters.items():
        if name in CONTEXT or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            continue
        hint = hints.get(name, param.annotation)
        tp = "" if hint is param.empty else type_text(hint)
        default = "required" if param.default is param.empty else shown(param.default)
        doc = (param_comments(target).get(name, "") or docstring_args(factory).get(name, "")
               or docstring_keys(factory, signature.parameters).get(name, ""))
        out.append(Param(name, tp, default, bounds_text(hint), doc))
    return out


def params_table(params: list[Param], page: str, label: str = "key") -> list[str]:
    """A table of keys; the bounds and doc columns only when some key has one."""
    with_bounds, with_doc = any(p.bounds for p in params), any(p.doc for p in params)
    rows = [f"| {label} | type | default |" + (" bounds |" if with_bounds else "") + (" doc |" if with_doc else ""),
            "|---|---|---|" + ("---|" if with_bounds else "") + ("---|" if with_doc else "")]
    for p in params:
        row = f"| `{p.name}` | {code(cell(p.type)) if p.type else ''} | {code(cell(p.default))} |"
        if with_bounds:
            row += f" {cell(p.bounds)} |"
        if with_doc:
            row += f" {cell(render_roles(p.doc, page))} |"
        rows.append(row)
    return rows


# --- signatures -----------------------------------------------------------------------------------


def signature_text(fn: Any, *, drop_first: bool = False) -> str:
    """``(name: type = default, ...) -> type`` with readable annotations (no quotes, no modules)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "(...)"
    parts: list[str] = []
    params = list(sig.parameters.values())
    if drop_first and params and params[0].name in ("self", "cls"):
        params = params[1:]
    seen_kw_only = False
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and not seen_kw_only:
            seen_kw_only = True
            parts.append("*")
        star = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        text = star + p.name
        if p.kind is p.VAR_POSITIONAL:
            seen_kw_only = True
        if p.annotation is not p.empty:
            text += f": {type_text(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {'...' if p.default is attrs.NOTHING else shown(p.default)}"  # an attrs factory
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    out = f"({', '.join(parts)})"
    if sig.return_annotation is not sig.empty and not inspect.isclass(fn):
        out += f" -> {type_text(sig.return_annotation)}"
    return out


# --- cross-references -----------------------------------------------------------------------------

ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|attr|data|exc|obj|const):`([^`]+)`")


@functools.cache
def symbols() -> dict[str, tuple[str, str]]:
    """Name (short and dotted) -> (page, anchor) of everything the pages document."""
    table: dict[str, tuple[str, str]] = {}

    def add(names: Iterable[str], page: str, anchor_id: str) -> None:
        for name in names:
            table.setdefault(name, (page, anchor_id))

    for name in (*PROTOCOLS, *RECORDS):  # the protocol page first: it is the richer one
        obj = getattr(ak, name, None)
        add(_dotted(name, obj), "reference/protocols.md", anchor(name))
        for member in _members(obj) if isinstance(obj, type) else []:
            add([f"{name}.{member}", *(f"{d}.{member}" for d in _dotted(name, obj))], "reference/protocols.md",
                anchor(f"{name}.{member}"))
    for name, page, anchor_id in (("Pack", "reference/pack.md", "pack-yaml"), ("Task", "reference/pack.md", "tasks"),
                                  ("ComponentSpec", "reference/pack.md", "components"),
                                  ("RunSpec", "reference/run-spec.md", "run-spec"),
                                  ("Budget", "reference/run-spec.md", "budget"),
                                  ("is_world_state", "reference/world-state.md", "decision")):
        add(_dotted(name, getattr(ak, name, None)), page, anchor_id)
    for page, roots in (("reference/pack.md", (ak.Pack, ak.Task)), ("reference/run-spec.md", (ak.RunSpec,))):
        for root in roots:
            for _, inner in nested_classes(root, ""):
                add(_dotted(inner.__name__, inner), page, anchor(inner.__name__))
    for module, names in api_sections():
        add([module], "reference/api.md", anchor(module))
        for name in names:
            add(_dotted(name, getattr(importlib.import_module(module), name, None), module), "reference/api.md",
                api_anchor(module, name))
    hookspecs = importlib.import_module("agentsynth_kernel.hookspecs")
    for name, fn in vars(hookspecs).items():
        if inspect.isfunction(fn) and hasattr(fn, "agentsynth_spec"):
            add([name, f"agentsynth_kernel.hookspecs.{name}"], "hooks.md", anchor(name))
    return table


def _dotted(name: str, obj: Any, package: str = "agentsynth_kernel") -> list[str]:
    names = [name, f"{package}.{name}"]
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and module.startswith("agentsynth_kernel"):
        names.append(f"{module}.{name}")
    return names


def _members(cls: type) -> list[str]:
    """A class's own public methods and properties, in source order."""
    return [n for n, v in vars(cls).items() if not n.startswith("_")
            and (inspect.isfunction(v) or isinstance(v, (property, functools.cached_property, staticmethod,
                                                         classmethod)))]


def resolve(target: str) -> tuple[str, str] | None:
    """Where a dotted name is documented: the exact name, else its shortest documented tail."""
    table = symbols()
    target = target.strip().lstrip(".~").removesuffix("()")
    if target in table:
        return table[target]
    parts = target.split(".")
    for i in range(1, len(parts)):
        tail = ".".join(parts[i:])
        if tail in table:
            return table[tail]
    return None


def link(from_page: str, to_page: str, anchor_id: str = "") -> str:
    rel = posixpath.relpath(to_page, posixpath.dirname(from_page) or ".")
    if rel == posixpath.basename(from_page) and to_page == from_page:
        rel = ""
    return f"{rel}#{anchor_id}" if anchor_id else rel


def render_roles(text: str, page: str, unresolved: list[str] | None = None) -> str:
    """Sphinx roles -> Markdown links (an unknown target: inline code, and noted in ``unresolved``)."""

    def replace(match: re.Match[str]) -> str:
        role, body = match.group(1), match.group(2)
        title, _, explicit = body.partition(" <")
        target = explicit.rstrip(">") if explicit else body
        shown_text = title if explicit else (target.lstrip("~").rsplit(".", 1)[-1] if target.startswith("~")
                                             else target.lstrip("."))
        if role in ("func", "meth") and not shown_text.endswith(")"):
            shown_text += "()"
        where = resolve(target)
        if where is None:
            if unresolved is not None:
                unresolved.append(target)
            return f"`{shown_text}`"
        return f"[`{shown_text}`]({link(page, *where)})"

    return ROLE.sub(replace, text)


def render_doc(text: str, page: str, unresolved: list[str] | None = None) -> str:
    """A docstring as Markdown: roles as links, an RST literal block (``Example::`` and the indented
    lines after it) as ``Example:`` and a fenced code block."""
    text = _google_sections(render_roles(text, page, unresolved))
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::"):
            out.append(line)
            i += 1
            continue
        intro = line.rstrip()[:-2].rstrip()
        if intro:
            out.append(intro + ":")
        indent = len(line) - len(line.lstrip())
        j = i + 1
        block: list[str] = []
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
            block.append(lines[j])
            j += 1
        while block and not block[-1].strip():
            block.pop()
            j -= 1
        body = textwrap.dedent("\n".join(block)).strip("\n")
        if not body:
            i += 1
            continue
        out += ["", "```" + _language(body), *body.split("\n"), "```"]
        i = j
    return "\n".join(out)


_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Keys|Returns|Raises|Yields|Attributes):\s*$")
_ITEM = re.compile(r"^([\w*][\w*, ]*?)(?: \(([^)]*)\))?: (.*)$")


def _google_sections(text: str) -> str:
    """Google-style ``Args:`` sections (indented ``name: text`` lines) as a bold label and a list;
    Markdown would run their lines into one paragraph."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        match = _SECTION.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = len(match.group(1))
        j = i + 1
        items: list[str] = []
        while j < len(lines) and lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) > indent:
            line = lines[j].strip()
            item = _ITEM.match(line)
            deeper = items and len(lines[j]) - len(lines[j].lstrip()) > indent + 4
            if item and not deeper:
                names = ", ".join(f"`{n.strip()}`" for n in item.group(1).split(","))
                kind = f" ({item.group(2)})" if item.group(2) else ""
                items.append(f"- {names}{kind}: {item.group(3)}")
            elif items:
                items[-1] += " " + line
            else:
                items.append(f"- {line}")
            j += 1
        if not items:
            out.append(lines[i])
            i += 1
            continue
        if out and out[-1].strip():
            out.append("")
        out += [f"**{match.group(2)}:**", "", *items]
        if j < len(lines) and lines[j].strip():
            out.append("")
        i = j
    return "\n".join(out)


def _language(body: str) -> str:
    try:
        ast.parse(body)
    except SyntaxError:
        return "toml" if re.search(r"(?m)^\[[\w.\-]+\]$", body) else ""
    return "python"


# --- the public API -------------------------------------------------------------------------------


@functools.cache
def api_sections() -> list[tuple[str, list[str]]]:
    """(module, public names) for the ``agentsynth_kernel`` namespace and the documented submodules."""
    sections = [("agentsynth_kernel", sorted(ak.__all__, key=lambda n: (n.lower(), n)))]
    for name in ("agentsynth_kernel.testing", "agentsynth_kernel.testing.adversarial"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        names = getattr(module, "__all__", None)
        if names is None:
            names = [n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", "") == name
                     and (inspect.isclass(v) or inspect.isfunction(v))]
        sections.append((name, sorted(names, key=lambda n: (n.lower(), n))))
    return sections


@functools.cache
def _api_anchors() -> dict[tuple[str, str], str]:
    """(module, name) -> its anchor on api.md: the lowercased name (prefixed by the module outside
    the top level), with ``-2``, ``-3`` ... for names that differ only in case (``Reply``, ``reply``)."""
    out: dict[tuple[str, str], str] = {}
    for module, names in api_sections():
        taken: dict[str, int] = {}
        for name in names:  # sorted: the same name gets the same anchor on every run
            base = anchor(name if module == "agentsynth_kernel" else f"{module}.{name}")
            taken[base] = taken.get(base, 0) + 1
            out[(module, name)] = base if taken[base] == 1 else f"{base}-{taken[base]}"
    return out


def api_anchor(module: str, name: str) -> str:
    return _api_anchors().get((module, name)) or anchor(name if module == "agentsynth_kernel" else f"{module}.{name}")


def _group_of(name: str) -> str:
    """The concept a top-level name belongs to (the kernel's ``PUBLIC`` table, else its module)."""
    public = getattr(ak, "PUBLIC", None)
    if isinstance(public, dict):
        for module, names in public.items():
            if name in names:
                return str(module)
    module = getattr(getattr(ak, name, None), "__module__", "") or ""
    return module.removeprefix("agentsynth_kernel.") or "agentsynth_kernel"


def _api_entry(name: str, obj: Any, page: str, anchor_id: str, unresolved: list[str]) -> list[str]:
    found = resolve(name) if anchor_id == api_anchor("agentsynth_kernel", name) else None
    documented_elsewhere = found if found is not None and found[0] != page else None
    elsewhere = documented_elsewhere is not None
    if documented_elsewhere is not None and documented_elsewhere[0] == "reference/protocols.md":  # members too
        return [f'<a id="{anchor_id}"></a>', "", f"#### `{name}`", "",
                f"See [{name}]({link(page, *documented_elsewhere)}).", ""]
    lines = [f'<a id="{anchor_id}"></a>', ""]
    if inspect.isclass(obj):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        sig = "" if getattr(obj, "_is_protocol", False) or kind == "exception" or elsewhere else signature_text(obj)
        about = (f"Its keys: [{name}]({link(page, *documented_elsewhere)})." if documented_elsewhere is not None
                 else render_doc(doc_of(obj), page, unresolved))
        lines += [f"#### {kind} `{name}{sig}`", "", about, ""]
        for member in _members(obj):
            value = inspect.getattr_static(obj, member)
            fn = value.fget if isinstance(value, property) else getattr(value, "func", None) or value
            fn = getattr(fn, "__func__", fn)
            prefix = "property " if isinstance(value, (property, functools.cached_property)) else ""
            sig = "" if prefix else signature_text(fn, drop_first=not isinstance(value, staticmethod))
            summary = first_paragraph(doc_of(fn))
            lines.append(f"- {prefix}`{member}{sig}`" + (f": {render_roles(summary, page, unresolved)}"
                                                        if summary else ""))
        if _members(obj):
            lines.append("")
    elif callable(obj) and not typing.get_origin(obj) and not isinstance(obj, types.UnionType):
        lines += [f"#### `{name}{signature_text(obj)}`", "", render_doc(doc_of(obj), page, unresolved), ""]
    else:
        if typing.get_origin(obj) or isinstance(obj, types.UnionType):
            value = type_text(obj)
        elif isinstance(obj, (int, float, str, bytes, bool, tuple, frozenset, type(None))):
            value = shown(obj)
        else:  # an object whose repr may change per run: its type
            value = f"<{type(obj).__name__}>"
        lines += [f"#### `{name}` = {code(value)}", ""]
    return [line for i, line in enumerate(lines) if line or (i and lines[i - 1])]


def render_api() -> str:
    page = "reference/api.md"
    unresolved: list[str] = []
    lines = [
        "# Python API",
        "",
        _generated("the public names of `agentsynth_kernel` (its `__all__`) and `agentsynth_kernel.testing`"),
        "",
        render_doc(doc_of(ak), page, unresolved),
        "",
        "Everything here is importable from the top level (`from agentsynth_kernel import Task`); the",
        "protocols and records are on [protocols.md](protocols.md), the pack and run-spec classes on",
        "[pack.md](pack.md) and [run-spec.md](run-spec.md).",
        "",
    ]
    sections = api_sections()
    top = sections[0][1]
    groups: dict[str, list[str]] = {}
    for name in top:
        groups.setdefault(_group_of(name), []).append(name)
    lines += heading(2, "`agentsynth_kernel`", anchor("agentsynth_kernel"))
    for group in sorted(groups):
        lines += [f"### {group}", ""]
        for name in groups[group]:
            lines += _api_entry(name, getattr(ak, name), page, api_anchor("agentsynth_kernel", name), unresolved)
    for module_name, names in sections[1:]:
        module = importlib.import_module(module_name)
        lines += heading(2, f"`{module_name}`", anchor(module_name))
        lines += [render_doc(doc_of(module), page, unresolved), ""]
        for name in names:
            lines += _api_entry(name, getattr(module, name), page, api_anchor(module_name, name), unresolved)
    return _finish(lines)


# --- pages ----------------------------------------------------------------------------------------


def _generated(what: str) -> str:
    return (f"Generated from {what} by `scripts/gen_reference.py`; do not edit by hand. Regenerate with "
            "every plugin installed: `.nox/together/bin/python scripts/gen_reference.py`.")


def _finish(lines: list[str]) -> str:
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return scrub(text).rstrip() + "\n"


def _class_section(cls: type, page: str) -> list[str]:
    return [render_doc(doc_of(cls), page), "", *params_table(class_params(cls), page), ""]


DOCUMENTED = ("ComponentSpec", "Task", "Pack", "RunSpec", "Budget")  # each has a section of its own


def _classes_in(hint: Any) -> list[type]:
    if isinstance(hint, type):
        return [hint]
    return [c for arg in typing.get_args(hint) for c in _classes_in(arg)]


def nested_classes(cls: type, path: str) -> list[tuple[str, type]]:
    """(YAML path, attrs class) of the structured keys inside ``cls`` that have no section of their
    own (a task's ``user:``), depth first, each once."""
    out: list[tuple[str, type]] = []
    hints = _hints(cls)
    for field in attrs.fields(cls):
        if not field.init:
            continue
        for inner in _classes_in(hints.get(field.name, field.type)):
            if attrs.has(inner) and inner.__name__ not in DOCUMENTED and inner not in [c for _, c in out]:
                where = f"{path}{field.name}"
                out += [(where, inner), *nested_classes(inner, f"{where}.")]
    return out


def _nested_sections(cls: type, path: str, page: str) -> list[str]:
    lines: list[str] = []
    for where, inner in nested_classes(cls, path):
        lines += heading(3, f"`{where}:` ({inner.__name__})", anchor(inner.__name__))
        lines += _class_section(inner, page)
    return lines


def render_pack() -> str:
    page = "reference/pack.md"
    lines = [
        "# pack.yaml and the oracle",
        "",
        _generated("the loader's attrs classes (`Pack`, `Task`, `ComponentSpec`) and the oracle policy"),
        "",
        "Unknown keys are errors everywhere (with a did-you-mean); strings may use `${VAR}` / `${VAR:default}`;",
        "every problem is reported as `file: path.inside: what was expected`. Check a pack with",
        "`agentsynth pack validate PATH` (the gates are described on [world-state.md](world-state.md)).",
        "",
        *heading(2, "pack.yaml", "pack-yaml"),
        *_class_section(ak.Pack, page),
        *_nested_sections(ak.Pack, "", page),
        *heading(3, "tasks[]", "tasks"),
        *_class_section(ak.Task, page),
        *_nested_sections(ak.Task, "tasks[].", page),
        *heading(3, "Components", "components"),
        render_doc(doc_of(ak.ComponentSpec), page),
        "",
        "`environment:` and each entry of `checkers:` is a component: a mapping with `type:` and that",
        "component's own keys, or just the name as a string. Each kind's components and their keys:",
        "",
        *[f"- [{title}]({link(page, page_of(kind))}): {where}" for kind, (title, where, _) in KIND_PAGES.items()],
        "",
        *heading(2, "The oracle (`oracle.py`)", "oracle"),
        ORACLE,
        f"The `oracle` policy itself: {render_doc(first_paragraph(doc_of(_builtin('policy', 'oracle'))), page)}",
        "Its keys are on [policies.md](components/policies.md#oracle).",
        "",
    ]
    return _finish(lines)


def _builtin(kind: str, name: str) -> Any:
    return _kernel_host().registry[kind][name].factory


@functools.cache
def _kernel_host() -> Any:
    """A host with only the kernel's built-ins (its ``builtins`` entry point): the kernel pages do
    not depend on what is installed."""
    from importlib.metadata import entry_points

    host = ak.PluginHost()
    for ep in entry_points(group="agentsynth", name="builtins"):
        if ep.dist is not None and ep.dist.name == "agentsynth":
            info = host.add_plugin(ep.load(), "builtins")
            info.distribution = ep.dist.name  # as entry-point loading records it
            break
    return host


def render_run_spec() -> str:
    page = "reference/run-spec.md"
    spec_module = importlib.import_module(ak.RunSpec.__module__)
    limits = [(key, getattr(spec_module, const, None)) for key, const in
              (("trials", "MAX_TRIALS"), ("concurrency", "MAX_CONCURRENCY"), ("max_steps", "MAX_STEPS"),
               ("timeout", "MAX_TIMEOUT"))]
    lines = [
        "# Run spec",
        "",
        _generated("the loader's attrs classes (`RunSpec`, `Budget`)"),
        "",
        "`agentsynth run spec.yaml` executes a run spec; `agentsynth bench` builds one from its options.",
        "Unknown keys are errors; a key's value is checked when the spec is loaded, before any episode runs.",
        "",
        *heading(2, "Top-level keys", "run-spec"),
        *_class_section(ak.RunSpec, page),
        "Checked when the spec is loaded: `split` is one of "
        + ", ".join(f"`{s}`" for s in (*ak.SPLITS, "all"))
        + "; " + "; ".join(f"`{k}` is at least 1 and at most {v:,}" if k != "timeout"
                          else f"`{k}` is above 0 and at most {v:g} seconds" for k, v in limits if v is not None)
        + "; `seed` is a 64-bit integer; `budget` values are >= 0.",
        "",
        *_nested_sections(ak.RunSpec, "", page),
        *heading(2, "`budget:`", "budget"),
        *_class_section(ak.Budget, page),
        *heading(2, "Which component each key takes", "components"),
        "| key | kind | reference |",
        "|---|---|---|",
        "| `pack` | pack | [packs](components/packs.md), [pack.yaml](pack.md) |",
        "| `tasks` | inline tasks | [tasks](pack.md#tasks) |",
        "| `environment` | environment | [environments](components/environments.md) |",
        "| `policy` | policy | [policies](components/policies.md) |",
        "| `judge` | judge | [judges](components/judges.md) |",
        "| `export[]` | exporter | [exporters](components/exporters.md) (plus `path:`, the file or directory written) |",
        "| `generate` | generator | [generators](components/generators.md) (the plugin that registered it runs it) |",
        "| `executor` | executor | [executors](components/executors.md) |",
        "",
        "An LLM policy's model, prices and rate limits are its own keys ([`llm`](components/policies.md#llm));",
        "`budget:` caps what all of the run's LLM calls together may cost.",
        "",
    ]
    return _finish(lines)


def render_protocols() -> str:
    page = "reference/protocols.md"
    components = importlib.import_module(ak.Environment.__module__)
    records = importlib.import_module(ak.Verdict.__module__)
    lines = [
        "# Component protocols and records",
        "",
        _generated("the Protocols and records of the kernel"),
        "",
        render_doc(doc_of(components), page),
        "",
        *heading(2, "Protocols", "protocols"),
    ]
    for name in PROTOCOLS:
        cls = getattr(ak, name)
        lines += heading(3, f"`{name}`", anchor(name))
        lines += [render_doc(doc_of(cls), page), ""]
        attributes = [n for n in getattr(cls, "__annotations__", {}) if not n.startswith("_")]
        hints = _hints(cls)
        for attribute in attributes:
            lines.append(f"- attribute `{attribute}: {type_text(hints.get(attribute, cls.__annotations__[attribute]))}`")
        if attributes:
            lines.append("")
        for member in _members(cls):
            fn = vars(cls)[member]
            is_async = "async " if inspect.iscoroutinefunction(fn) else ""
            lines += heading(4, f"{is_async}`{name}.{member}{signature_text(fn, drop_first=True)}`",
                             anchor(f"{name}.{member}"))
            doc = doc_of(fn)
            if doc:
                lines += [render_doc(doc, page), ""]
    lines += [*heading(2, "Records", "records"), render_doc(doc_of(records), page), ""]
    for name in RECORDS:
        obj = getattr(ak, name)
        lines += heading(3, f"`{name}`", anchor(name))
        if not isinstance(obj, type):
            lines += [f"`{name} = {type_text(obj)}`", ""]
            comment = _module_comment(records, name)
            if comment:
                lines += [render_doc(comment, page), ""]
            continue
        lines += [render_doc(doc_of(obj), page), ""]
        params = class_params(obj)
        if params:
            lines += [*params_table(params, page, "field"), ""]
        for member in _members(obj):
            value = vars(obj)[member]
            fn = value.fget if isinstance(value, property) else getattr(value, "func", value)
            prop = isinstance(value, (property, functools.cached_property))
            sig = _property_type(fn) if prop else signature_text(fn, drop_first=True)
            summary = first_paragraph(doc_of(fn))
            lines += heading(4, f"{'property ' if prop else ''}`{name}.{member}{sig}`", anchor(f"{name}.{member}"))
            if summary:
                lines += [render_doc(doc_of(fn), page), ""]
    return _finish(lines)


def _property_type(fget: Any) -> str:
    try:
        returns = inspect.signature(fget).return_annotation
    except (TypeError, ValueError):
        return ""
    return "" if returns is inspect.Signature.empty else f": {type_text(returns)}"


def _module_comment(module: Any, name: str) -> str:
    """The comment block above a module-level assignment (``Status = Literal[...]``)."""
    try:
        source = inspect.getsource(module).splitlines()
    except (OSError, TypeError):
        return ""
    for i, line in enumerate(source):
        if re.match(rf"{re.escape(name)}\s*=", line):
            above: list[str] = []
            j = i - 1
            while j >= 0 and source[j].strip().startswith("#"):
                above.insert(0, source[j].strip().lstrip("#").strip())
                j -= 1
            return " ".join(above)
    return ""


def world_state_decision(reg: Any) -> tuple[str, str]:
    """(yes / no / depends, why) for a checker registration, by the rule of ``is_world_state``."""
    factory = reg.factory
    if callable(getattr(factory, "world_state_for", None)):
        return "depends", "`world_state_for(params)` decides from the checker's keys"
    declared = getattr(factory, "world_state", None)
    if declared is not None:
        return ("yes" if declared else "no"), f"declares `world_state = {bool(declared)}`"
    if reg.plugin == _trajectory_plugin():
        return "no", "a kernel built-in: they read the trajectory"
    return "yes", "a plugin checker that declares nothing"


def _trajectory_plugin() -> str:
    validation = importlib.import_module(ak.is_world_state.__module__)
    return str(getattr(validation, "TRAJECTORY_CHECKERS_PLUGIN", "builtins"))


def render_world_state() -> str:
    page = "reference/world-state.md"
    host = _kernel_host()
    try:
        source = textwrap.dedent(inspect.getsource(ak.is_world_state)).rstrip()
    except (OSError, TypeError):
        source = ""
    lines = [
        "# World state: what the pack gate counts as checking the outcome",
        "",
        _generated("`is_world_state` and the kernel's checkers"),
        "",
        WORLD_STATE_INTRO,
        *heading(2, "The gates of `pack validate`", "gates"),
        render_doc(doc_of(importlib.import_module(ak.validate_pack.__module__)), page),
        "",
        f"From the command line: [`agentsynth pack validate PATH|NAME`]({link(page, 'reference/cli.md')}"
        "#agentsynth-pack-validate); from Python: "
        f"[`validate_pack{signature_text(ak.validate_pack)}`]"
        f"({link(page, 'reference/api.md', api_anchor('agentsynth_kernel', 'validate_pack'))}).",
        "",
        *heading(2, "How it is decided", "decision"),
        f"`is_world_state(cspec, host)` ({code(ak.is_world_state.__module__)}): "
        + render_doc(doc_of(ak.is_world_state), page),
        "",
        "In order: a callable `world_state_for(params)` on the registered factory decides from the",
        "checker's keys; else a `world_state` attribute on it; else the plugin decides: a checker of the",
        f"kernel's own plugin (`{_trajectory_plugin()}`) does not read the world, any other plugin's does.",
        "An unknown checker name counts as not reading it. The code:",
        "",
        "```python",
        source,
        "```",
        "",
        WORLD_STATE_DECLARE.replace("{builtins}", _trajectory_plugin()),
        *heading(2, "The kernel's checkers", "builtins"),
        "| checker | reads the world | why |",
        "|---|---|---|",
    ]
    for name in sorted(host.registry["checker"]):
        reg = host.registry["checker"][name]
        verdict, why = world_state_decision(reg)
        lines.append(f"| [`{name}`](components/checkers.md#{anchor(name)}) | {verdict} | {cell(why)} |")
    lines += ["", "Every installed checker's decision is on its entry in [checkers.md](components/checkers.md).", ""]
    return _finish(lines)


def render_index() -> str:
    lines = [
        "# agentsynth documentation",
        "",
        _generated("the list of pages"),
        "",
        "- [Plugin hook reference](hooks.md): every hook a plugin implements, with an example each.",
        "- [pack.yaml and the oracle](reference/pack.md): every key of a pack, its tasks, and the oracle file.",
        "- [Run spec](reference/run-spec.md): every top-level key of `agentsynth run spec.yaml`.",
        "- [Component protocols and records](reference/protocols.md): Environment, Checker, Policy, Judge,",
        "  Generator, Exporter, Importer, Executor, Domain; Verdict, Observation, Step, EpisodeResult ...",
        "- [World state](reference/world-state.md): what makes a checker read the world's end state, and why",
        "  `pack validate` needs one per task.",
        "- [Python API](reference/api.md): every public name of `agentsynth_kernel` and its test kits.",
        "- [Command line](reference/cli.md): the kernel's commands, every option with its type and default.",
        "- Components, by kind (every installed plugin's, with their keys):",
        *[f"  - [{title}]({page_of(kind)}): {where}" for kind, (title, where, _) in KIND_PAGES.items()],
        "- [Plugins](../plugins/README.md): the plugin distributions of this repository.",
        "- Guides: [provider batch APIs](llm-batch.md) (bulk LLM calls at batch prices, resumable) and",
        "  [a pack from a demonstration](pack-from-demo.md) (`agentsynth pack new NAME --from-demo FILE`).",
        "",
    ]
    return _finish(lines)


def render_hooks() -> str:
    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location("gen_hook_docs", here / "gen_hook_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.render())


# --- the command line -----------------------------------------------------------------------------


def _builtin_commands() -> list[tuple[str, Any]]:
    """(name, click command) of the kernel's own commands, imported from where the CLI declares them
    (a plugin's commands are not loaded: they depend on what is installed)."""
    cli = importlib.import_module("agentsynth_kernel.cli")
    out = []
    for name, (ref, _) in sorted(getattr(cli, "BUILTIN_COMMANDS", {}).items()):
        module_name, _, attr = ref.partition(":")
        try:
            command = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):  # declared but not built yet
            continue
        out.append((name, command))
    return out


def _param_type(param: Any) -> str:
    import click

    if isinstance(param.type, click.Choice):
        return " | ".join(str(c) for c in param.type.choices)
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return "flag"
    name = str(getattr(param.type, "name", "") or "").lower()
    if isinstance(param.type, (click.IntRange, click.FloatRange)):
        kind = name.removesuffix(" range")
        low = f"{'>' if param.type.min_open else '>='} {_number(param.type.min)}" if param.type.min is not None else ""
        high = f"{'<' if param.type.max_open else '<='} {_number(param.type.max)}" if param.type.max is not None else ""
        return " ".join([kind, " and ".join(b for b in (low, high) if b)]).strip()
    return name


def _unset(value: Any) -> bool:
    """click's "no default" marker (``UNSET`` since click 8.2, ``None`` before)."""
    import click

    return value is None or value is getattr(click.core, "UNSET", None) or type(value).__name__ == "Sentinel"


def _param_default(param: Any) -> str:
    default = param.default
    if _unset(default) or default == () or (getattr(param, "is_flag", False) and default is False):
        return ""
    if callable(default):
        return "(computed)"
    return shown(default)


def _command_section(path: str, command: Any, level: int, page: str) -> list[str]:
    import click

    lines = heading(level, f"`{path}`", anchor(path.replace(" ", "-")))
    help_text = inspect.cleandoc(command.help or command.short_help or "")
    for paragraph in re.split(r"\n\s*\n", help_text) if help_text else []:
        if paragraph.startswith("\b\n"):  # click's "do not rewrap": examples, shown as they are
            lines += ["```", *paragraph.split("\n")[1:], "```", ""]
        else:
            lines += [render_doc(paragraph, page), ""]
    ctx = click.Context(command, info_name=path)
    lines += [f"Usage: `{path} {' '.join(command.collect_usage_pieces(ctx))}`", ""]
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in params if isinstance(p, click.Argument)]
    options = [p for p in params if isinstance(p, click.Option) and "--help" not in p.opts]
    if arguments:
        lines += ["| argument | type | required |", "|---|---|---|"]
        lines += [f"| {code(cell((a.human_readable_name or '').upper()))} | {cell(_param_type(a))} | "
                  f"{'yes' if a.required else 'no'} |" for a in arguments]
        lines.append("")
    if options:
        lines += ["| option | type | default | help |", "|---|---|---|---|"]
        for o in options:
            names = ", ".join(f"`{n}`" for n in [*o.opts, *o.secondary_opts])
            flags = [w for w, on in (("required", o.required), ("repeatable", o.multiple)) if on
                     and w not in (o.help or "")]
            extra = f" ({', '.join(flags)})" if flags else ""
            envvar = f" Environment: `{o.envvar}`." if isinstance(o.envvar, str) and o.envvar else ""
            default = _param_default(o)
            lines.append(f"| {names} | {cell(_param_type(o))} | {code(cell(default)) if default else ''} | "
                         f"{cell(render_roles(o.help or '', page))}{extra}{envvar} |")
        lines.append("")
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            # a plugin's subcommands join the group once the CLI loads them: only the kernel's own
            module = getattr(getattr(sub, "callback", None), "__module__", "") or ""
            if not getattr(sub, "hidden", False) and module.startswith("agentsynth_kernel"):
                lines += _command_section(f"{path} {name}", sub, min(level + 1, 4), page)
    return lines


def render_cli() -> str:
    page = "reference/cli.md"
    lines = [
        "# Command line",
        "",
        _generated("the kernel's click commands"),
        "",
        "The kernel's own commands. Plugins add more (`agentsynth mcp`, `agentsynth export` ...; see",
        "[`register_commands`](../hooks.md#register_commands)) and subcommands of `agentsynth pack`;",
        "`agentsynth --help` lists what is installed. A bad option or file is one clean message per problem",
        "and exit code 2; `AGENTSYNTH_DEBUG=1` shows tracebacks of internal errors.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    commands = _builtin_commands()
    lines += [f"| [`agentsynth {n}`](#{anchor('agentsynth-' + n)}) | "
              f"{cell(first_paragraph(inspect.cleandoc(c.help or c.short_help or '')))} |" for n, c in commands]
    lines.append("")
    for name, command in commands:
        lines += _command_section(f"agentsynth {name}", command, 2, page)
    return _finish(lines)


# --- component pages ------------------------------------------------------------------------------


def _distribution(host: Any, plugin: str) -> str:
    info = getattr(host, "plugins", {}).get(plugin)
    return getattr(info, "distribution", "") or ""


def render_component(kind: str, reg: Any, page: str, host: Any = None) -> list[str]:
    """One component's entry: name, plugin, description, docstring, keys."""
    lines = heading(2, f"`{reg.name}`", anchor(reg.name))
    dist = _distribution(host, reg.plugin) if host is not None else ""
    about = f"plugin `{reg.plugin}`" + (f" (distribution `{dist}`)" if dist and dist != reg.plugin else "")
    if kind == "checker":
        verdict, why = world_state_decision(reg)
        about += f"; [reads the world's end state](../world-state.md#decision): {verdict} ({why})"
    lines += [f"*{about}*", ""]
    if reg.description:
        lines += [render_doc(reg.description, page), ""]
    if kind == "pack":
        return lines + _pack_summary(reg.factory, page)
    doc = doc_of(reg.factory)
    if doc and doc != reg.description:
        lines += [render_doc(doc, page), ""]
    spec_cls = getattr(reg, "spec_cls", None)
    if spec_cls is not None and (attrs.has(spec_cls) or class_params(spec_cls)):
        spec_doc = doc_of(spec_cls)
        if spec_doc and spec_doc not in (doc, reg.description):
            lines += [render_doc(spec_doc, page), ""]
        params, source = class_params(spec_cls), f"spec class `{spec_cls.__name__}`"
    else:
        params = factory_params(reg.factory)
        source = f"the signature of `{getattr(reg.factory, '__name__', type(reg.factory).__name__)}`"
    if params:
        lines += [f"Keys (from {source}):", "", *params_table(params, page), ""]
    else:
        lines += ["No keys of its own.", ""]
    for where, inner in nested_classes(spec_cls, "") if spec_cls is not None and attrs.has(spec_cls) else []:
        lines += heading(3, f"`{reg.name}`: `{where}:` ({inner.__name__})", anchor(f"{reg.name}.{where}"))
        lines += _class_section(inner, page)
    return lines


def _pack_summary(where: Any, page: str) -> list[str]:
    """What a registered pack holds, read from its pack.yaml: version, world, tasks, splits."""
    import yaml

    path = Path(where)
    file = path / "pack.yaml" if path.is_dir() else path
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    if not isinstance(data, dict):
        return []
    lines = []
    if isinstance(data.get("description"), str) and data["description"].strip():
        lines += [data["description"].strip(), ""]
    tasks = [t for t in data.get("tasks") or [] if isinstance(t, dict)]
    env = data.get("environment")
    env_type = env.get("type") if isinstance(env, dict) else env if isinstance(env, str) else None
    splits = sorted({str(t.get("split", "test")) for t in tasks})
    facts = [f"pack id `{data.get('id')}`", f"version `{data.get('version', '1')}`", f"{len(tasks)} tasks"]
    if splits:
        facts.append("splits " + ", ".join(f"`{s}`" for s in splits))
    if isinstance(env_type, str):
        facts.append(f"world [`{env_type}`]({link(page, page_of('environment'), anchor(env_type))})")
    return [*lines, "; ".join(facts) + ".", ""]


def render_kind(kind: str, host: Any) -> str:
    title, where, protocol = KIND_PAGES.get(kind, (kind.capitalize() + "s", "", None))
    page = page_of(kind)
    entries = sorted(host.registry.get(kind, {}).values(), key=lambda r: r.name)
    lines = [
        f"# {title}",
        "",
        _generated(f"what the installed plugins register as `{kind}`"),
        "",
    ]
    if kind == "pack":
        lines += [f"Used as {where}; [pack.md](../pack.md) describes the format of a pack, and",
                  "[packs/README.md](../../../packs/README.md) how to publish one as its own distribution.", ""]
    elif where:
        lines += [f"Used as {where}. A component is `{{type: NAME, ...keys}}` or just `NAME`; unknown keys are "
                  "errors, and every key is checked against the type below when the spec is loaded.", ""]
    if protocol:
        lines += [f"Each implements the [`{protocol}`](../protocols.md#{anchor(protocol)}) protocol.", ""]
    if not entries:
        lines += ["None is installed.", ""]
        return _finish(lines)
    lines += ["| name | plugin | what it is |", "|---|---|---|"]
    lines += [f"| [`{r.name}`](#{anchor(r.name)}) | `{r.plugin}` | {cell(render_roles(r.description, page))} |"
              for r in entries]
    lines.append("")
    for reg in entries:
        lines += render_component(kind, reg, page, host)
    return _finish(lines)


# --- the whole set --------------------------------------------------------------------------------

KERNEL_PAGES: dict[str, Callable[[], str]] = {
    "README.md": render_index,
    "hooks.md": render_hooks,
    "reference/pack.md": render_pack,
    "reference/run-spec.md": render_run_spec,
    "reference/protocols.md": render_protocols,
    "reference/world-state.md": render_world_state,
    "reference/api.md": render_api,
    "reference/cli.md": render_cli,
}


def component_kinds() -> list[str]:
    """Every kind the kernel registers, in the index's order (a new kind gets a page too)."""
    kinds = list(_kernel_host().registry)
    return [k for k in KIND_PAGES if k in kinds] + sorted(k for k in kinds if k not in KIND_PAGES)


def render_all(*, kernel_only: bool = False, host: Any = None) -> dict[str, str]:
    """Every page as {path under docs/: text}. ``kernel_only``: the pages that do not depend on
    which plugins are installed."""
    pages = {path: fn() for path, fn in KERNEL_PAGES.items()}
    if not kernel_only:
        host = host or ak.get_host()
        for kind in component_kinds():
            pages[page_of(kind)] = render_kind(kind, host)
    return dict(sorted(pages.items()))


def stale_pages(pages: dict[str, str], docs: Path) -> list[str]:
    """The pages under ``docs`` that differ from ``pages`` (or are missing)."""
    out = []
    for path, text in pages.items():
        file = docs / path
        if not file.is_file() or file.read_text(encoding="utf-8") != text:
            out.append(path)
    return out


def write(pages: dict[str, str], docs: Path) -> list[str]:
    """Write the pages that changed; remove component pages of kinds that no longer exist."""
    written = []
    for path, text in pages.items():
        file = docs / path
        if not file.is_file() or file.read_text(encoding="utf-8") != text:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
            written.append(path)
    components = docs / "reference" / "components"
    if components.is_dir() and any(p.startswith("reference/components/") for p in pages):
        for file in sorted(components.glob("*.md")):
            if f"reference/components/{file.name}" not in pages:
                file.unlink()
                written.append(f"reference/components/{file.name} (removed)")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or --check) the generated reference pages under docs/.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming the stale pages")
    parser.add_argument("--kernel-only", action="store_true",
                        help="only the pages that do not depend on the installed plugins")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs", help="the docs directory (default: docs/)")
    args = parser.parse_args(argv)
    if args.docs.exists() and not args.docs.is_dir():
        print(f"{args.docs}: --docs: expected a directory, got a file", file=sys.stderr)
        return 2
    pages = render_all(kernel_only=args.kernel_only)
    if args.check:
        stale = stale_pages(pages, args.docs)
        for path in stale:
            print(f"{args.docs / path}: stale (regenerate with every plugin installed: "
                  ".nox/together/bin/python scripts/gen_reference.py)", file=sys.stderr)
        return 1 if stale else 0
    for path in write(pages, args.docs):
        print(f"wrote {args.docs / path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
