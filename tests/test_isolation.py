"""A failing environment, checker or policy fails its own episode (error recorded with who
failed); the run goes on, and the other episodes keep their verdicts."""

from __future__ import annotations

import asyncio
import time

from agentsynth_kernel import Answer, ToolCall, Verdict, hookimpl
from agentsynth_kernel.engine import execute, run
from agentsynth_kernel.spec import load_run_spec

SPEC = """
environment: {type: kv}
oracle: oracle.py
tasks:
  - id: good
    instruction: set x
    checkers: [{type: kv_equals, key: x, value: "1"}]
  - id: env-crash
    instruction: crash the world
    checkers: [{type: kv_equals, key: x, value: "1"}]
  - id: reset-crash
    instruction: never starts
    environment: {broken_reset: true}
    checkers: [{type: kv_equals, key: x, value: "1"}]
  - id: checker-crash
    instruction: set x
    checkers: [{type: exploding_checker}]
  - id: slow
    instruction: sleeps too long
    checkers: [{type: kv_equals, key: x, value: "1"}]
  - id: chatty
    instruction: never stops calling tools
    max_steps: 3
    checkers: [{type: kv_equals, key: x, value: "1"}]
policy: oracle
timeout: 1.5
"""

ORACLE = """
SET = {"tool": "set", "arguments": {"key": "x", "value": "1"}}
ORACLE = {
    "good": [SET],
    "env-crash": [{"tool": "fail", "arguments": {}}],
    "reset-crash": [SET],
    "checker-crash": [SET],
    "slow": [{"tool": "sleep", "arguments": {"seconds": 30}}, SET],
    "chatty": [{"tool": "get", "arguments": {"key": "y"}}] * 10,
}
"""


class ExplodingChecker:
    def check(self, env, trajectory):
        raise ValueError("checker bug")


class Checkers:
    @hookimpl
    def register_checkers(self, register):
        register("exploding_checker", ExplodingChecker)


def test_each_failure_is_confined_to_its_episode(write, host):
    host.add_plugin(Checkers(), "exploding")
    write("oracle.py", ORACLE)
    spec, pack = load_run_spec(write("spec.yaml", SPEC), host=host)
    started = time.perf_counter()
    results = {r.task_id: r for r in run(spec, pack, host=host).results}
    assert time.perf_counter() - started < 20  # the 30 s sleep was abandoned at the 1.5 s timeout

    assert results["good"].status == "passed"
    assert (results["env-crash"].status, results["env-crash"].error_kind) == ("error", "environment")
    assert "RuntimeError: the world broke" in results["env-crash"].error
    assert (results["reset-crash"].error_kind, "reset exploded" in results["reset-crash"].error) == ("environment", True)
    assert results["checker-crash"].error_kind == "checker" and "checker bug" in results["checker-crash"].error
    assert results["slow"].error_kind == "timeout"
    assert results["slow"].error.startswith("episode exceeded its timeout of 1.5s")
    chatty = results["chatty"]
    assert chatty.status == "failed" and len(chatty.trajectory.steps) == 3
    assert chatty.trajectory.metadata["stopped"] == "max_steps"


def test_policy_exception_and_bad_return_type(write, host):
    host.add_plugin(Checkers(), "exploding")
    write("agent.py", """
def boom(state):
    raise KeyError("policy bug")

def wrong(state):
    return 42
""")
    base = SPEC.split("policy: oracle")[0].replace("oracle: oracle.py\n", "")
    for function, message in (("boom", "KeyError: 'policy bug'"), ("wrong", "got int")):
        spec_path = write("spec.yaml", base + f"policy: {{type: callable, function: 'agent.py:{function}'}}\nonly: [good]\n")
        spec, pack = load_run_spec(spec_path, host=host)
        (result,) = run(spec, pack, host=host).results
        assert result.error_kind == "policy" and message in result.error


