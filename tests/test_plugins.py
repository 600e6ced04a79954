"""Plugin discovery and isolation: broken, raising, duplicate and misspelled plugins are
reported by name and skipped, and everything else keeps working."""

from __future__ import annotations

import json

import pluggy
import pytest

from agentsynth_kernel import get_host, get_plugin_manager, hookimpl, reset_plugins
from conftest import run_agentsynth


def fake_distribution(site, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """A real installed-distribution layout (dist-info + modules) on a directory put on PYTHONPATH."""
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"  # installers normalise the name
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    eps = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[agentsynth]\n{eps}\n")
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)


def test_builtins_and_testworld_come_from_entry_points(host):
    info = {p.name: p for p in host.list_plugins()}
    assert info["builtins"].distribution == "agentsynth"
    assert info["testworld"].distribution == "agentsynth-testworld"
    assert set(info["builtins"].registered["policy"]) >= {"noop", "random", "callable", "oracle", "claim_success"}
    assert host.get("environment", "kv").plugin == "testworld"


def test_programmatic_use_without_the_cli():
    reset_plugins()
    try:
        pm = get_plugin_manager()
        assert isinstance(pm, pluggy.PluginManager)
        seen = []
        pm.hook.register_environments(register=lambda name, factory, **kw: seen.append(name))
        assert "kv" in seen
    finally:
        reset_plugins()


def test_hook_that_raises_is_reported_and_others_still_register(host):
    class Exploding:
        @hookimpl
        def register_checkers(self, register):
            register("boom_ok", lambda: None)
            raise RuntimeError("kaboom")

    info = host.add_plugin(Exploding(), "exploding")
    assert info.errors == ["register_checkers raised RuntimeError: kaboom"]
    assert host.get("checker", "boom_ok").plugin == "exploding"  # registered before the raise
    assert host.get("checker", "kv_equals").plugin == "testworld"


def test_duplicate_name_is_skipped_and_names_both_plugins(host):
    class Copycat:
        @hookimpl
        def register_environments(self, register):
            register("kv", object)
            register("kv2", object)

    info = host.add_plugin(Copycat(), "copycat")
    assert info.errors == [
        "duplicate environment name 'kv': already registered by plugin 'testworld';"
        " the one from plugin 'copycat' is skipped"
    ]
    assert host.get("environment", "kv").plugin == "testworld"
    assert host.get("environment", "kv2").plugin == "copycat"


def test_misspelled_hook_marks_the_plugin_broken(host):
    class Typo:
        @hookimpl
        def register_enviroments(self, register):
            register("never", object)

    info = host.add_plugin(Typo(), "typo")
    assert not info.loaded
    assert "register_enviroments" in info.errors[0]
    with pytest.raises(KeyError, match="broken plugins: typo"):
        host.get("environment", "never")


def test_bad_registration_is_reported(host):
    class Bad:
        @hookimpl
        def register_policies(self, register):
            register("not-callable", 42)

    info = host.add_plugin(Bad(), "bad")
    assert info.errors == ["register_policies raised PluginError: plugin 'bad': policy 'not-callable': factory is not callable"]


def test_lifecycle_observer_that_raises_does_not_stop_others(host):
    calls = []

    class Raises:
        @hookimpl
        def run_started(self, run):
            raise RuntimeError("observer bug")

    class Records:
        @hookimpl
        def run_started(self, run):
            calls.append(run)

    host.add_plugin(Raises(), "raises")
    host.add_plugin(Records(), "records")
    host.notify("run_started", run="R")
    assert calls == ["R"]


def test_remove_plugin_forgets_its_components(host):
    class Temp:
        @hookimpl
        def register_judges(self, register):
            register("temp", lambda: None)

    host.add_plugin(Temp(), "temp")
    assert "temp" in host.names("judge")
    host.remove_plugin("temp")
    assert "temp" not in host.names("judge")


