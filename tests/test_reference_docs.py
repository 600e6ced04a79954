"""The generated reference pages (docs/README.md, docs/hooks.md, docs/reference/) are current,
deterministic and free of machine paths; their links resolve; a changed docstring, parameter or
bound makes the check fail. The component pages depend on the installed plugins: here (the
kernel's venv) only their built-in entries are compared; tests/integration/test_docs.py compares
every page with every plugin installed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest

import agentsynth_kernel as ak
from agentsynth_kernel import Bounds, ComponentSpec, PluginHost, Trajectory, Verdict, hookimpl

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCRIPT = ROOT / "scripts" / "gen_reference.py"
STALE = "run `.nox/together/bin/python scripts/gen_reference.py` (every plugin installed)"


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> Any:
    return _load("gen_reference")


@pytest.fixture(scope="module")
def kernel_pages(gen) -> dict[str, str]:
    """The kernel pages rendered once for the module (a render takes a few seconds)."""
    return dict(gen.render_all(kernel_only=True))


@pytest.fixture
def generated(gen, kernel_pages, tmp_path) -> Path:
    """A docs directory the kernel pages were generated into."""
    gen.write(kernel_pages, tmp_path)
    return tmp_path


def test_kernel_pages_are_current(gen, kernel_pages, tmp_path):
    pages = kernel_pages
    assert set(pages) >= {"README.md", "hooks.md", "reference/pack.md", "reference/run-spec.md",
                          "reference/protocols.md", "reference/world-state.md", "reference/api.md"}
    gen.write(pages, tmp_path)
    stale = [path for path in pages if not (DOCS / path).is_file()
             or (DOCS / path).read_text(encoding="utf-8") != (tmp_path / path).read_text(encoding="utf-8")]
    assert not stale, f"docs/ pages are stale: {stale}: {STALE}"


def test_built_in_components_are_current_on_their_pages(gen):
    """The kernel's own components, rendered here, appear verbatim on the committed pages (which
    were generated with every plugin installed)."""
    host = gen._kernel_host()
    checked = 0
    for kind in gen.component_kinds():
        page = gen.page_of(kind)
        text = (DOCS / page).read_text(encoding="utf-8")
        for reg in host.registry[kind].values():
            entry = gen._finish(gen.render_component(kind, reg, page, host)).rstrip()
            assert entry in text, f"docs/{page}: the entry of {kind} {reg.name!r} is stale: {STALE}"
            checked += 1
    assert checked >= 10  # the built-in policies, checkers and the local executor


def _builtin_entry_is_current(gen: Any, kind: str, name: str) -> bool:
    host = gen._kernel_host()
    page = gen.page_of(kind)
    entry = gen._finish(gen.render_component(kind, host.registry[kind][name], page, host)).rstrip()
    return entry in (DOCS / page).read_text(encoding="utf-8")


def test_a_changed_built_in_docstring_or_parameter_makes_the_check_fail(gen, monkeypatch):
    import inspect

    factory = gen._kernel_host().registry["checker"]["called_tool"].factory
    assert _builtin_entry_is_current(gen, "checker", "called_tool")
    monkeypatch.setattr(factory, "__doc__", "Passes when the agent called the tool (changed, not regenerated).")
    assert not _builtin_entry_is_current(gen, "checker", "called_tool")
    monkeypatch.undo()
    signature = inspect.signature(factory)
    extra = inspect.Parameter("at_most_seconds", inspect.Parameter.KEYWORD_ONLY, default=5.0, annotation=float)
    monkeypatch.setattr(factory, "__signature__", signature.replace(parameters=[*signature.parameters.values(), extra]),
                        raising=False)
    assert not _builtin_entry_is_current(gen, "checker", "called_tool")


def test_generation_is_deterministic_and_names_no_machine_path(kernel_pages):
    first = kernel_pages
    again = _load("gen_reference").render_all(kernel_only=True)  # a fresh module: no cache shared
    assert first == again
    home = str(Path.home())
    for path, text in first.items():
        assert str(ROOT) not in text and sys.prefix not in text, path
        assert home == "/" or home not in text, path
        assert " at 0x" not in text and "site-packages" not in text, path


def test_a_changed_docstring_makes_the_check_fail(gen, kernel_pages, generated, monkeypatch):
    assert gen.stale_pages(kernel_pages, generated) == []
    monkeypatch.setattr(Verdict, "__doc__", "A checker's decision, changed without regenerating the pages.")
    assert gen.stale_pages(gen.render_all(kernel_only=True), generated) == ["reference/protocols.md"]


def test_a_changed_hook_docstring_makes_the_check_fail(gen, generated, monkeypatch):
    from agentsynth_kernel import hookspecs

    monkeypatch.setattr(hookspecs.run_started, "__doc__", "Changed.\n\nExample::\n\n    @hookimpl\n")
    assert gen.stale_pages(gen.render_all(kernel_only=True), generated) == ["hooks.md"]


class _Probe:
    """Counts rows (a throw-away checker for the tests)."""

    def __init__(self, query: str,
                 limit: Annotated[int, Bounds(low=1, high=9)] = 3,  # rows counted at most
                 ) -> None:
        self.query, self.limit = query, limit

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        return Verdict("probe", False)


class _ProbeWithMore(_Probe):
    """Counts rows (a throw-away checker for the tests). ``strict``: fail on any extra row (and the
    parenthetical (``limit``: not a key doc) is left alone)."""

    def __init__(self, query: str, limit: Annotated[int, Bounds(low=1, high=9)] = 3, strict: bool = False) -> None:
        super().__init__(query, limit)


class _Talk:
    """Reads the answer only."""

    world_state = False

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        return Verdict("talk", False)


class _Wrap:
    """Reads the world when its inner checker does.

    Args:
        inner: the name of the checker
            it wraps
    """

    def __init__(self, inner: str) -> None:
        self.inner = inner

    @staticmethod
    def world_state_for(params: dict[str, Any]) -> bool:
        return params.get("inner") == "probe"

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        return Verdict("wrap", False)


def _host(*checkers: tuple[str, Any]) -> PluginHost:
    class Plugin:
        @hookimpl
        def register_checkers(self, register: Any) -> None:
            for name, factory in checkers:
                register(name, factory, description=f"the {name} checker")

    host = PluginHost()
    info = host.add_plugin(Plugin(), "throwaway")
    assert info.loaded and not info.errors, info.errors
    return host


def test_a_changed_parameter_makes_the_component_check_fail(gen):
    before = gen.render_kind("checker", _host(("probe", _Probe)))
    assert "| `limit` | `int` | `3` | >= 1 and <= 9 | rows counted at most |" in before
    assert "[reads the world's end state](../world-state.md#decision): yes" in before
    after = gen.render_kind("checker", _host(("probe", _ProbeWithMore)))
    assert after != before and "| `strict` | `bool` | `False` |  | fail on any extra row (and the parenthetical" in after
    assert "not a key doc" not in after.split("| `limit`")[1].split("\n")[0]
    wrap = gen.render_kind("checker", _host(("wrap", _Wrap)))  # a key's doc from the Args: section
    assert "| `inner` | `str` | `required` | the name of the checker it wraps |" in wrap
    assert "**Args:**\n\n- `inner`: the name of the checker it wraps" in wrap


def test_world_state_decisions_agree_with_the_gate(gen):
    host = _host(("probe", _Probe), ("talk", _Talk), ("wrap", _Wrap))
    decisions = {name: gen.world_state_decision(reg)[0] for name, reg in host.registry["checker"].items()}
    assert decisions == {"probe": "yes", "talk": "no", "wrap": "depends"}
    assert ak.is_world_state(ComponentSpec("wrap", {"inner": "probe"}), host)
    assert not ak.is_world_state(ComponentSpec("wrap", {"inner": "talk"}), host)
    assert not ak.is_world_state(ComponentSpec("no-such-checker"), host)  # as world-state.md says
    real = ak.get_host()  # every checker installed here (the built-ins, the test world's)
    for name, reg in real.registry["checker"].items():
        verdict, why = gen.world_state_decision(reg)
        if verdict != "depends":
            assert (verdict == "yes") == ak.is_world_state(ComponentSpec(name), real), (name, why)


def test_hook_page_renders_cross_references_as_links():
    hooks = _load("gen_hook_docs")
    unresolved: list[str] = []
    text = hooks.render(unresolved)
    assert unresolved == [], f"hookspec cross-references with no reference page: {unresolved}"
    assert not re.search(r":(class|func|meth|mod|attr|exc):`", text)
    assert "[`Environment`](reference/protocols.md#environment)" in text
    assert "Example::" not in text and "```python\n@hookimpl" in text


def _anchors(text: str) -> set[str]:
    return set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_every_link_of_the_committed_pages_resolves():
    pages = sorted([DOCS / "README.md", DOCS / "hooks.md", *(DOCS / "reference").rglob("*.md")])
    assert len(pages) >= 15
    problems = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        ids = re.findall(r'<a id="([^"]+)"></a>', text)
        problems += [f"{page.relative_to(ROOT)}: anchor {i!r} twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor_id = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.is_file():
                problems.append(f"{page.relative_to(ROOT)}: {target}: no such file")
            elif anchor_id and dest.suffix == ".md" and anchor_id not in _anchors(dest.read_text(encoding="utf-8")):
                problems.append(f"{page.relative_to(ROOT)}: {target}: no anchor {anchor_id!r}")
    assert not problems, "\n".join(problems)


def test_every_kind_has_a_page_and_the_index_links_it(gen):
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for kind in gen._kernel_host().registry:
        assert kind in gen.component_kinds()
        assert f"({gen.page_of(kind)})" in index, kind


def test_every_pack_and_run_spec_key_has_a_doc(gen):
    """A key added to pack.yaml or the run spec without a comment beside it fails here; so does a
    fallback doc (FIELD_DOCS) naming a field that was renamed or removed."""
    import attrs
    import msgspec

    classes = [ak.ComponentSpec, ak.Pack, ak.Task, ak.RunSpec, ak.Budget]
    classes += [c for root in (ak.Pack, ak.Task, ak.RunSpec) for _, c in gen.nested_classes(root, "")]
    undocumented = [f"{cls.__name__}.{f.name}" for cls in classes for f in attrs.fields(cls)
                    if f.init and not gen.field_doc(cls, f.name, f.metadata)]
    assert not undocumented, f"keys without a doc (add a comment above the field): {undocumented}"
    for key in gen.FIELD_DOCS:
        cls_name, _, field = key.partition(".")
        cls = getattr(ak, cls_name)
        names = ([f.name for f in attrs.fields(cls) if f.init] if attrs.has(cls)
                 else [f.name for f in msgspec.structs.fields(cls)])
        assert field in names, f"FIELD_DOCS[{key!r}]: {cls_name} has no field {field!r}"


def test_field_docs_come_from_source_comments(gen):
    pack_page = (DOCS / "reference" / "pack.md").read_text(encoding="utf-8")
    assert "| `answer_checked` | `bool` | `False` | A pack over a world with no state to read" in pack_page
    assert "turn" in gen.field_comments(ak.Step)


def test_documented_oracle_action_forms_are_accepted():
    """The forms the pack page lists are what the oracle policy's parser accepts."""
    text = (DOCS / "reference" / "pack.md").read_text(encoding="utf-8")
    forms = re.findall(r"^\| `(\{.*?\})` \|", text, re.M)
    assert len(forms) == 3
    kinds = []
    for form in forms:
        value = json.loads(form.replace("NAME", '"t"').replace("TEXT", '"x"').replace("{...}", '{"a": 1}'))
        kinds.append(type(ak.to_action(value)).__name__)
    assert kinds == ["ToolCall", "ToolCall", "Answer"]


