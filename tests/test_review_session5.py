"""Review of the kernel changes of session 5 (lazy_exports, oracle_actions, "module:attribute"
registration, resolve_run, pack new --from-demo on a SyncWorker), as probes against the real code.

A probe passes when the behaviour is right; one marked ``xfail(strict=True)`` shows a bug the review
found (the reason says which), so the suite stays green until it is fixed.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentsynth_kernel import AgentsynthError, PluginError, hookimpl
from agentsynth_kernel.plugins import PluginHost

ROOT = Path(__file__).resolve().parents[1]
TOGETHER = ROOT / ".nox" / "together" / "bin" / "python"


def together(code: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``code`` in the venv where every plugin is installed (skipped where there is none)."""
    if not TOGETHER.is_file():
        pytest.skip("no .nox/together venv")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="review5-cache-") as cache:  # no listing cache read or left behind
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_CACHE_DIR": cache}
        return subprocess.run([str(TOGETHER), "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=str(ROOT))


# --- 1. "module:attribute" registration ---------------------------------------------------------------


def _register_env(ref: Any, name: str = "lazyenv") -> tuple[PluginHost, Any]:
    class Plugin:
        @hookimpl
        def register_environments(self, register):
            register(name, ref)

    host = PluginHost()
    return host, host.add_plugin(Plugin(), "refplug")


@pytest.mark.parametrize("ref", [":KVWorld", "agentsynth_testworld:", ":", "agentsynth_testworld"])
def test_a_reference_without_module_or_attribute_is_refused_when_registered(ref):
    _host, info = _register_env(ref)
    assert info.registered == {} and any("factory is not callable" in e for e in info.errors)


def test_a_good_reference_resolves_to_the_named_object_dotted_attributes_too():
    import os.path

    import agentsynth_testworld

    host, info = _register_env("agentsynth_testworld:KVWorld")
    assert info.errors == [] and host.get("environment", "lazyenv").factory is agentsynth_testworld.KVWorld
    host, _ = _register_env("os:path.join", "joiner")
    assert host.get("environment", "joiner").factory is os.path.join


@pytest.mark.parametrize("ref", ["agentsynth_testworld:KVWorld:extra", "agentsynth_testworld:KVWorld..x",
                                 "not a module:KVWorld", ".env:KVWorld"])
def test_a_malformed_reference_is_refused_when_registered(ref):
    _host, info = _register_env(ref)
    assert info.registered == {} and info.errors


def test_a_reference_that_does_not_import_fails_where_it_is_used_naming_plugin_and_reference():
    host, info = _register_env("agentsynth_no_such_module_xyz:World")
    assert info.errors == ["environment 'lazyenv': factory 'agentsynth_no_such_module_xyz:World': no module named "
                           "'agentsynth_no_such_module_xyz'"]  # listed now, and still named where it is used
    reg = host.get("environment", "lazyenv")
    with pytest.raises(PluginError) as exc:
        _ = reg.factory
    message = str(exc.value)
    assert "plugin 'refplug'" in message and "environment 'lazyenv'" in message
    assert "agentsynth_no_such_module_xyz:World" in message and "ModuleNotFoundError" in message


def test_a_reference_to_a_non_callable_is_named_when_used():
    host, _ = _register_env("agentsynth_testworld:_STR")
    with pytest.raises(PluginError, match=r"plugin 'refplug': environment 'lazyenv': factory is not callable"):
        _ = host.get("environment", "lazyenv").factory


def test_a_spec_cls_reference_to_a_non_attrs_class_is_named_when_used():
    class Plugin:
        @hookimpl
        def register_environments(self, register):
            register("withspec", "agentsynth_testworld:KVWorld", spec_cls="agentsynth_testworld:KVWorld")

    host = PluginHost()
    assert host.add_plugin(Plugin(), "specplug").errors == []
    with pytest.raises(PluginError, match=r"plugin 'specplug': environment 'withspec': spec_cls must be an attrs class"):
        _ = host.get("environment", "withspec").spec_cls


SLOW_MODULE = """
import time
time.sleep(0.3)  # a heavy import: every thread asking for it meanwhile must wait for the same module

class World:
    pass
"""


def test_threads_resolving_one_reference_at_once_all_get_the_same_object(tmp_path, monkeypatch):
    (tmp_path / "review5_slow_world.py").write_text(SLOW_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    host, _ = _register_env("review5_slow_world:World")
    reg = host.get("environment", "lazyenv")
    got: list[Any] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(12)

    def resolve() -> None:
        barrier.wait()
        try:
            got.append(reg.factory)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=resolve) for _ in range(12)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == [] and len(got) == 12 and len({id(g) for g in got}) == 1
        assert got[0] is sys.modules["review5_slow_world"].World
    finally:
        sys.modules.pop("review5_slow_world", None)


BROKEN_SPEC = """
environment: {type: brokenworld}
tasks:
  - id: t1
    instruction: anything
    checkers: [{type: kv_equals, key: b, value: "2"}]
policy: {type: noop}
"""


class BrokenRefPlugin:
    @hookimpl
    def register_environments(self, register):
        register("brokenworld", "agentsynth_review5_missing_module:World", description="a typo in the module name")


def test_a_run_of_a_world_whose_reference_does_not_import_is_a_named_error_not_a_traceback(host, cli, write):
    host.add_plugin(BrokenRefPlugin(), "brokenref")
    write("spec.yaml", BROKEN_SPEC)
    code, out, err = cli("run", "spec.yaml", "-q")
    assert code != 0
    assert "plugin 'brokenref'" in err and "agentsynth_review5_missing_module" in err, err
    assert "Traceback" not in err and "this is a bug" not in err, err


def test_a_world_whose_factory_reference_breaks_after_its_spec_checked_is_refused_before_any_episode(
        host, cli, write):
    """spec_cls resolves, the factory does not: checking the spec resolves both (lead, after the
    review), so the run is refused up front with one named problem instead of erroring every episode."""
    import attrs

    @attrs.frozen
    class WorldSpec:
        initial: dict = attrs.field(factory=dict)

    class Plugin:
        @hookimpl
        def register_environments(self, register):
            register("brokenworld", "agentsynth_review5_missing_module:World", spec_cls=WorldSpec)

    host.add_plugin(Plugin(), "halfbroken")
    write("spec.yaml", BROKEN_SPEC.replace("policy:", "  - {id: t2, instruction: more, checkers: [{type: kv_equals, key: c, value: '3'}]}\npolicy:"))
    code, out, err = cli("run", "spec.yaml", "--run-dir", "rd")
    assert code != 0 and "Traceback" not in err
    assert "plugin 'halfbroken': environment 'brokenworld': cannot import" in err, err
    assert "spec.yaml" in err and "agentsynth_review5_missing_module:World" in err


def test_the_plugins_command_lists_the_string_registered_components_of_real_plugins():
    proc = together("""
        import json, subprocess, sys
        out = subprocess.run([sys.executable, "-m", "agentsynth_kernel", "plugins", "--json"], capture_output=True,
                             text=True, check=True).stdout
        infos = {p["name"]: p for p in json.loads(out)}
        print(json.dumps({n: [i["registered"], i["errors"], i["loaded"]] for n, i in infos.items()
                          if n in ("rest", "mcp", "browser", "generate", "composite", "bfcl")}))
    """)
    assert proc.returncode == 0, proc.stderr
    infos = json.loads(proc.stdout.strip().splitlines()[-1])
    assert infos, proc.stdout
    for name, (registered, errors, loaded) in infos.items():
        assert loaded and errors == [] and registered, (name, registered, errors)
    if "rest" in infos:
        assert infos["rest"][0]["checker"] == ["http", "rest_db"] and infos["rest"][0]["environment"] == ["rest"]


def test_agentsynth_plugins_reports_a_reference_whose_module_does_not_exist(host, cli):
    host.add_plugin(BrokenRefPlugin(), "brokenref")
    code, out, err = cli("plugins", "--json")
    assert code == 0, err
    info = next(p for p in json.loads(out) if p["name"] == "brokenref")
    assert info["errors"], info


def test_a_pack_validation_with_a_checker_whose_reference_does_not_import_names_the_plugin(host, cli, write):
    class Plugin:
        @hookimpl
        def register_checkers(self, register):
            register("brokencheck", "agentsynth_review5_missing_module:Check")

    host.add_plugin(Plugin(), "brokencheckplug")
    write("pack/pack.yaml", """
        id: brokenpack
        environment: {type: kv}
        tasks:
          - id: t1
            instruction: set b
            checkers: [{type: brokencheck}]
    """)
    code, out, err = cli("pack", "validate", "pack")
    assert code != 0
    assert "plugin 'brokencheckplug'" in (out + err) and "Traceback" not in err and "this is a bug" not in err, err


def test_loading_every_plugin_imports_none_of_the_string_registered_component_modules():
    proc = together("""
        import sys
        from agentsynth_kernel.commands.plugins import plugin_listing
        plugin_listing()  # what `agentsynth plugins` computes when nothing is cached
        lazy = ["agentsynth_rest.env", "agentsynth_rest.checkers", "agentsynth_mcp.environment",
                "agentsynth_mcp.checkers", "agentsynth_browser.environment", "agentsynth_browser.checkers",
                "agentsynth_generate.api", "agentsynth_generate.spec", "agentsynth_bfcl.env"]
        print([m for m in lazy if m in sys.modules])
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_loading_the_composite_plugin_does_not_import_its_environment_module():
    proc = together("""
        import sys
        from agentsynth_kernel import get_host
        get_host()
        print("agentsynth_composite.env" in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


def test_string_registered_components_of_real_plugins_resolve():
    proc = together("""
        from agentsynth_kernel import get_host
        host = get_host()
        bad = []
        for kind, entries in host.registry.items():
            for name, reg in entries.items():
                if isinstance(reg._factory, str) and kind != "pack":
                    try:
                        reg.factory, reg.spec_cls
                    except Exception as exc:
                        bad.append(f"{kind} {name}: {exc}")
        print(bad)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


# --- 2. lazy_exports --------------------------------------------------------------------------------


def test_plugin_namespaces_support_dir_star_import_submodules_and_pickling():
    proc = together("""
        import pickle, sys
        import agentsynth_mcp, agentsynth_generate, agentsynth_browser, agentsynth_rest
        before = sorted(m for m in sys.modules if m.startswith(("agentsynth_mcp.", "agentsynth_generate.",
                                                                 "agentsynth_browser.", "agentsynth_rest.")))
        assert before == [], before
        for pkg in (agentsynth_mcp, agentsynth_generate, agentsynth_browser, agentsynth_rest):
            assert set(pkg.__all__) <= set(dir(pkg)), pkg
        ns = {}
        exec("from agentsynth_mcp import *", ns)
        assert {"McpEnvironment", "jsonpath", "__version__"} <= set(ns)
        assert agentsynth_mcp.jsonpath is sys.modules["agentsynth_mcp.jsonpath"]
        assert agentsynth_mcp.__version__ == "0.1.0"
        spec = agentsynth_generate.GenerateSpec.__module__
        assert not hasattr(agentsynth_mcp, "nothing_here")
        err = None
        try:
            agentsynth_mcp.nothing_here
        except AttributeError as exc:
            err = str(exc)
        assert err == "module 'agentsynth_mcp' has no attribute 'nothing_here'", err
        from agentsynth_generate import GenerateSpec
        import attrs
        fields = attrs.fields_dict(GenerateSpec)
        print("ok")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "ok"


def test_kernel_namespace_pickles_lazily_exported_classes_and_star_imports():
    code = textwrap.dedent("""
        import pickle, sys
        import agentsynth_kernel as ak
        assert sorted(m for m in sys.modules if m.startswith("agentsynth_kernel.")) == ["agentsynth_kernel.lazy"]
        assert set(ak.__all__) <= set(dir(ak)) and "lazy_exports" in dir(ak)
        ns = {}
        exec("from agentsynth_kernel import *", ns)
        assert set(ak.__all__) <= set(ns)
        task = ak.Task("t", "do it")
        assert pickle.loads(pickle.dumps(task)) == task
        call = ak.ToolCall("set", {"k": 1}, id="c1")
        assert pickle.loads(pickle.dumps(call)) == call
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_lazy_exports_of_a_package_that_defines_a_name_itself_keeps_its_own(tmp_path):
    pkg = tmp_path / "review5pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from agentsynth_kernel import lazy_exports\n"
                                     "Own = 'own'\n"
                                     "__getattr__, __dir__ = lazy_exports(__name__, {'Own': 'sub', 'Sub': 'sub'})\n")
    (pkg / "sub.py").write_text("Own = 'from sub'\nSub = 'sub'\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import review5pkg\n"
            "print(review5pkg.Own, review5pkg.Sub, dir(review5pkg).count('Own'))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["own", "sub", "1"]


# --- 3. oracle_actions --------------------------------------------------------------------------------


def _kv_pack(write: Any, oracle: str, name: str = "kvoracle") -> Any:
    from agentsynth_kernel import load_pack

    write(f"{name}/oracle.py", oracle)
    write(f"{name}/pack.yaml", f"""
        id: {name}
        environment: {{type: kv, initial: {{a: "1"}}}}
        tasks:
          - id: set-b
            instruction: Set b to 2
            checkers: [{{type: kv_equals, key: b, value: "2"}}]
          - id: del-a
            instruction: Delete a
            checkers: [{{type: kv_equals, key: a, value: null}}]
    """)
    return load_pack(tmp_dir(write) / name)


def tmp_dir(write: Any) -> Path:
    return write(".review5-keep", "").parent


def test_an_oracle_that_does_not_import_is_a_named_error_for_the_oracle_policy_too(write):
    from agentsynth_kernel import oracle_actions
    from agentsynth_kernel.builtins.policies import OraclePolicy

    pack = _kv_pack(write, "raise RuntimeError('oracle import exploded')\n")
    for make in (lambda: oracle_actions(pack, pack.tasks[0]), lambda: OraclePolicy(pack.tasks[0], pack)):
        with pytest.raises(AgentsynthError, match=r"oracle\.py: .*RuntimeError: oracle import exploded"):
            make()


def test_an_oracle_table_without_the_task_is_none_and_the_oracle_policy_names_it(write):
    from agentsynth_kernel import oracle_actions
    from agentsynth_kernel.builtins.policies import OraclePolicy

    pack = _kv_pack(write, "ORACLE = {'set-b': [{'answer': 'x'}]}\n")
    assert oracle_actions(pack, pack.tasks[1]) is None
    with pytest.raises(AgentsynthError, match=r"ORACLE has no entry for task 'del-a'"):
        OraclePolicy(pack.tasks[1], pack)


def test_the_oracle_policy_names_an_oracle_file_that_does_not_exist(write):
    from agentsynth_kernel.builtins.policies import OraclePolicy

    pack = _kv_pack(write, "ORACLE = {}\n")
    with pytest.raises(AgentsynthError, match=r"missing\.py: the pack's oracle file does not exist"):
        OraclePolicy(pack.tasks[0], pack, file="missing.py")


def test_oracle_actions_are_what_the_oracle_gives_without_an_invented_answer(write):
    from agentsynth_kernel import Answer, oracle_actions

    pack = _kv_pack(write, "ORACLE = {'set-b': [{'tool': 'set', 'arguments': {'key': 'b', 'value': '2'}}], "
                           "'del-a': []}\n")
    actions = oracle_actions(pack, pack.tasks[0])
    assert actions is not None and not any(isinstance(a, Answer) for a in actions), actions


def test_an_oracle_whose_solve_raises_gives_its_own_exception_as_before_the_refactor(write):
    """Unchanged by the refactor: solve()'s exception is not wrapped (an OraclePolicy's episode is a
    policy error carrying it)."""
    from agentsynth_kernel import oracle_actions

    pack = _kv_pack(write, "def solve(task):\n    raise KeyError(task.id)\n")
    with pytest.raises(Exception) as exc:
        oracle_actions(pack, pack.tasks[0])
    assert exc.type is KeyError  # as before the refactor: solve's own exception, not wrapped


# --- 4. resolve_run -------------------------------------------------------------------------------------


AGENT = """
def act(state):
    if not state.trajectory.steps:
        return {"tool": "set", "arguments": {"key": "b", "value": "2"}}
    return {"answer": "done"}
"""

KVPACK = """
id: kvnamed
environment: {type: kv, initial: {a: "1"}}
tasks:
  - id: set-b
    instruction: Set b to 2
    checkers: [{type: kv_equals, key: b, value: "2"}]
"""


def _ship_named_pack(write: Any, host: Any) -> None:
    pack_file = write("site/kvnamed/pack.yaml", KVPACK)

    class Shipper:
        @hookimpl
        def register_packs(self, register: Any) -> None:
            register("kvnamed", pack_file.parent)

    host.add_plugin(Shipper(), "kvnamed-plugin")


def test_resolve_run_spec_runs_from_any_directory_and_the_given_spec_is_unchanged(write, host, tmp_path, monkeypatch):
    from agentsynth_kernel import RunSpec, execute, resolve_run, structure

    _ship_named_pack(write, host)
    write("project/agent.py", AGENT)
    given = structure({"pack": "kvnamed", "policy": {"type": "callable", "function": "agent.py:act"}}, RunSpec,
                      source="test")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    spec, pack = resolve_run(given, base_dir=tmp_path / "project", source="test", host=host)
    assert given.policy.params == {"function": "agent.py:act"}
    run = asyncio.run(execute(spec, pack))
    assert [r.status for r in run.results] == ["passed"], [r.error for r in run.results]


def test_the_resolve_pack_then_execute_pattern_still_runs_a_callable_policy_with_a_named_pack(
        write, host, tmp_path, monkeypatch):
    from agentsynth_kernel import RunSpec, execute, resolve_pack, structure

    _ship_named_pack(write, host)
    write("project/agent.py", AGENT)
    spec = structure({"pack": "kvnamed", "policy": {"type": "callable", "function": "agent.py:act"}}, RunSpec,
                     source="test")
    monkeypatch.chdir(tmp_path)
    pack = resolve_pack(spec, base_dir=tmp_path / "project", source="test", host=host)
    run = asyncio.run(execute(spec, pack))
    assert [r.status for r in run.results] == ["passed"], [r.error for r in run.results]


def test_a_stored_run_with_a_relative_callable_policy_resumes_and_verifies_from_elsewhere(
        write, host, cli, tmp_path, monkeypatch):
    _ship_named_pack(write, host)
    write("project/agent.py", AGENT)
    write("project/spec.yaml", "pack: kvnamed\npolicy: {type: callable, function: 'agent.py:act'}\ntrials: 2\n")
    code, out, err = cli("run", "project/spec.yaml", "--run-dir", "rd", "-q")
    assert code == 0, err
    stored = json.dumps(_stored_spec(tmp_path / "rd"))
    assert str(tmp_path / "project" / "agent.py") in stored  # the finished spec is what the store holds
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for command in (("resume", str(tmp_path / "rd")), ("verify", str(tmp_path / "rd"))):
        code, out, err = cli(*command)
        assert code == 0, (command, out, err)


def _stored_spec(run_dir: Path) -> Any:
    from agentsynth_kernel import open_run

    store = open_run(run_dir)
    try:
        return store.get_meta("spec")
    finally:
        store.close()


# --- 5. pack new --from-demo on a worker thread -------------------------------------------------------


_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


class TrackedWorld:
    """The kv world, remembering its live instances and where it was closed."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from agentsynth_testworld import KVWorld

        class World(KVWorld):
            def close(self) -> None:
                super().close()
                self.closed_on = threading.current_thread().name

        world = World(*args, **kwargs)
        _LIVE.add(world)
        return world


class DemoPlugin:
    @hookimpl
    def register_environments(self, register):
        register("tracked", TrackedWorld)

    @hookimpl
    def checks_from_demo(self, environment, world, trajectory):
        if environment != "tracked":
            return None
        changed = {k: world.data.get(k) for k in {*world.data, *world.initial}
                   if world.data.get(k) != world.initial.get(k)}
        return {"changes": len(changed), "checkers": [{"type": "kv_equals", "key": k, "value": v}
                                                        for k, v in sorted(changed.items())],
                "thread": threading.current_thread().name}


def _demo(write: Any, actions: list[Any]) -> Path:
    doc = {"environment": {"type": "tracked", "initial": {"a": "1"}}, "id": "set-b", "instruction": "Set b to 2",
           "actions": actions}
    return write("demo.yaml", yaml.safe_dump(doc, sort_keys=False))


SET_B = {"tool": "set", "arguments": {"key": "b", "value": "2"}}


def test_the_demo_hook_runs_on_the_thread_that_played_the_world(host, write):
    from agentsynth_kernel.commands import pack_demo

    host.add_plugin(DemoPlugin(), "demoplug")
    seen: list[str] = []

    class Spy:
        @hookimpl(hookwrapper=True)
        def checks_from_demo(self, environment, world, trajectory):
            seen.append(threading.current_thread().name)
            yield

    host.add_plugin(Spy(), "spy")
    demo = pack_demo.load_demo(_demo(write, [SET_B, {"answer": "done"}]), host=host)
    checks, _traj = asyncio.run(pack_demo.play(demo, host=host, timeout=30))
    assert seen == ["agentsynth-episode"] and checks["checkers"] == [{"type": "kv_equals", "key": "b", "value": "2"}]


def test_a_played_demonstration_leaves_no_world_alive(host, write):
    from agentsynth_kernel.commands import pack_demo

    host.add_plugin(DemoPlugin(), "demoplug")
    _LIVE.clear()
    demo = pack_demo.load_demo(_demo(write, [SET_B, {"answer": "done"}]), host=host)
    for _ in range(3):
        asyncio.run(pack_demo.play(demo, host=host, timeout=30))
    del demo
    gc.collect()
    # one world may stay: the idle pooled worker thread keeps its last job (env.close) until its next
    # job (pre-existing in SyncWorker, episodes too); the lambdas keep every one
    assert len(_LIVE) <= 1, len(_LIVE)


def test_a_demonstration_that_times_out_closes_its_world_promptly(host, write):
    from agentsynth_kernel.commands import pack_demo

    host.add_plugin(DemoPlugin(), "demoplug")
    _LIVE.clear()
    demo = pack_demo.load_demo(_demo(write, [{"tool": "sleep", "arguments": {"seconds": 8}}, SET_B]), host=host)
    started = time.monotonic()
    with pytest.raises(AgentsynthError, match="did not finish within 0.5s"):
        asyncio.run(pack_demo.play(demo, host=host, timeout=0.5))
    elapsed = time.monotonic() - started
    worlds = list(_LIVE)
    assert worlds and all(w.closed for w in worlds) and elapsed < 3, (elapsed, [w.closed for w in worlds])


def test_pack_new_from_a_demo_in_the_real_sql_world(tmp_path):
    """The sql plugin's hook reads the world's connection: on the worker thread that played it, it works."""
    proc = together(f"""
        import subprocess, sys, yaml, pathlib
        from agentsynth_kernel import load_pack
        core = load_pack("core")
        task = core.tasks[0]
        env = core.task_environment(task)
        root = pathlib.Path({str(tmp_path)!r})
        from agentsynth_kernel import oracle_actions, ToolCall, Answer
        actions = []
        for a in oracle_actions(core, task):
            actions.append({{"tool": a.name, "arguments": a.arguments}} if isinstance(a, ToolCall) else {{"answer": a.content}})
        params = {{k: (str(core.base_dir / v) if isinstance(v, str) and (core.base_dir / v).is_file() else v)
                  for k, v in env.params.items()}}
        doc = {{"environment": {{"type": env.type, **params}}, "id": task.id, "instruction": task.instruction,
               "actions": actions}}
        (root / "demo.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        proc = subprocess.run([sys.executable, "-m", "agentsynth_kernel", "pack", "new", "madepack", "--from-demo",
                               str(root / "demo.yaml"), "-o", str(root / "made")], capture_output=True, text=True,
                              cwd=str(core.base_dir))
        print(proc.returncode, proc.stdout[-800:], proc.stderr[-1500:])
    """, timeout=400)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("0 "), proc.stdout


class KVDemoHook:
    """checks_from_demo for the kernel's kv world: the keys the demonstration changed."""

    @hookimpl
    def checks_from_demo(self, environment, world, trajectory):
        if environment != "kv":
            return None
        changed = {k: world.data.get(k) for k in {*world.data, *world.initial}
                   if world.data.get(k) != world.initial.get(k)}
        return {"changes": len(changed), "checkers": [{"type": "kv_equals", "key": k, "value": v}
                                                        for k, v in sorted(changed.items())]}


def test_pack_new_from_a_stored_episode_reads_the_finished_stored_spec(host, cli, kv_spec, tmp_path):
    """--from-demo RUN_DIR/TASK goes through load_stored_spec (now resolve_run): it still finds the
    pack and the episode, and the pack it writes passes its oracle."""
    host.add_plugin(KVDemoHook(), "kvdemo")
    code, _out, err = cli("run", str(kv_spec), "--run-dir", "rd", "-q")
    assert code == 0, err
    code, out, err = cli("pack", "new", "kvmade", "--from-demo", "rd/set-b", "-o", "made")
    assert code == 0, (out, err)
    from agentsynth_kernel import load_pack

    pack = load_pack(tmp_path / "made")
    assert [c.params for c in pack.tasks[0].checkers] == [{"key": "b", "value": "2"}]


def test_a_pack_registered_with_a_module_attribute_string_is_refused_or_named():
    from agentsynth_kernel import load_pack

    class Plugin:
        @hookimpl
        def register_packs(self, register):
            register("strpack", "agentsynth_testworld:packs")

    host = PluginHost()
    info = host.add_plugin(Plugin(), "packplug")
    if info.errors:
        return
    with pytest.raises(Exception) as exc:
        load_pack("strpack", host=host)
    assert "packplug" in str(exc.value) or "strpack" in str(exc.value), str(exc.value)


def test_registration_keeps_its_keyword_api_and_evolves():
    import attrs

    from agentsynth_kernel.plugins import Registration
    from agentsynth_testworld import KVWorld

    reg = Registration(kind="environment", name="kv2", factory="agentsynth_testworld:KVWorld", plugin="p",
                       spec_cls=None)
    assert reg.factory is KVWorld and reg.spec_cls is None
    moved = attrs.evolve(reg, factory=KVWorld)
    assert moved.factory is KVWorld and moved.plugin == "p"


def test_played_demonstrations_leave_no_worker_thread_behind(host, write):
    from agentsynth_kernel.commands import pack_demo

    host.add_plugin(DemoPlugin(), "demoplug")
    demo = pack_demo.load_demo(_demo(write, [SET_B, {"answer": "done"}]), host=host)
    asyncio.run(pack_demo.play(demo, host=host, timeout=30))
    before = sum(t.name == "agentsynth-episode" for t in threading.enumerate())
    for _ in range(5):
        asyncio.run(pack_demo.play(demo, host=host, timeout=30))
    assert sum(t.name == "agentsynth-episode" for t in threading.enumerate()) <= before


class SlowCloseWorld:
    """The kv world whose close takes a while (a container removed, a browser shut down under load)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from agentsynth_testworld import KVWorld

        class World(KVWorld):
            def close(self) -> None:
                time.sleep(6)
                super().close()

        world = World(*args, **kwargs)
        _LIVE.add(world)
        return world


class SlowClosePlugin(DemoPlugin):
    @hookimpl
    def register_environments(self, register):
        register("tracked", SlowCloseWorld)


def test_a_successful_demonstration_waits_for_a_slow_close(host, write):
    from agentsynth_kernel.commands import pack_demo

    host.add_plugin(SlowClosePlugin(), "slowclose")
    _LIVE.clear()
    demo = pack_demo.load_demo(_demo(write, [SET_B, {"answer": "done"}]), host=host)
    checks, _ = asyncio.run(pack_demo.play(demo, host=host, timeout=60))
    assert checks["checkers"] == [{"type": "kv_equals", "key": "b", "value": "2"}]
    assert [w.closed for w in _LIVE] == [True]


RELOAD_V1 = "class World:\n    version = 1\n"
RELOAD_V2 = "class World:\n    version = 2  # edited: a longer file, so the bytecode cache sees the change\n"


def test_a_fresh_host_resolves_a_reference_to_the_module_as_it_is_now(tmp_path, monkeypatch):
    import importlib

    path = tmp_path / "review5_reloaded_world.py"
    path.write_text(RELOAD_V1)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        host, _ = _register_env("review5_reloaded_world:World")
        assert host.get("environment", "lazyenv").factory.version == 1
        path.write_text(RELOAD_V2)
        importlib.invalidate_caches()
        assert importlib.reload(sys.modules["review5_reloaded_world"]).World.version == 2
        fresh, _ = _register_env("review5_reloaded_world:World")
        assert fresh.get("environment", "lazyenv").factory.version == 2
    finally:
        sys.modules.pop("review5_reloaded_world", None)


# --- 6. lazy_exports in a plugin whose entry point is its package ------------------------------------

LAZY_PLUGIN_INIT = '''
"""A plugin whose package is its entry point, exporting a heavy class lazily (as lazy.py advises)."""
from agentsynth_kernel import hookimpl, lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {"HeavyWorld": "heavy"})


@hookimpl
def register_environments(register):
    register("heavy", "review5plug.heavy:HeavyWorld", description="imported on first use")
'''


def _lazy_plugin_distribution(root: Path, heavy: str) -> dict[str, str]:
    """An installed distribution (dist-info on the path) whose entry point is a package using lazy_exports."""
    info = root / "review5plug-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: review5plug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[agentsynth]\nreview5plug = review5plug\n")
    (root / "review5plug").mkdir()
    (root / "review5plug" / "__init__.py").write_text(LAZY_PLUGIN_INIT)
    (root / "review5plug" / "heavy.py").write_text(heavy)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
            "AGENTSYNTH_CACHE_DIR": str(root / "cache"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def test_loading_a_plugin_package_with_lazy_exports_imports_none_of_them(tmp_path):
    env = _lazy_plugin_distribution(tmp_path, "class HeavyWorld:\n    pass\n")
    code = ("import sys\nfrom agentsynth_kernel import get_host\nhost = get_host()\n"
            "print('review5plug' in host.plugins, 'review5plug.heavy' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "False"]


def test_a_plugin_package_whose_lazy_export_cannot_import_does_not_break_every_command(tmp_path):
    env = _lazy_plugin_distribution(tmp_path, "import review5_optional_dependency_not_installed\n\n"
                                              "class HeavyWorld:\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "agentsynth_kernel", "plugins", "--json"], capture_output=True,
                          text=True, env=env, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    names = {p["name"] for p in json.loads(proc.stdout)}
    assert {"builtins", "review5plug"} <= names


class SqliteWorld:
    """A world on a thread-bound sqlite3 connection (check_same_thread=True), opened at reset."""

    def __init__(self, initial: dict[str, str] | None = None) -> None:
        self.initial = dict(initial or {})
        self.conn: Any = None

    def reset(self, seed: int) -> Any:
        import sqlite3

        from agentsynth_kernel import Observation

        self.conn = sqlite3.connect(":memory:")  # usable only on the thread that opened it
        self.conn.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)")
        self.conn.executemany("INSERT INTO kv VALUES (?, ?)", self.initial.items())
        return Observation("ready")

    def tools(self) -> list[Any]:
        from agentsynth_kernel import ToolSpec

        return [ToolSpec("set", "Set a key", {"type": "object", "properties": {"key": {"type": "string"},
                                                                               "value": {"type": "string"}}})]

    def step(self, call: Any) -> Any:
        from agentsynth_kernel import Observation

        self.conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (call.arguments["key"], call.arguments["value"]))
        return Observation("ok")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class SqliteDemoPlugin:
    @hookimpl
    def register_environments(self, register):
        register("sqlitekv", SqliteWorld)

    @hookimpl
    def checks_from_demo(self, environment, world, trajectory):
        if environment != "sqlitekv":
            return None
        rows = dict(world.conn.execute("SELECT k, v FROM kv"))  # on the thread that played the world
        changed = {k: v for k, v in rows.items() if world.initial.get(k) != v}
        return {"changes": len(changed), "checkers": [{"type": "kv_equals", "key": k, "value": v}
                                                        for k, v in sorted(changed.items())]}


def test_a_world_on_a_thread_bound_sqlite_connection_plays_and_its_hook_reads_it(host, write):
    from agentsynth_kernel.commands import pack_demo

    host.add_plugin(SqliteDemoPlugin(), "sqlitedemo")
    doc = {"environment": {"type": "sqlitekv", "initial": {"a": "1"}}, "id": "set-b", "instruction": "Set b to 2",
           "actions": [SET_B, {"answer": "done"}]}
    path = write("demo.yaml", yaml.safe_dump(doc, sort_keys=False))
    checks, traj = asyncio.run(pack_demo.play(pack_demo.load_demo(path, host=host), host=host, timeout=30))
    assert checks["checkers"] == [{"type": "kv_equals", "key": "b", "value": "2"}]
    assert [s.observation.content for s in traj.steps if s.observation is not None] == ["ok"]


def test_composite_exploits_fall_back_to_their_claim_for_an_oracle_without_an_answer(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "pack.yaml").write_text("id: noanswer\nenvironment: {type: kv}\n"
                                              "tasks:\n  - {id: t1, instruction: do it}\n")
    (tmp_path / "p" / "oracle.py").write_text("ORACLE = {'t1': [{'tool': 'db__set', 'arguments': {'k': 'v'}}]}\n")
    proc = together(f"""
        from agentsynth_kernel import load_pack
        from agentsynth_composite.exploits import CLAIM, _final_answer, oracle_actions
        pack = load_pack({str(tmp_path / "p")!r}, validate=False)
        print(_final_answer(oracle_actions(pack, pack.tasks[0])) == CLAIM, oracle_actions(pack, pack.tasks[0]))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split(" ", 1)[0] == "True", proc.stdout


class KVPerturb:
    """perturb_task for the kv world: relabel the value '2' as '3'."""

    @hookimpl
    def perturb_task(self, pack, task, seed):
        from agentsynth_kernel.testing.adversarial import PerturbedTask

        if pack.environment is None or pack.environment.type != "kv":
            return None
        return PerturbedTask.by_mapping(pack, task, {"2": "3"})


def test_sibling_problems_replays_the_oracle_of_a_perturbable_task(host, write):
    from agentsynth_kernel.testing.adversarial import sibling_problems

    host.add_plugin(KVPerturb(), "kvperturb")
    pack = _kv_pack(write, "ORACLE = {'set-b': [{'tool': 'set', 'arguments': {'key': 'b', 'value': '2'}}, "
                           "{'answer': 'done'}], 'del-a': [{'tool': 'delete', 'arguments': {'key': 'a'}}]}\n")
    assert asyncio.run(sibling_problems(pack, pack.tasks[0], host=host, timeout=30)) == ("ok", "")


def test_sibling_problems_name_a_task_the_oracle_table_lacks(host, write):
    from agentsynth_kernel.testing.adversarial import sibling_problems

    host.add_plugin(KVPerturb(), "kvperturb")
    pack = _kv_pack(write, "ORACLE = {'del-a': [{'tool': 'delete', 'arguments': {'key': 'a'}}]}\n")
    try:
        found = asyncio.run(sibling_problems(pack, pack.tasks[0], host=host, timeout=30))
    except AgentsynthError as exc:
        assert "set-b" in str(exc)
        return
    assert found is not None and "set-b" in found[1], found