def test_broken_entry_point_is_listed_and_others_keep_working(tmp_path, kv_spec):
    site = tmp_path / "site"
    fake_distribution(
        site, "agentsynth-broken", {"broken": "broken_plugin", "fine": "fine_plugin"},
        {
            "broken_plugin": "import module_that_does_not_exist\n",
            "fine_plugin": (
                "from agentsynth_kernel import hookimpl\n"
                "@hookimpl\n"
                "def register_judges(register):\n"
                "    register('fine-judge', lambda: None)\n"
            ),
        },
    )
    env = {"PYTHONPATH": str(site)}
    listing = run_agentsynth("plugins", "--json", cwd=tmp_path, env=env)
    assert listing.returncode == 0, listing.stderr
    plugins = {p["name"]: p for p in json.loads(listing.stdout)}
    assert plugins["broken"]["loaded"] is False
    assert plugins["broken"]["distribution"] == "agentsynth-broken"
    assert "ModuleNotFoundError: No module named 'module_that_does_not_exist'" in plugins["broken"]["errors"][0]
    assert plugins["fine"]["registered"] == {"judge": ["fine-judge"]}
    text = run_agentsynth("plugins", cwd=tmp_path, env=env).stdout
    assert "broken [BROKEN]  (agentsynth-broken 0.1)" in text
    run = run_agentsynth("run", str(kv_spec), "--no-store", "-q", "--json", "-", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["counts"]["passed"] == 2


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AGENTSYNTH_DISABLE_PLUGIN_AUTOLOAD": "1"}, {"builtins"}),
        ({"AGENTSYNTH_LOAD_PLUGINS": ""}, {"builtins"}),
        ({"AGENTSYNTH_LOAD_PLUGINS": "testworld"}, {"builtins", "testworld"}),
        ({"AGENTSYNTH_DISABLE_PLUGINS": "testworld,builtins"}, {"builtins"}),
    ],
)
def test_environment_switches(monkeypatch, env, expected):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    reset_plugins()
    try:
        names = {p.name for p in get_host().list_plugins()}
        assert {"builtins", "testworld"} & names == expected
    finally:
        reset_plugins()


def test_trace_switch_prints_hook_calls(tmp_path):
    result = run_agentsynth("plugins", cwd=tmp_path, env={"AGENTSYNTH_TRACE_PLUGINS": "1"})
    assert result.returncode == 0
    assert "register_environments" in result.stderr


def test_the_plugin_listing_is_cached_and_a_cached_listing_imports_no_plugin(tmp_path):
    """``agentsynth plugins`` loads every plugin once, then reads the cache (≤8x ``python -c pass``)
    until an entry point, a version or an editable plugin's source changes."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import agentsynth_testworld

    env = {**os.environ, "AGENTSYNTH_CACHE_DIR": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    probe = ("import sys\nfrom agentsynth_kernel.cli import main\ntry:\n    main(['plugins'])\n"
             "except SystemExit:\n    pass\n"
             "print('IMPORTED', sorted(m for m in sys.modules if m.startswith(('agentsynth_testworld', 'pluggy'))))")

    def listing() -> tuple[str, str]:
        proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out, _, imported = proc.stdout.rpartition("IMPORTED ")
        return out, imported

    first, first_imports = listing()
    assert "agentsynth_testworld" in first_imports and "kv" in first
    again, again_imports = listing()
    assert again == first
    assert "agentsynth_testworld" not in again_imports and "pluggy" not in again_imports
    source = Path(agentsynth_testworld.__file__)
    stat = source.stat()
    try:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # an edit to the plugin
        edited, edited_imports = listing()
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert edited == first and "agentsynth_testworld" in edited_imports


def test_a_pack_distribution_registers_its_pack_without_any_code(tmp_path, host):
    """`pip install agentsynth-pack-NAME`: an entry point naming a package with pack.yaml and no hooks."""
    import types

    from agentsynth_kernel import load_pack
    from agentsynth_kernel.plugins import _pack_distribution, _PackDistribution

    package = tmp_path / "agentsynth_pack_demo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "pack.yaml").write_text(
        "id: demo\nenvironment: {type: kv}\ntasks:\n"
        "  - {id: t, instruction: x, checkers: [{type: kv_equals, key: a, value: '1'}]}\n")
    module = types.ModuleType("agentsynth_pack_demo")
    module.__file__ = str(package / "__init__.py")
    assert _pack_distribution(module) == package
    with_hooks = types.ModuleType("agentsynth_other")
    with_hooks.__file__ = str(package / "__init__.py")
    with_hooks.register_packs = hookimpl(lambda register: None)
    assert _pack_distribution(with_hooks) is None  # a plugin registers its packs itself
    bare = types.ModuleType("agentsynth_bare")
    bare.__file__ = str(tmp_path / "__init__.py")
    assert _pack_distribution(bare) is None  # no pack.yaml: an ordinary (if empty) plugin
    info = host.add_plugin(_PackDistribution("demo", package, "agentsynth-pack-demo"), "demo")
    try:
        assert info.errors == [] and info.registered == {"pack": ["demo"]}
        pack = load_pack("demo", host=host)
        assert pack.id == "demo" and pack.content_hash and [t.id for t in pack.tasks] == ["t"]
    finally:
        host.remove_plugin("demo")