def test_the_command_checks_and_writes(tmp_path):
    def run(*args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}  # a set's order changes with it
        return subprocess.run([sys.executable, str(SCRIPT), "--kernel-only", *args], capture_output=True,
                              text=True, timeout=120, env=env)

    out = tmp_path / "docs"
    written = run("--docs", str(out), hash_seed="1")
    assert written.returncode == 0, written.stderr
    again = run("--check", "--docs", str(out), hash_seed="2")  # another process, other hashes: the same pages
    assert again.returncode == 0, again.stderr
    page = out / "reference" / "run-spec.md"
    page.write_text(page.read_text(encoding="utf-8").replace("Episodes per task", "Trials"), encoding="utf-8")
    stale = run("--check", "--docs", str(out))
    assert stale.returncode == 1 and "reference/run-spec.md: stale" in stale.stderr
    assert "Traceback" not in stale.stderr
    not_a_dir = tmp_path / "file.md"
    not_a_dir.write_text("x", encoding="utf-8")
    bad = run("--docs", str(not_a_dir))
    assert bad.returncode == 2 and f"{not_a_dir}: --docs: expected a directory" in bad.stderr
    assert "Traceback" not in bad.stderr


class _Null:
    """A world with no tools (to load run specs against)."""

    def reset(self, seed: int) -> Any:
        return ak.Observation("")

    def tools(self) -> list[Any]:
        return []

    def step(self, call: Any) -> Any:
        return ak.Observation("", error=True)

    def close(self) -> None:
        pass


