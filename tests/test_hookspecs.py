"""The hook contract: every hook is documented with an example, the reference page is
current, every hook is exercised by a test, and each one really works end to end."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import click
import pytest

from agentsynth_kernel import hookimpl, hookspecs
from agentsynth_kernel.engine import run
from agentsynth_kernel.spec import load_run_spec

ROOT = Path(__file__).resolve().parent.parent


def _gen_docs_module():
    spec = importlib.util.spec_from_file_location("gen_hook_docs", ROOT / "scripts" / "gen_hook_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOKS = _gen_docs_module().hook_names()


def test_there_are_hooks():
    assert {"register_environments", "register_packs", "register_commands", "run_finished"} <= set(HOOKS)


@pytest.mark.parametrize("name", HOOKS)
def test_hook_is_documented_with_an_example(name):
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert "Example::" in doc and "@hookimpl" in doc, f"{name}: docstring needs an Example:: with @hookimpl"


def test_reference_page_is_current():
    expected = _gen_docs_module().render()
    actual = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert actual == expected, "docs/hooks.md is stale: run `python scripts/gen_hook_docs.py`"


@pytest.mark.parametrize("name", HOOKS)
def test_hook_is_exercised_by_some_test(name):
    sources = [p for p in [*ROOT.glob("tests/**/*.py"), *ROOT.glob("plugins/*/tests/**/*.py")]
               if p.name != "test_hookspecs.py"]
    sources.append(Path(__file__))
    assert any(f"def {name}(" in p.read_text(encoding="utf-8") for p in sources), f"no test implements {name}"


class Everything:
    """A throw-away plugin implementing every capability hook once."""

    def __init__(self):
        self.events: list[str] = []

    @hookimpl
    def register_environments(self, register):
        register("hk_environment", object, description="env")

    @hookimpl
    def register_checkers(self, register):
        register("hk_checker", object)

    @hookimpl
    def register_policies(self, register):
        register("hk_policy", object)

    @hookimpl
    def register_judges(self, register):
        register("hk_judge", HalfJudge)

    @hookimpl
    def register_generators(self, register):
        register("hk_generator", object)

    @hookimpl
    def register_exporters(self, register):
        register("hk_exporter", object)

    @hookimpl
    def register_importers(self, register):
        register("hk_importer", object)

    @hookimpl
    def register_domains(self, register):
        register("hk_domain", object)

    @hookimpl
    def register_executors(self, register):
        register("hk_executor", object)

    @hookimpl
    def register_packs(self, register):
        register("hk_pack", Path("somewhere"))

    @hookimpl
    def register_commands(self, cli):
        @cli.command("hk-hello")
        @click.argument("who")
        def hello(who):
            """Say hello (test command)."""
            click.echo(f"hello {who}")

    @hookimpl
    def scaffold_pack(self, name, directory, environment, schema):
        if environment != "hk":
            return None
        (directory / "pack.yaml").write_text(f"id: {name}\n")
        return [directory / "pack.yaml"]

    @hookimpl
    def run_generation(self, spec_file, spec, run_dir, json_path, quiet):
        if spec.generate.type != "hk_generator":
            return None
        click.echo(f"generating with {spec.generate.params} into {run_dir}")
        return 7

    @hookimpl
    def run_started(self, run):
        self.events.append(f"started {run.total}")

    @hookimpl
    def episode_finished(self, run, result):
        self.events.append(f"finished {result.task_id} {result.status}")

    @hookimpl
    def run_finished(self, run, results):
        self.events.append(f"done {len(results)}")


class HalfJudge:
    def score(self, trajectory, verdicts):
        from agentsynth_kernel import JudgeResult

        return JudgeResult(0.5, {"tidiness": 0.25}, "meh")


def test_every_capability_hook_registers_its_kind(host):
    info = host.add_plugin(Everything(), "everything")
    assert info.errors == []
    for kind in ("environment", "checker", "policy", "judge", "generator", "exporter", "importer", "domain",
                 "executor", "pack"):
        assert host.get(kind, f"hk_{kind}").plugin == "everything"
    assert host.get("environment", "hk_environment").description == "env"


def test_lifecycle_hooks_and_judge_in_a_run(host, write, kv_spec):
    plugin = Everything()
    host.add_plugin(plugin, "everything")
    spec_path = write("spec2.yaml", kv_spec.read_text() + "judge: hk_judge\n")
    spec, pack = load_run_spec(spec_path, host=host)
    report = run(spec, pack, host=host)
    assert plugin.events[0] == "started 2"
    assert sorted(plugin.events[1:3]) == ["finished del-a passed", "finished set-b passed"]
    assert plugin.events[3] == "done 2"
    assert report.results[0].scores == {"judge": 0.5, "judge.tidiness": 0.25}


def test_register_commands_adds_a_cli_command(host, cli):
    from agentsynth_kernel.cli import LazyGroup

    host.add_plugin(Everything(), "everything")
    LazyGroup._plugins_loaded = False
    try:
        code, out, _ = cli("hk-hello", "world")
    finally:
        from agentsynth_kernel.cli import cli as group

        group.commands.pop("hk-hello", None)
        LazyGroup._plugins_loaded = False
    assert (code, out) == (0, "hello world\n")


def test_scaffold_pack_is_first_result_and_may_decline(host, tmp_path):
    host.add_plugin(Everything(), "everything")
    written = host.pm.hook.scaffold_pack(name="p", directory=tmp_path, environment="hk", schema=None)
    assert written == [tmp_path / "pack.yaml"] and (tmp_path / "pack.yaml").read_text() == "id: p\n"
    declined = host.pm.hook.scaffold_pack(name="p", directory=tmp_path, environment="nope-env", schema=None)
    assert declined is None


def test_run_generation_hands_a_generate_spec_to_its_plugin(host, cli, write):
    host.add_plugin(Everything(), "everything")
    write("gen.yaml", """
        environment: {type: kv}
        tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: a, value: null}]}]
        generate: {type: hk_generator, rounds: 2}
        """)
    code, out, err = cli("run", "gen.yaml", "--run-dir", "rd")
    assert (code, out) == (7, "generating with {'rounds': 2} into rd\n"), err
    write("gen2.yaml", """
        environment: {type: kv}
        tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: a, value: null}]}]
        generate: {type: hk_generatr}
        """)
    code, _, err = cli("run", "gen2.yaml")
    assert code == 2 and "generate.type: unknown generator 'hk_generatr' (did you mean 'hk_generator'?)" in err


def test_generator_without_a_runner_is_a_clear_error(host, cli, write):
    class Bare:
        @hookimpl
        def register_generators(self, register):
            register("bare_gen", object)

    host.add_plugin(Bare(), "bare")
    write("gen.yaml", """
        environment: {type: kv}
        tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: a, value: null}]}]
        generate: bare_gen
        """)
    code, _, err = cli("run", "gen.yaml")
    assert code == 2
    assert "generate.type: generator 'bare_gen' (plugin 'bare') cannot be run from a spec" in err


class PackExtension:
    @hookimpl
    def register_commands(self, cli):
        @cli.commands["pack"].command("hk-shout")
        @click.argument("what")
        def shout(what):
            """Shout (a plugin's subcommand of the built-in pack group)."""
            click.echo(what.upper())


@pytest.mark.parametrize("first", ["pack", "plugin-command"])
def test_a_plugin_adds_a_subcommand_to_the_builtin_pack_group(host, cli, first):
    from agentsynth_kernel.cli import LazyGroup
    from agentsynth_kernel.cli import cli as group

    host.add_plugin(PackExtension(), "pack-extension")
    host.add_plugin(Everything(), "everything")
    LazyGroup._plugins_loaded = False
    group.commands.pop("pack", None)  # as in a fresh process: the group is loaded on first use
    try:
        if first == "plugin-command":  # plugin commands load before anyone asked for `pack`
            assert cli("hk-hello", "x")[0] == 0
        code, out, err = cli("pack", "hk-shout", "quiet")
        _, listing, _ = cli("pack", "--help")
    finally:
        group.commands.pop("hk-hello", None)
        group.commands.pop("pack", None)
        LazyGroup._plugins_loaded = False
    assert (code, out) == (0, "QUIET\n"), err
    assert "hk-shout" in listing and "validate" in listing


class HubStandIn:
    """A leaderboard hub plugin, in-process (the real one is agentsynth-hub): accepts runs whose
    stored episodes all passed, and knows one pack that is not installed."""

    def __init__(self, pack_dir):
        self.pack_dir, self.submitted = pack_dir, []

    @hookimpl
    def submit_run(self, run_dir, url):
        from agentsynth_kernel import RunStore

        store = RunStore(run_dir, create=False)
        try:
            statuses = [r.status for r in store.results()]
        finally:
            store.close()
        self.submitted.append((url, len(statuses)))
        if statuses and all(s == "passed" for s in statuses):
            return {"accepted": True, "message": f"rank 1 of 1 ({len(statuses)} episodes)"}
        return {"accepted": False, "message": "replay: a verdict does not reproduce"}

    @hookimpl
    def resolve_remote_pack(self, ref, hub):
        return self.pack_dir if (ref, hub) == ("remote-kv", "http://hub.test") else None


def test_bench_submit_and_hub_packs_go_through_the_hub_hooks(host, cli, write, tmp_path, monkeypatch):
    write("remote/oracle.py", 'ORACLE = {"t": [{"tool": "set", "arguments": {"key": "a", "value": "1"}}, '
                              '{"answer": "ok"}]}\n')
    write("remote/pack.yaml", "id: remote-kv\nenvironment: {type: kv}\ntasks:\n"
                              "  - {id: t, instruction: Set a to 1, checkers: [{type: kv_equals, key: a, value: '1'}]}\n")
    hub = HubStandIn(tmp_path / "remote")
    host.add_plugin(hub, "hub-stand-in")
    monkeypatch.setenv("AGENTSYNTH_HUB_URL", "")  # recorded, so the value --hub sets is undone after the test
    monkeypatch.delenv("AGENTSYNTH_HUB_URL")
    code, _, err = cli("bench", "--pack", "remote-kv", "--policy", "oracle", "-q")
    assert code == 2 and "no such pack 'remote-kv'" in err  # not installed, no hub given
    code, out, err = cli("bench", "--pack", "remote-kv", "--policy", "oracle", "--hub", "http://hub.test",
                         "--submit", "http://hub.test")
    assert code == 0, err
    assert "submitted: rank 1 of 1 (1 episodes)" in out and hub.submitted == [("http://hub.test", 1)]
    code, _, err = cli("bench", "--pack", "remote-kv", "--policy", "noop", "--hub", "http://hub.test",
                       "--submit", "http://hub.test")
    assert code == 6 and "refused: replay: a verdict does not reproduce" in err
    code, _, err = cli("bench", "--pack", "nope", "--policy", "noop", "--hub", "http://hub.test")
    assert code == 2 and "nor on the hub http://hub.test" in err
