"""Specs and packs are checked completely when they are loaded (issue 14, "Specs and packs"):
parameter types and bounds from the factories' annotations, run settings, hostile YAML,
``${VAR}`` expansion, and ``callable`` policies found from the spec that names them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pytest

from agentsynth_kernel import hookimpl
from agentsynth_kernel.engine import run
from agentsynth_kernel.errors import SpecError
from agentsynth_kernel.spec import (
    MAX_DEPTH,
    Bounds,
    expand_variables,
    load_pack,
    load_run_spec,
    read_spec_yaml,
)
from agentsynth_kernel.store import STORE_FILE

if TYPE_CHECKING:
    from collections.abc import Sequence as OnlyForTypeCheckers  # not importable at run time below

KV = """
environment: {type: kv, initial: {a: "1"}}
tasks:
  - id: set-b
    instruction: Set b to 2
    checkers: [{type: kv_equals, key: b, value: "2"}]
"""


def errors_of(path: Path, host: Any) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_run_spec(path, host=host)
    return str(info.value).splitlines()


# --- 1. parameter types and bounds -----------------------------------------------------------------


@pytest.mark.parametrize(("policy", "line"), [
    ("{type: random, calls: five}", "policy.calls: expected an integer, got str 'five'"),
    ("{type: random, calls: true}", "policy.calls: expected an integer, got bool True"),
    ("{type: noop, answer: [a]}", "policy.answer: expected a string, got a list"),
    ("{type: llm, model: openai/gpt-4o-mini, max_turns: 0}",
     "policy.max_turns: expected an integer >= 1 and <= 10000, got 0"),
    ("{type: llm, model: openai/gpt-4o-mini, max_turns: 2.5}", "policy.max_turns: expected an integer or null, got float 2.5"),
    ("{type: llm, model: openai/gpt-4o-mini, temperature: -1}",
     "policy.temperature: expected a number >= 0, got -1"),
    ("{type: llm, model: openai/gpt-4o-mini, timeout: 0}", "policy.timeout: expected a number > 0, got 0"),
    ("{type: llm, model: openai/gpt-4o-mini, timeout: .nan}", "policy.timeout: expected a number or null, got float nan"),
    ("{type: llm, model: 7}", "policy.model: expected a string, got int 7"),
    ("{type: callable, function: 'missing.py:act'}", "policy.function: file not found: {tmp}/missing.py"),
    ("{type: callable, function: 'no_such_module_xyz:act'}", "policy.function: no module named 'no_such_module_xyz'"),
    ("{type: callable, function: 'agent.py'}",
     "policy.function: 'agent.py': expected 'module:function' or 'file.py:function'"),
    ("{type: callable, function: 'os:getcwd', params: [1]}", "policy.params: expected a mapping or null, got a list"),
])
def test_builtin_policy_parameters_are_checked_at_load(write, host, tmp_path, policy, line):
    path = write("spec.yaml", KV + f"policy: {policy}\n")
    assert f"{path}: {line.format(tmp=tmp_path)}" in errors_of(path, host)


@pytest.mark.parametrize(("settings", "line"), [
    ("timeout: .nan", "timeout: expected a number, got nan"),
    ("timeout: .inf", "timeout: expected seconds > 0 and <= 604800 (7 days), got inf"),
    ("timeout: 0", "timeout: expected seconds > 0 and <= 604800 (7 days), got 0.0"),
    ("max_steps: 0", "max_steps: expected an integer >= 1 and <= 100,000, got 0"),
    ("trials: 1000000000", "trials: expected an integer >= 1 and <= 1,000,000, got 1000000000"),
    ("concurrency: 0", "concurrency: expected an integer >= 1 and <= 4,096, got 0"),
    ("seed: 1.5", "seed: expected an integer, got float 1.5"),
    ("seed: 100000000000000000000", "seed: expected a 64-bit integer, got 100000000000000000000"),
    ("budget: {usd: -1}", "budget.usd: expected a number >= 0, got -1.0"),
    ("budget: {usd: .nan}", "budget.usd: expected a number, got nan"),
    ("budget: {tokens: -5}", "budget.tokens: expected an integer >= 0, got -5"),
])
def test_run_settings_are_bounded(write, host, settings, line):
    path = write("spec.yaml", KV + "policy: noop\n" + settings + "\n")
    assert f"{path}: {line}" in errors_of(path, host)


def test_task_max_steps_is_bounded(write, host):
    path = write("spec.yaml", KV.replace("    instruction: Set b to 2\n", "    instruction: x\n    max_steps: 0\n")
                 + "policy: noop\n")
    assert f"{path}: tasks[0].max_steps: expected an integer >= 1 and <= 100000, got 0" in errors_of(path, host)


def test_checker_parameters_of_the_wrong_shape_fail_at_load(write, host):
    path = write("spec.yaml", """
        environment: {type: kv}
        policy: noop
        tasks:
          - id: a
            instruction: x
            checkers:
              - {type: answer_contains, text: {a: 1}}
              - {type: answer_contains, text: [ok, 3]}
              - {type: kv_equals, key: [k], value: 2}
              - {type: called_tool, tool: set, min_times: many}
        """)
    lines = errors_of(path, host)
    assert f"{path}: tasks[0].checkers[0].text: expected a string or a list, got a mapping" in lines
    assert f"{path}: tasks[0].checkers[1].text[1]: expected a string, got int 3" in lines
    assert f"{path}: tasks[0].checkers[2].key: expected a string, got a list" in lines
    assert f"{path}: tasks[0].checkers[2].value: expected a string or null, got int 2" in lines
    assert f"{path}: tasks[0].checkers[3].min_times: expected an integer, got str 'many'" in lines


class Annotated_:
    """A plugin whose factory uses Bounds, Literal, containers, and an annotation only type
    checkers can resolve (left unchecked, as before)."""

    @hookimpl
    def register_environments(self, register: Any) -> None:
        def world(size: Annotated[int, Bounds(low=1, high=9)] = 3, mode: Literal["fast", "safe"] = "safe",
                  weights: dict[str, float] | None = None, pairs: list[tuple[str, int]] = (),  # type: ignore[assignment]
                  hint: OnlyForTypeCheckers[int] | None = None, anything: Any = None) -> Any:
            raise AssertionError("never built: these tests only load")

        register("annotated", world)


@pytest.mark.parametrize(("params", "line"), [
    ("size: five", "environment.size: expected an integer, got str 'five'"),  # #23.4: no spec_cls needed
    ("size: 0", "environment.size: expected an integer >= 1 and <= 9, got 0"),
    ("mode: quick", "environment.mode: expected one of 'fast', 'safe', got str 'quick'"),
    ("weights: {a: heavy}", "environment.weights.a: expected a number, got str 'heavy'"),
    ("pairs: [[a, 1], [b]]", "environment.pairs[1]: expected a list of 2 values, got 1"),
    ("pairs: [[a, x]]", "environment.pairs[0][1]: expected an integer, got str 'x'"),
])
def test_plugin_annotations_type_and_bound_parameters(write, host, params, line):
    host.add_plugin(Annotated_(), "annotated-plugin")
    path = write("spec.yaml", f"environment: {{type: annotated, {params}}}\n"
                 "tasks: [{id: a, instruction: x, checkers: [answer_contains]}]\npolicy: noop\n")
    assert errors_of(path, host) == [f"{path}: {line}"]


def test_parameters_that_fit_their_annotations_load(write, host):
    host.add_plugin(Annotated_(), "annotated-plugin")
    path = write("spec.yaml", "environment: {type: annotated, size: 9, mode: fast, weights: {a: 1}, "
                 "pairs: [[a, 1]], hint: not-checked, anything: {x: [1]}}\n"
                 "tasks: [{id: a, instruction: x, checkers: [{type: answer_contains, text: ok}]}]\n"
                 "policy: {type: llm, model: openai/gpt-4o-mini, max_turns: 3, timeout: 2.5, temperature: 0}\n")
    spec, pack = load_run_spec(path, host=host)
    assert pack.environment is not None and pack.environment.params["hint"] == "not-checked"
    assert spec.policy.params["max_turns"] == 3


def test_a_spec_cls_that_raises_value_error_is_a_clean_error(write, host):
    import attrs

    @attrs.frozen
    class Spec:
        n: int = 1

        def __attrs_post_init__(self) -> None:
            if self.n > 5:
                raise ValueError("n must be at most 5")

    class Plugin:
        @hookimpl
        def register_environments(self, register: Any) -> None:
            register("strict", lambda spec: spec, spec_cls=Spec)

    host.add_plugin(Plugin(), "strict-plugin")
    path = write("spec.yaml", "environment: {type: strict, n: 6}\n"
                 "tasks: [{id: a, instruction: x, checkers: [answer_contains]}]\npolicy: noop\n")
    assert errors_of(path, host) == [f"{path}: environment: ValueError: n must be at most 5"]


# --- 2. hostile YAML ---------------------------------------------------------------------------------


def _timed_errors(path: Path, host: Any) -> list[str]:
    started = time.monotonic()
    lines = errors_of(path, host)
    assert time.monotonic() - started < 10  # generous: a hang shows up as minutes, not seconds
    return lines


def test_deep_nesting_is_a_clear_error(write, host):
    flow = write("flow.yaml", "policy: noop\nmetadata: " + "[" * 5000 + "]" * 5000 + "\n")
    (line,) = _timed_errors(flow, host)
    assert line.startswith(f"{flow}: ") and "nest" in line
    block = write("block.yaml", "policy: noop\nname: x\nbudget:\n" + "".join(
        "  " * (i + 1) + f"k{i}:\n" for i in range(MAX_DEPTH + 5)) + "  " * (MAX_DEPTH + 6) + "v: 1\n")
    (line,) = _timed_errors(block, host)
    assert line.startswith(f"{block}: budget.k0.k1.") and line.endswith(f"nested more than {MAX_DEPTH} levels deep")


def test_non_string_keys_are_clear_errors(write, host):
    top = write("top.yaml", "1: 2\npolicy: noop\n")
    assert _timed_errors(top, host) == [f"{top}: top level: keys must be names, got int 1"]
    nested = write("nested.yaml", KV + "policy: {type: noop, 3: x}\nbudget: {1.5: 2}\n")
    lines = _timed_errors(nested, host)
    assert f"{nested}: policy: expected a mapping with string keys, got the key int 3" in lines
    assert f"{nested}: budget: expected a mapping with string keys, got the key float 1.5" in lines


def test_huge_files_are_refused_quickly_and_big_scalars_load_quickly(write, host, tmp_path):
    huge = tmp_path / "huge.yaml"
    huge.write_text("policy: noop\nname: " + "a" * (10 * 1024 * 1024) + "\n")
    assert _timed_errors(huge, host) == [f"{huge}: file is larger than 5 MB: not a spec or pack"]
    big = tmp_path / "big.yaml"
    big.write_text(KV + "policy: noop\nname: " + "a" * (4 * 1024 * 1024) + "\n")
    started = time.monotonic()
    spec, _ = load_run_spec(big, host=host)
    assert len(spec.name) == 4 * 1024 * 1024 and time.monotonic() - started < 10


def test_alias_bombs_and_self_aliases_are_refused(write, host):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8))
    path = write("bomb.yaml", "policy: noop\nmetadata:\n" + "".join("  " + line + "\n" for line in bomb.splitlines()))
    (line,) = _timed_errors(path, host)
    assert line.startswith(f"{path}: ") and line.endswith("values (after expanding YAML aliases)")
    loop = write("loop.yaml", "policy: noop\nmetadata: &m {self: *m}\n")
    assert _timed_errors(loop, host) == [f"{loop}: metadata.self: a YAML alias contains itself"]


def test_shared_aliases_within_limits_still_load(write, host):
    path = write("spec.yaml", KV.replace('checkers: [{type: kv_equals, key: b, value: "2"}]',
                                         'checkers: &checks [{type: kv_equals, key: b, value: "2"}]')
                 + "  - {id: again, instruction: again, checkers: *checks}\npolicy: noop\n")
    _, pack = load_run_spec(path, host=host)
    assert [t.id for t in pack.tasks] == ["set-b", "again"]


# --- 3. ${VAR} -----------------------------------------------------------------------------------------


def test_variables_expand_in_every_string_of_specs_and_packs(write, host, monkeypatch, tmp_path):
    monkeypatch.setenv("AGS_KEY", "b")
    monkeypatch.setenv("AGS_TRIALS", "2")
    monkeypatch.delenv("AGS_UNSET", raising=False)
    write("pack/pack.yaml", """
        environment: {type: kv, initial: {a: "${AGS_UNSET:1}"}}
        tasks:
          - id: t
            instruction: "Set ${AGS_KEY} to 2 (cost: $${PRICE}, $5)"
            checkers: [{type: kv_equals, key: "${AGS_KEY}", value: "2"}]
        """)
    path = write("spec.yaml", "pack: pack\npolicy: {type: noop, answer: '${AGS_UNSET:}'}\ntrials: ${AGS_TRIALS}\n")
    spec, pack = load_run_spec(path, host=host)
    assert spec.trials == 2 and spec.policy.params["answer"] == ""
    assert pack.tasks[0].instruction == "Set b to 2 (cost: ${PRICE}, $5)"
    assert pack.tasks[0].checkers[0].params["key"] == "b"
    assert pack.environment is not None and pack.environment.params["initial"] == {"a": "1"}


def test_unset_and_malformed_variables_are_path_qualified_errors(write, host, monkeypatch):
    monkeypatch.delenv("AGS_NOPE", raising=False)
    path = write("spec.yaml", KV + "policy: {type: noop, answer: '${AGS_NOPE}'}\nname: '${1abc} ${open'\n")
    lines = errors_of(path, host)
    assert f"{path}: policy.answer: environment variable AGS_NOPE is not set (write ${{AGS_NOPE:default}} " \
           "for a default)" in lines
    assert f"{path}: name: invalid variable reference '${{1abc}}': expected ${{NAME}} or ${{NAME:default}} " \
           "(write $${ for a literal ${)" in lines
    assert any(line.startswith(f"{path}: name: invalid variable reference '${{'") for line in lines)


def test_unquoted_whole_references_take_the_type_of_their_value(write, monkeypatch):
    for name, value in {"X": "x", "N": "-3", "F": "1.5e3", "B": "True", "S": "0x1f"}.items():
        monkeypatch.setenv(f"AGS_{name}", value)
    path = write("data.yaml", 'a:\n  - ${AGS_X}\n  - "${AGS_X}-${AGS_Y:z}"\n  - $${AGS_X}\nn: ${AGS_N}\nq: "${AGS_N}"\n'
                 "f: ${AGS_F}\nb: ${AGS_B}\ns: ${AGS_S}\nd: ${AGS_Y:2}\n")
    assert read_spec_yaml(path, "test data") == {"a": ["x", "x-z", "${AGS_X}"], "n": -3, "q": "-3", "f": 1500.0,
                                                 "b": True, "s": "0x1f", "d": 2}
    assert expand_variables({"n": "${AGS_N}"}, "t", {"AGS_N": "4"}) == {"n": "4"}  # plain data: strings stay


def test_an_expanded_secret_never_reaches_the_run_directory(write, host, monkeypatch, tmp_path):
    monkeypatch.setenv("AGS_DB_PW", "hunter2-very-secret")  # in a URL's password
    monkeypatch.setenv("AGS_SESSION_SECRET", "opensesame-4711")  # a secret-named variable, any key
    write("agent.py", "def act(state, url, note):\n    return {'answer': f'done {url} {note}'}\n")
    path = write("spec.yaml", KV + "policy: {type: callable, function: 'agent.py:act', "
                 "params: {url: 'https://u:${AGS_DB_PW}@db.example/x', note: '${AGS_SESSION_SECRET}'}}\n")
    spec, pack = load_run_spec(path, host=host)
    run(spec, pack, host=host, run_dir=tmp_path / "run")
    for file in (tmp_path / "run").rglob("*"):
        if file.is_file():
            assert b"hunter2-very-secret" not in file.read_bytes(), file
            assert b"opensesame-4711" not in file.read_bytes(), file
    assert spec.policy.params["params"]["note"] == "opensesame-4711"  # the run itself gets the value


# --- 4. callable policies: found from the spec, any action shape -------------------------------------


AGENT = """
from agentsynth_kernel import ToolCall

