"""The composite mechanics over small test worlds (tests/worlds.py), through the real episode code:
namespaced tools, routing, per-world checkers on a projected trajectory, parallel setup, a child
that hangs or fails at setup, close of every child."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
import worlds

from agentsynth_kernel import (
    ComponentSpec,
    EpisodeConfig,
    SpecError,
    ToolCall,
    get_host,
    load_pack,
    run_episode,
)
from packs import BOTH_ORACLE, COUNTER_KV, TWO_COUNTERS, both_task, write_pack


def play(pack, actions, task=0, timeout=30.0):
    config = EpisodeConfig(ComponentSpec("scripted", {"actions": actions}), timeout=timeout)
    return asyncio.run(run_episode(get_host(), pack, pack.tasks[task], 0, 0, config))


def events(kind=None):
    return [(k, what) for k, what, _, _ in worlds.EVENTS if kind is None or k == kind]


@pytest.fixture
def both(tmp_path):
    return load_pack(write_pack(tmp_path / "both", COUNTER_KV, [both_task()], BOTH_ORACLE))


def test_tools_are_namespaced_with_valid_openai_names(both):
    result = play(both, [{"answer": "nothing"}])
    names = [t.name for t in result.trajectory.tools]
    assert names == ["c__inc", "c__get", "kv__put", "kv__get"]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in names)
    assert result.trajectory.tools[0].description.startswith("[world c] ")
    assert [t.read_only for t in result.trajectory.tools][:2] == [None, True]  # what a world says of its tools
    first = result.trajectory.initial_observation
    assert "World 'c' (t_counter; tools: c__inc, c__get)" in first and "a counter at 0" in first
    assert "World 'kv' (t_kv" in first and "an empty key-value store" in first


def test_the_oracle_passes_and_each_checker_reads_its_own_world(both):
    result = play(both, BOTH_ORACLE["both"])
    assert result.status == "passed", result.why
    assert [v.checker for v in result.verdicts] == ["c.t_count_is", "kv.t_kv_has"]
    assert result.verdicts[0].detail.startswith("[world c] count 3")
    # every child was closed once, after its reset
    assert events("t_counter")[-1] == ("t_counter", "close") and events("t_kv")[-1] == ("t_kv", "close")


def test_a_sync_child_keeps_one_thread_for_reset_steps_and_its_checker(both):
    # the counter world and its checker raise when called from another thread than the reset's
    result = play(both, BOTH_ORACLE["both"])
    assert result.status == "passed", result.why
    resets = {k: t for k, what, t, _ in worlds.EVENTS if what == "reset-end"}
    import threading
    assert resets["t_counter"] != threading.get_ident()  # not the event loop: its own thread


def test_half_the_work_fails(both):
    result = play(both, [{"tool": "c__inc", "arguments": {"by": 3}}, {"answer": "done"}])
    assert result.status == "failed"
    assert [v.passed for v in result.verdicts] == [True, False]


def test_work_in_the_other_world_of_the_same_type_does_not_count(tmp_path):
    task = {"id": "a3", "instruction": "Add 3 to counter a.",
            "checkers": [{"type": "composite", "world": "a", "checker": {"type": "t_count_is", "value": 3}}]}
    pack = load_pack(write_pack(tmp_path / "two", TWO_COUNTERS, [task]))
    assert play(pack, [{"tool": "a__inc", "arguments": {"by": 3}}]).status == "passed"
    wrong = play(pack, [{"tool": "b__inc", "arguments": {"by": -7}}, {"answer": "a is 3"}])
    assert wrong.status == "failed" and "count 0, expected 3" in wrong.verdicts[0].detail


def test_bare_and_crossed_tool_names_are_error_observations(both):
    result = play(both, [{"tool": "inc", "arguments": {"by": 3}}, {"tool": "kv__inc", "arguments": {"by": 3}},
                         {"tool": "c__put", "arguments": {"key": "done", "value": "yes"}}, {"answer": "done"}])
    assert result.status == "failed"
    steps = result.trajectory.steps[:3]
    assert all(s.invalid and s.observation.error for s in steps)
    assert "unknown tool 'inc'" in steps[0].observation.content


async def test_step_refuses_a_child_tool_through_the_other_namespace():
    """Called directly (an RL loop, the adapters), not only through the kernel's name check."""
    from agentsynth_composite.env import CompositeEnvironment, CompositeSpec

    env = CompositeEnvironment(CompositeSpec({"c": ComponentSpec("t_counter"), "kv": ComponentSpec("t_kv")}))
    try:
        await env.reset(0)
        crossed = await env.step(ToolCall("kv__inc", {"by": 1}))
        assert crossed.error and "world 'kv' has no tool 'inc'" in crossed.content
        bare = await env.step(ToolCall("inc", {"by": 1}))
        assert bare.error and "tools are named WORLD__TOOL" in bare.content
        assert (await env.step(ToolCall("c__inc", {"by": 2}))).content == "counter is 2"
        assert env.world("c").count == 2
    finally:
        await env.close()
    assert env.world("c").count is None  # closed