def test_the_run_spec_limits_on_the_page_are_the_loaders(tmp_path):
    class Plugin:
        @hookimpl
        def register_environments(self, register: Any) -> None:
            register("blank", _Null)

    host = PluginHost()
    host.add_plugin(_kernel_builtins(), "builtins")
    host.add_plugin(Plugin(), "throwaway")
    text = (DOCS / "reference" / "run-spec.md").read_text(encoding="utf-8")
    limits = {key: int(value.replace(",", "")) for key, value in
              re.findall(r"`(\w+)` is at least 1 and at most ([\d,]+)", text)}
    assert set(limits) == {"trials", "concurrency", "max_steps"}
    for key, high in limits.items():
        for value, ok in ((high, True), (high + 1, False), (0, False)):
            spec = tmp_path / f"{key}-{value}.yaml"
            spec.write_text(f"policy: noop\nenvironment: blank\ntasks: [{{id: t, instruction: x, checkers: [{{type: called_tool, tool: x}}]}}]\n"
                            f"{key}: {value}\n",
                            encoding="utf-8")
            if ok:
                ak.load_run_spec(spec, host=host)
            else:
                with pytest.raises(ak.SpecError, match=key):
                    ak.load_run_spec(spec, host=host)


def _kernel_builtins() -> Any:
    from importlib.metadata import entry_points

    return next(ep for ep in entry_points(group="agentsynth", name="builtins")).load()


def test_cli_page_shows_the_kernels_commands_only(gen, kernel_pages, monkeypatch):
    """A plugin's subcommand joins the ``pack`` group once the CLI loads plugins (in the same
    process as this test, perhaps): the page must not change with it; a changed option must."""
    import click

    page = kernel_pages["reference/cli.md"]
    assert "| `-k`, `--trials` | integer >= 1 | `1` |" in page and "### `agentsynth pack validate`" in page
    group = dict(gen._builtin_commands())["pack"]

    @click.command("throwaway")
    def throwaway() -> None:
        """A plugin's subcommand."""

    monkeypatch.setitem(group.commands, "throwaway", throwaway)
    assert gen.render_cli() == page
    option = next(p for p in dict(gen._builtin_commands())["bench"].params if p.name == "seed")
    monkeypatch.setattr(option, "help", "Changed without regenerating the pages.")
    assert gen.render_cli() != page