def act(state):  # dicts, as an oracle may return them
    if not state.trajectory.steps:
        return {"tool": "set", "arguments": {"key": "b", "value": "2"}}
    return {"answer": "done"}

async def act_async(state):
    if not state.trajectory.steps:
        return [{"tool": "set", "arguments": {"key": "b", "value": "2"}}, ToolCall("get", {"key": "b"})]
    return None

def wrong(state):
    return {"neither": 1}
"""


def _named_pack(write: Any, host: Any) -> None:
    pack_file = write("elsewhere/kvpack/pack.yaml", KV)

    class Shipper:
        @hookimpl
        def register_packs(self, register: Any) -> None:
            register("kvpack", pack_file.parent)

    host.add_plugin(Shipper(), "kvpack-plugin")


def test_resolving_a_run_leaves_the_given_spec_as_it_was(write, host):
    """resolve_run hands back a finished copy (code files absolute) and leaves the given spec alone;
    resolve_pack, for callers that run the spec they passed, still finishes it in place."""
    from agentsynth_kernel import RunSpec, resolve_pack, resolve_run, structure

    _named_pack(write, host)
    write("project/agent.py", AGENT)
    path = write("project/spec.yaml", "pack: kvpack\npolicy: {type: callable, function: 'agent.py:act'}\n")
    given = structure({"pack": "kvpack", "policy": {"type": "callable", "function": "agent.py:act"}}, RunSpec,
                      source=str(path))
    finished, pack = resolve_run(given, base_dir=path.parent, source=str(path), host=host)
    assert given.policy.params["function"] == "agent.py:act"
    assert finished.policy.params["function"] == f"{path.parent / 'agent.py'}:act" and finished is not given
    # resolve_pack keeps its old contract for callers that run the spec they passed: finished in place
    assert resolve_pack(given, base_dir=path.parent, source=str(path), host=host).id == pack.id == "kvpack"
    assert given.policy == finished.policy


@pytest.mark.parametrize("function", ["act", "act_async"])
def test_callable_with_a_named_pack_finds_its_file_from_the_spec_and_returns_dicts(write, host, function):
    _named_pack(write, host)
    write("project/agent.py", AGENT)
    path = write("project/spec.yaml", f"pack: kvpack\npolicy: {{type: callable, function: 'agent.py:{function}'}}\n")
    spec, pack = load_run_spec(path, host=host)
    assert spec.policy.params["function"] == f"{path.parent / 'agent.py'}:{function}"  # absolute: stored so
    (result,) = run(spec, pack, host=host).results
    assert result.status == "passed", result.error or result.verdicts


def test_callable_returning_a_bad_dict_is_a_policy_error_naming_the_function(write, host):
    _named_pack(write, host)
    write("agent.py", AGENT)
    spec, pack = load_run_spec(write("spec.yaml", "pack: kvpack\npolicy: {type: callable, function: 'agent.py:wrong'}\n"),
                               host=host)
    (result,) = run(spec, pack, host=host).results
    assert result.error_kind == "policy" and "agent.py:wrong: returned: expected a ToolCall" in result.error


def test_run_from_another_directory_uses_the_spec_folder(cli, write, host, tmp_path, monkeypatch):
    _named_pack(write, host)
    write("project/agent.py", AGENT)
    write("project/spec.yaml", "pack: kvpack\npolicy: {type: callable, function: 'agent.py:act'}\n")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    code, out, err = cli("run", str(tmp_path / "project/spec.yaml"), "--run-dir", "r", "-q", "--json", "-")
    assert code == 0, err
    assert '"passed": 1' in out and (tmp_path / "cwd/r" / STORE_FILE).is_file()
    code, _, err = cli("resume", "r", "-q")  # the stored spec names the file absolutely
    assert code == 0, err


# --- no invalid spec exits 0 --------------------------------------------------------------------------


def test_a_run_where_every_episode_errors_exits_non_zero(cli, write):
    write("agent.py", "def act(state):\n    raise RuntimeError('cannot start')\n")
    write("spec.yaml", KV + "policy: {type: callable, function: 'agent.py:act'}\n")
    code, _, err = cli("run", "spec.yaml", "--no-store", "-q")
    assert code == 5
    assert "error: every episode ended in an error, nothing was checked; the first: set-b:" in err
    assert "cannot start" in err


def test_command_line_overrides_are_checked_like_the_spec(cli, write):
    write("spec.yaml", KV + "policy: noop\n")
    code, _, err = cli("run", "spec.yaml", "--no-store", "-q", "--budget-usd", "nan")
    assert code == 2 and "error: command line: budget.usd: expected a number >= 0, got nan" in err


def test_pack_files_get_the_same_checks(write, host):
    path = write("p/pack.yaml", KV.replace('value: "2"', "value: 2") + "metadata: {1: x}\n")
    with pytest.raises(SpecError) as info:
        load_pack(path.parent, host=host)
    lines = str(info.value).splitlines()
    assert f"{path}: metadata: expected a mapping with string keys, got the key int 1" in lines