def test_the_child_checker_sees_its_world_s_trajectory_by_bare_names(tmp_path):
    task = {"id": "calls", "instruction": "Call inc twice in c.",
            "checkers": [{"type": "composite", "world": "c", "checker": {"type": "t_count_is", "value": 2}},
                         {"type": "composite_answer", "world": "c", "checker": {"type": "t_calls", "tool": "inc",
                                                                                 "times": 2}}]}
    pack = load_pack(write_pack(tmp_path / "calls", COUNTER_KV, [task]))
    result = play(pack, [{"tool": "c__inc", "arguments": {"by": 1}}, {"tool": "kv__put", "arguments": {"key": "inc"}},
                         {"tool": "c__inc", "arguments": {"by": 1}}, {"answer": "twice"}])
    assert result.status == "passed", result.why
    detail = result.verdicts[1].detail
    assert "['inc', 'inc']" in detail and "['inc', 'get']" in detail  # no kv step, no prefixes


def _intervals(kind):
    start = next(t for k, what, _, t in worlds.EVENTS if k == kind and what == "reset-start")
    end = next(t for k, what, _, t in worlds.EVENTS if k == kind and what == "reset-end")
    return start, end


@pytest.mark.parametrize("parallel", [True, False])
def test_children_are_set_up_in_parallel_unless_told_not_to(tmp_path, parallel):
    env = {"type": "composite", "parallel": parallel,
           "worlds": {"s1": {"type": "t_slow"}, "s2": {"type": "t_counter", "reset_sleep": 0.3}}}
    task = {"id": "t", "instruction": "x", "checkers": [{"type": "composite", "world": "s1",
                                                         "checker": {"type": "t_count_is", "value": 1}}]}
    pack = load_pack(write_pack(tmp_path / "slow", env, [task]))
    assert play(pack, [{"tool": "s1__inc", "arguments": {"by": 1}}]).status == "passed"
    (a0, a1), (b0, b1) = _intervals("t_slow"), _intervals("t_counter")
    overlap = a0 < b1 and b0 < a1
    assert overlap is parallel


def test_a_child_that_hangs_at_setup_is_an_environment_error_and_the_others_are_closed(tmp_path):
    env = {"type": "composite", "setup_seconds": 0.5,
           "worlds": {"ok": {"type": "t_kv"}, "stuck": {"type": "t_hang", "reset_sleep": 2.0}}}
    task = {"id": "t", "instruction": "x", "checkers": [{"type": "composite", "world": "ok",
                                                         "checker": {"type": "t_kv_has", "key": "k", "value": "v"}}]}
    pack = load_pack(write_pack(tmp_path / "hang", env, [task]))
    started = time.perf_counter()
    result = play(pack, [{"answer": "x"}])
    assert time.perf_counter() - started < 1.8  # did not wait for the stuck reset
    assert result.status == "error" and result.error_kind == "environment"
    assert "world 'stuck' (t_hang) failed to start: did not start within setup_seconds=0.5" in result.error
    assert "closed the worlds already started: ok" in result.error
    assert ("t_kv", "close") in events()
    # the stuck world is closed from a fresh thread (closing is what unblocks a real stuck start),
    # not left until its reset returns
    assert events("t_hang") == [("t_hang", "reset-start"), ("t_hang", "close")]