def test_concurrency_is_bounded(write, host):
    in_flight = {"now": 0, "max": 0}

    class Slow:
        async def act(self, state):
            in_flight["now"] += 1
            in_flight["max"] = max(in_flight["max"], in_flight["now"])
            await asyncio.sleep(0.02)
            in_flight["now"] -= 1
            return [ToolCall("set", {"key": "x", "value": "1"}), Answer("done")]

    class Policies:
        @hookimpl
        def register_policies(self, register):
            register("slow", Slow)

    host.add_plugin(Policies(), "slow-policy")
    spec_path = write("spec.yaml", """
environment: {type: kv}
tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: x, value: "1"}]}]
policy: slow
trials: 12
concurrency: 3
""")
    spec, pack = load_run_spec(spec_path, host=host)
    report = asyncio.run(execute(spec, pack, host=host))
    assert len(report.results) == 12 and all(r.passed for r in report.results)
    assert in_flight["max"] == 3
    # parallel tool calls of one turn share a turn number; the answer is the next action
    steps = report.results[0].trajectory.steps
    assert [s.turn for s in steps] == [0, 0]
    assert isinstance(steps[1].action, Answer)


def test_non_verdict_from_checker_is_a_checker_error(write, host):
    class Liar:
        def check(self, env, trajectory):
            return True

    class Reg:
        @hookimpl
        def register_checkers(self, register):
            register("liar", Liar)

    host.add_plugin(Reg(), "liar")
    spec_path = write("spec.yaml", """
environment: {type: kv}
tasks: [{id: t, instruction: x, checkers: [liar]}]
policy: noop
""")
    spec, pack = load_run_spec(spec_path, host=host)
    (result,) = run(spec, pack, host=host).results
    assert result.error_kind == "checker" and "returned bool, not a Verdict" in result.error
    assert Verdict  # the type named in the message


def test_failing_judge_leaves_the_world_verdict_standing(write, host, kv_spec):
    from agentsynth_kernel import JudgeResult, Usage

    class Flaky:
        def score(self, trajectory, verdicts):
            if trajectory.task_id == "set-b":
                raise RuntimeError("judge model said nonsense")
            return JudgeResult(0.9, {"style": 1.0}, usage=Usage(100, 20, 0.002, 1))

    class Reg:
        @hookimpl
        def register_judges(self, register):
            register("flaky", Flaky)

    host.add_plugin(Reg(), "flaky")
    spec, pack = load_run_spec(write("spec.yaml", kv_spec.read_text() + "judge: flaky\n"), host=host)
    results = {r.task_id: r for r in run(spec, pack, host=host).results}
    assert results["set-b"].status == "passed" and results["set-b"].error_kind == ""
    assert results["set-b"].judge_error == "judge error: RuntimeError: judge model said nonsense"
    assert "judge" not in results["set-b"].scores
    assert results["del-a"].scores == {"judge": 0.9, "judge.style": 1.0}
    assert results["del-a"].usage.prompt_tokens == 100 and results["del-a"].usage.cost_usd == 0.002


def test_runs_inline_methods_stay_on_the_loop_thread_and_others_do_not(write, host):
    import threading

    from agentsynth_kernel import runs_inline

    threads = {}

    class Probe:
        @runs_inline
        def act(self, state):
            threads["inline"] = threading.current_thread()
            return ToolCall("set", {"key": "x", "value": "1"}) if not state.trajectory.steps else Answer("ok")

    class Checker:
        def check(self, env, trajectory):
            threads["worker"] = threading.current_thread()
            return Verdict("probe", True)

    class Reg:
        @hookimpl
        def register_policies(self, register):
            register("probe", Probe)

        @hookimpl
        def register_checkers(self, register):
            register("probe_checker", Checker)

    host.add_plugin(Reg(), "probe")
    spec, pack = load_run_spec(write("spec.yaml", """
environment: {type: kv}
tasks: [{id: t, instruction: x, checkers: [probe_checker]}]
policy: probe
"""), host=host)
    assert run(spec, pack, host=host).results[0].passed
    assert threads["inline"] is threading.main_thread()
    assert threads["worker"] is not threading.main_thread()


def test_unhashable_callable_components_work(write, host):
    import attrs

    @attrs.define  # eq=True makes instances unhashable
    class ActFn:
        calls: int = 0

        def __call__(self, state):
            self.calls += 1
            return ToolCall("set", {"key": "x", "value": "1"}) if not state.trajectory.steps else Answer("ok")

    class Policy:
        def __init__(self):
            self.act = ActFn()

    class Reg:
        @hookimpl
        def register_policies(self, register):
            register("unhashable", Policy)

    host.add_plugin(Reg(), "unhashable")
    spec, pack = load_run_spec(write("spec.yaml", """
environment: {type: kv}
tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: x, value: "1"}]}]
policy: unhashable
"""), host=host)
    assert run(spec, pack, host=host).results[0].passed
