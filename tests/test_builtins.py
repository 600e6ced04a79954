"""Built-in policies and checkers, run through the real engine on the kv testworld env."""

from __future__ import annotations

import random

import pytest

from agentsynth_kernel.builtins.policies import random_value
from agentsynth_kernel.engine import run
from agentsynth_kernel.errors import AgentsynthError, SpecError
from agentsynth_kernel.spec import load_run_spec

TASKS = """
environment: {type: kv, initial: {a: "1"}}
oracle: oracle.py
tasks:
  - id: set-b
    instruction: Set b to 2
    checkers: [{type: kv_equals, key: b, value: "2"}]
  - id: del-a
    instruction: Delete a
    checkers: [{type: kv_equals, key: a, value: null}]
"""


def run_with(write, host, policy: str, extra: str = ""):
    spec_path = write("spec.yaml", TASKS + f"policy: {policy}\n" + extra)
    spec, pack = load_run_spec(spec_path, host=host)
    return {r.task_id: r for r in run(spec, pack, host=host).results}


@pytest.mark.parametrize("policy", ["noop", "claim_success", "{type: random, calls: 2}"])
def test_floor_policies_fail_outcome_checked_tasks(write, host, kv_spec, policy):
    results = run_with(write, host, policy)
    assert [r.status for r in results.values()] == ["failed", "failed"]


def test_oracle_passes_and_records_its_steps(write, host, kv_spec):
    results = run_with(write, host, "oracle")
    assert all(r.status == "passed" for r in results.values())
    steps = results["set-b"].trajectory.steps
    assert steps[0].action.name == "set" and steps[0].observation.content == "ok"
    assert results["set-b"].trajectory.final_answer == "done"


def test_oracle_with_solve_function(write, host):
    write("oracle.py", """
def solve(task):
    if task.id == "set-b":
        return [{"tool": "set", "arguments": {"key": "b", "value": "2"}}]
    return [{"tool": "delete", "arguments": {"key": "a"}}]
""")
    results = run_with(write, host, "oracle")
    assert all(r.status == "passed" for r in results.values())


def test_oracle_missing_entry_is_a_policy_error(write, host):
    write("oracle.py", "ORACLE = {'set-b': []}\n")
    results = run_with(write, host, "oracle")
    assert results["del-a"].status == "error" and results["del-a"].error_kind == "policy"
    assert "ORACLE has no entry for task 'del-a'" in results["del-a"].error
    assert results["set-b"].status == "failed"


def test_random_policy_is_reproducible_per_seed(write, host):
    write("oracle.py", "ORACLE = {}\n")
    first = run_with(write, host, "{type: random, calls: 3}")
    second = run_with(write, host, "{type: random, calls: 3}")
    calls = lambda rs: [(c.name, c.arguments) for r in rs.values() for c in r.trajectory.tool_calls]  # noqa: E731
    assert calls(first) == calls(second) and len(calls(first)) >= 4
    other_seed = run_with(write, host, "{type: random, calls: 3}", "seed: 7\n")
    assert calls(other_seed) != calls(first)


def test_random_values_respect_the_schema():
    rng = random.Random(1)
    schema = {
        "type": "object", "required": ["n", "kind"],
        "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 9}, "kind": {"enum": ["a", "b"]},
                       "tags": {"type": "array", "items": {"type": "string"}}},
    }
    for _ in range(50):
        value = random_value(schema, rng)
        assert 5 <= value["n"] <= 9 and value["kind"] in ("a", "b")
        assert all(isinstance(t, str) for t in value.get("tags", []))


def test_callable_policy_from_a_file_sync_and_async(write, host):
    write("agent.py", """
from agentsynth_kernel import ToolCall, Answer

def act(state):
    if not state.trajectory.steps:
        key = "b" if "b" in state.instruction else "a"
        return ToolCall("set", {"key": key, "value": "2"}) if key == "b" else ToolCall("delete", {"key": "a"})
    return Answer("ok")

class Agent:
    def __init__(self, greeting):
        self.greeting = greeting

    async def act(self, state):
        return act(state)
""")
    write("oracle.py", "ORACLE = {}\n")
    results = run_with(write, host, "{type: callable, function: 'agent.py:act'}")
    assert all(r.status == "passed" for r in results.values())
    results = run_with(write, host, "{type: callable, function: 'agent.py:Agent', params: {greeting: hi}}")
    assert all(r.status == "passed" for r in results.values())


def test_callable_policy_bad_reference(write, host):
    write("oracle.py", "ORACLE = {}\n")
    with pytest.raises(SpecError) as caught:  # caught when the spec loads, not episode by episode
        run_with(write, host, "{type: callable, function: 'agent.py'}")
    assert "policy.function: 'agent.py': expected 'module:function' or 'file.py:function'" in str(caught.value)


def test_called_tool_and_answer_contains(write, host, kv_spec):
    extra = """
    checkers:
      - {type: called_tool, tool: set, arguments: {key: b}}
      - {type: answer_contains, text: [DONE], regex: "^d"}
"""
    spec_path = write("spec.yaml", TASKS.replace(
        '    checkers: [{type: kv_equals, key: b, value: "2"}]\n', "    checkers:\n" + extra.split("checkers:\n", 1)[1]
    ) + "policy: oracle\n")
    spec, pack = load_run_spec(spec_path, host=host)
    result = {r.task_id: r for r in run(spec, pack, host=host).results}["set-b"]
    assert result.status == "passed", result.verdicts
    assert [v.checker for v in result.verdicts] == ["called_tool", "answer_contains"]
    assert result.verdicts[0].detail == "set({'key': 'b'}) called 1 time(s), expected >= 1"


def test_answer_contains_needs_text_or_regex():
    from agentsynth_kernel.builtins.checkers import AnswerContains

    with pytest.raises(ValueError, match="needs 'text' or 'regex'"):
        AnswerContains()


def test_import_errors_are_clear(tmp_path):
    from agentsynth_kernel.importing import import_object

    with pytest.raises(AgentsynthError, match="cannot import module 'no_such_mod'"):
        import_object("no_such_mod:f")
    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(AgentsynthError, match="has no attribute 'y'"):
        import_object("m.py:y", base_dir=tmp_path)


def test_import_file_is_thread_safe(tmp_path):
    import threading

    from agentsynth_kernel.importing import import_file

    (tmp_path / "slow.py").write_text("import time\ntime.sleep(0.2)\nREADY = True\n")
    seen, threads = [], []
    for _ in range(4):
        t = threading.Thread(target=lambda: seen.append(getattr(import_file(tmp_path / "slow.py"), "READY", False)))
        threads.append(t)
        t.start()
    for t in threads:
        t.join()
    assert seen == [True] * 4