def test_an_async_child_that_never_starts_is_cancelled_and_closed(tmp_path):
    env = {"type": "composite", "setup_seconds": 0.3,
           "worlds": {"c": {"type": "t_counter"}, "never": {"type": "t_ahang"}}}
    task = {"id": "t", "instruction": "x", "checkers": [{"type": "composite", "world": "c",
                                                         "checker": {"type": "t_count_is", "value": 1}}]}
    result = play(load_pack(write_pack(tmp_path / "ahang", env, [task])), [{"answer": "x"}])
    assert result.status == "error" and result.error_kind == "environment"
    assert "world 'never' (t_ahang) failed to start: did not start within setup_seconds=0.3" in result.error
    assert {("t_counter", "close"), ("t_ahang", "close")} <= set(events())


def test_the_episode_timeout_during_setup_still_closes_every_child(tmp_path):
    env = {"type": "composite", "worlds": {"kv": {"type": "t_kv"}, "stuck": {"type": "t_hang", "reset_sleep": 3.0}}}
    task = {"id": "t", "instruction": "x", "checkers": [{"type": "composite", "world": "kv",
                                                         "checker": {"type": "t_kv_has", "key": "k", "value": "v"}}]}
    started = time.perf_counter()
    result = play(load_pack(write_pack(tmp_path / "timeout", env, [task])), [{"answer": "x"}], timeout=0.5)
    assert time.perf_counter() - started < 2.5
    assert result.status == "error" and result.error_kind == "timeout"
    assert {("t_kv", "close"), ("t_hang", "close")} <= set(events())


def test_a_child_that_cannot_start_names_its_reason(tmp_path):
    env = {"type": "composite", "worlds": {"kv": {"type": "t_kv"}, "c": {"type": "t_counter"},
                                           "bad": {"type": "t_broken"}}}
    task = {"id": "t", "instruction": "x", "checkers": [{"type": "composite", "world": "c",
                                                         "checker": {"type": "t_count_is", "value": 1}}]}
    pack = load_pack(write_pack(tmp_path / "broken", env, [task]))
    result = play(pack, [{"answer": "x"}])
    assert result.status == "error" and result.error_kind == "environment"
    assert ("world 'bad' (t_broken) failed to start: RuntimeError: the licence server refused this world"
            in result.error)
    assert {("t_kv", "close"), ("t_counter", "close")} <= set(events())


def test_a_child_that_fails_to_close_does_not_keep_the_others_open(tmp_path):
    env = {"type": "composite", "worlds": {"bc": {"type": "t_badclose"}, "c": {"type": "t_counter"}}}
    task = {"id": "t", "instruction": "x", "checkers": [{"type": "composite", "world": "c",
                                                         "checker": {"type": "t_count_is", "value": 1}}]}
    pack = load_pack(write_pack(tmp_path / "badclose", env, [task]))
    result = play(pack, [{"tool": "c__inc", "arguments": {"by": 1}}])
    assert result.status == "passed", result.why  # a failing close does not change the verdict
    assert ("t_counter", "close") in events() and ("t_badclose", "close") in events()
    assert "world 'bc': close failed: OSError: the disk went away" in result.trajectory.metadata["close_error"]


def test_a_second_reset_closes_the_first_worlds():
    from agentsynth_composite.env import CompositeEnvironment, CompositeSpec

    async def go():
        env = CompositeEnvironment(CompositeSpec({"c": ComponentSpec("t_counter")}))
        await env.reset(0)
        await env.step(ToolCall("c__inc", {"by": 5}))
        await env.reset(1)
        assert (await env.step(ToolCall("c__get", {}))).content == "0"
        await env.close()
        await env.close()  # idempotent

    asyncio.run(go())
    assert events("t_counter") == [("t_counter", w) for w in ("reset-start", "reset-end", "close", "reset-start",
                                                              "reset-end", "close")]


# --- bad specs: path-qualified errors at load time ----------------------------------------------------


@pytest.mark.parametrize("worlds_spec, expected", [
    ({"a__b": {"type": "t_counter"}}, "environment: worlds.a__b: 'a__b' is not a world name"),
    ({"a_": {"type": "t_counter"}}, "'a_' is not a world name"),
    ({"db": {"type": "t_countr"}}, "environment: worlds.db.type: unknown environment 't_countr' (did you mean 't_counter'?)"),
    ({"db": {"type": "t_counter", "strat": 1}}, "worlds.db.strat: unknown key for environment 't_counter'"),
    ({"db": {"type": "t_counter", "start": "one"}}, "worlds.db.start: expected an integer, got str 'one'"),
    ({"db": {"start": 1}}, "environment.worlds['db']: missing required key 'type'"),
    ({}, "a composite environment needs at least one world"),
])
def test_bad_world_specs_are_path_qualified(tmp_path, worlds_spec, expected):
    path = write_pack(tmp_path / "bad", {"type": "composite", "worlds": worlds_spec},
                      [{"id": "t", "instruction": "x", "checkers": ["answer_contains"]}])
    with pytest.raises(SpecError) as info:
        load_pack(path)
    text = str(info.value)
    assert str(path / "pack.yaml") in text and expected in text, text


@pytest.mark.parametrize("checker, expected", [
    ({"type": "composite", "world": "c", "checker": {"type": "answer_contains", "text": "x"}},
     "'answer_contains' does not read the world's end state: wrap it in 'composite_answer'"),
    ({"type": "composite_answer", "world": "c", "checker": {"type": "t_count_is", "value": 1}},
     "'t_count_is' reads the world's end state: wrap it in 'composite' instead"),
    ({"type": "composite", "world": "c", "checker": {"type": "t_count_is", "valu": 1}},
     "checker.valu: unknown key for checker 't_count_is'"),
    ({"type": "composite", "world": "c__x", "checker": {"type": "t_count_is", "value": 1}},
     "tasks[0].checkers[0]: world: 'c__x' is not a world name"),
    ({"type": "composite", "checker": {"type": "t_count_is", "value": 1}},
     "tasks[0].checkers[0].world: missing required key"),
])
def test_bad_checker_specs_are_path_qualified(tmp_path, checker, expected):
    path = write_pack(tmp_path / "badc", COUNTER_KV, [{"id": "t", "instruction": "x", "checkers": [checker]}])
    with pytest.raises(SpecError) as info:
        load_pack(path)
    assert expected in str(info.value), str(info.value)


def test_a_checker_naming_a_world_the_task_does_not_have_fails_the_episode_with_why(tmp_path):
    task = {"id": "t", "instruction": "x",
            "checkers": [{"type": "composite", "world": "db", "checker": {"type": "t_count_is", "value": 0}}]}
    pack = load_pack(write_pack(tmp_path / "noworld", COUNTER_KV, [task]))
    result = play(pack, [{"answer": "x"}])
    assert result.status == "error" and result.error_kind == "checker"
    assert "no world 'db' in this task's environment (worlds: c, kv)" in result.error


def test_a_checker_pointed_at_a_world_of_the_wrong_type_is_an_error_not_a_pass(tmp_path):
    task = {"id": "t", "instruction": "x",
            "checkers": [{"type": "composite", "world": "kv", "checker": {"type": "t_count_is", "value": 0}}]}
    pack = load_pack(write_pack(tmp_path / "wrongtype", COUNTER_KV, [task]))
    result = play(pack, [{"answer": "x"}])
    assert result.status == "error" and "t_count_is needs a counter world, got KV" in result.error


def test_the_composite_checker_refuses_a_plain_environment():
    from agentsynth_composite.checkers import CompositeChecker, CompositeCheckSpec

    checker = CompositeChecker(CompositeCheckSpec("c", ComponentSpec("t_count_is", {"value": 1})))
    with pytest.raises(TypeError, match="needs the 'composite' environment, got Counter"):
        asyncio.run(checker.check(worlds.Counter(), None))


def test_the_world_state_gate_composes(tmp_path):
    """pack validate counts `composite` as reading the world (its inner checker does) and
    `composite_answer` as not: a task checked only through composite_answer fails the gate."""
    from agentsynth_kernel import validate_pack

    task = {"id": "t", "instruction": "Call inc twice in c.",
            "checkers": [{"type": "composite_answer", "world": "c",
                          "checker": {"type": "t_calls", "tool": "inc", "times": 2}}]}
    oracle = {"t": [{"tool": "c__inc", "arguments": {"by": 1}}] * 2 + [{"answer": "ok"}]}
    path = write_pack(tmp_path / "gate", COUNTER_KV, [task], oracle)
    _, gates = validate_pack(path, random_trials=1, concurrency=2, timeout=20)
    gate = next(g for g in gates if g.name == "world-state-checkers")
    assert gate.status == "fail" and "no checker reads the world's end state" in gate.problems[0]


def test_a_composite_world_can_hold_a_composite_world(tmp_path):
    """Names nest (outer__c__inc: split at the first '__'), and so do checkers."""
    env = {"type": "composite", "worlds": {"outer": COUNTER_KV, "d": {"type": "t_counter", "start": 1}}}
    inner = {"type": "composite", "world": "c", "checker": {"type": "t_count_is", "value": 2}}
    task = {"id": "nested", "instruction": "Add 2 to outer's counter.",
            "checkers": [{"type": "composite", "world": "outer", "checker": inner},
                         {"type": "composite", "world": "d", "checker": {"type": "t_count_is", "value": 1}}]}
    pack = load_pack(write_pack(tmp_path / "nested", env, [task]))
    result = play(pack, [{"tool": "outer__c__inc", "arguments": {"by": 2}}, {"answer": "2"}])
    assert result.status == "passed", result.why
    assert [t.name for t in result.trajectory.tools][:2] == ["outer__c__inc", "outer__c__get"]
    assert [v.checker for v in result.verdicts] == ["outer.c.t_count_is", "d.t_count_is"]
    assert play(pack, [{"tool": "d__inc", "arguments": {"by": 2}}]).status == "failed"


def test_what_a_checker_reads_is_decided_by_its_spec_when_it_says_so(tmp_path):
    """The kernel's rule (``world_state_for(params)`` before the class's ``world_state``), the one
    `pack validate` applies: a checker reading the trajectory for this spec goes in
    `composite_answer`, though its class says it reads the world."""
    from agentsynth_composite.checkers import reads_world_state

    assert reads_world_state(ComponentSpec("t_count_or_calls", {"count": 1}))
    assert not reads_world_state(ComponentSpec("t_count_or_calls", {"tool": "inc"}))
    calls = {"type": "t_count_or_calls", "tool": "inc", "times": 1}
    task = {"id": "t", "instruction": "Call inc once.",
            "checkers": [{"type": "composite_answer", "world": "c", "checker": calls},
                         {"type": "composite", "world": "c", "checker": {"type": "t_count_or_calls", "count": 1}}]}
    pack = load_pack(write_pack(tmp_path / "per-spec", COUNTER_KV, [task]))
    assert play(pack, [{"tool": "c__inc", "arguments": {"by": 1}}, {"answer": "1"}]).status == "passed"
    wrong = dict(task, checkers=[{"type": "composite", "world": "c", "checker": calls}])
    with pytest.raises(SpecError, match="'t_count_or_calls' does not read the world's end state"):
        load_pack(write_pack(tmp_path / "per-spec-wrong", COUNTER_KV, [wrong]))


def test_a_child_tool_name_that_cannot_be_namespaced_is_a_clear_environment_error(tmp_path):
    """OpenAI names are at most 64 characters of [a-zA-Z0-9_-]: a long world name makes the
    counter's tools too long, and the composite says so instead of sending names a provider refuses."""
    long_name = "w" * 62
    env = {"type": "composite", "worlds": {long_name: {"type": "t_counter"}, "kv": {"type": "t_kv"}}}
    task = {"id": "t", "instruction": "x", "checkers": [{"type": "composite", "world": "kv",
                                                         "checker": {"type": "t_kv_has", "key": "k", "value": "v"}}]}
    result = play(load_pack(write_pack(tmp_path / "long", env, [task])), [{"answer": "x"}])
    assert result.status == "error" and result.error_kind == "environment"
    assert f"tool 'inc' becomes '{long_name}__inc', which is not a valid tool name" in result.error
    assert {("t_counter", "close"), ("t_kv", "close")} <= set(events())
