"""The adversarial kit against composite worlds, over the test worlds: the composite's own
exploits (bare names as if namespaces collided, the oracle through the wrong namespace, unknown
worlds, claims in the answer) and a child's own exploits played through the composite."""

from __future__ import annotations

import asyncio

import pytest

from agentsynth_kernel import ComponentSpec, EpisodeConfig, ToolCall, get_host, load_pack, run_episode
from agentsynth_kernel.testing.adversarial import assert_unfarmable, exploits_for
from packs import TWO_COUNTERS, write_pack

TASK = {"id": "a3", "instruction": "Add 3 to counter a, leave b alone.",
        "checkers": [{"type": "composite", "world": "a", "checker": {"type": "t_count_is", "value": 3}},
                     {"type": "composite", "world": "b", "checker": {"type": "t_count_is", "value": 10}}]}
TASK2 = {"id": "b5", "instruction": "Add 5 to counter b, leave a alone.",
         "checkers": [{"type": "composite", "world": "b", "checker": {"type": "t_count_is", "value": 15}},
                      {"type": "composite", "world": "a", "checker": {"type": "t_count_is", "value": 0}}]}
ORACLE = {"a3": [{"tool": "a__inc", "arguments": {"by": 3}}, {"answer": "a is 3"}],
          "b5": [{"tool": "b__inc", "arguments": {"by": 5}}, {"answer": "b is 15"}]}


@pytest.fixture
def pack(tmp_path):
    return load_pack(write_pack(tmp_path / "two", TWO_COUNTERS, [TASK, TASK2], ORACLE))


def by_name(pack):
    return {e.name: e for e in exploits_for(pack)}


def play(pack, exploit, task=0):
    config = EpisodeConfig(ComponentSpec("scripted", {"actions": lambda state: exploit.actions(state, pack)}),
                           timeout=30)
    return asyncio.run(run_episode(get_host(), pack, pack.tasks[task], 0, 0, config))


def test_the_kit_offers_the_composite_s_exploits_and_the_children_s_through_it(pack):
    names = set(by_name(pack))
    assert {"composite.bare_tool_names", "composite.cross_namespace", "composite.unknown_worlds",
            "composite.claim_every_world"} <= names
    assert {"composite.t_counter.overflow", "composite.t_counter.read_expected"} <= names
    assert "generic.claim_success" in names


def test_no_exploit_farms_a_composite_pack(pack):
    outcomes = assert_unfarmable(pack)
    assert len(outcomes) >= 2 * 16


def test_the_cross_namespace_exploit_does_the_work_in_the_wrong_world(pack):
    """With two worlds of one type the crossed call runs (in b): only the per-world checker stops it."""
    result = play(pack, by_name(pack)["composite.cross_namespace"])
    calls = [s for s in result.trajectory.steps if isinstance(s.action, ToolCall)]
    assert [(s.action.name, s.action.arguments, s.invalid) for s in calls] == [("b__inc", {"by": 3}, False)]
    assert result.status == "failed"
    assert [v.passed for v in result.verdicts] == [False, False]  # a still 0, b now 13


def test_bare_names_are_refused_not_resolved_to_some_world(pack):
    result = play(pack, by_name(pack)["composite.bare_tool_names"])
    calls = [s for s in result.trajectory.steps if isinstance(s.action, ToolCall)]
    assert calls and all(s.invalid and s.observation.error for s in calls)
    assert {s.action.name for s in calls} == {"inc", "get"}


def test_a_child_exploit_through_the_composite_sends_its_calls_to_that_world(pack):
    result = play(pack, by_name(pack)["composite.t_counter.overflow"])
    calls = [(s.action.name, s.action.arguments, s.observation.error) for s in result.trajectory.steps
             if isinstance(s.action, ToolCall)]
    # played in every world of the child's type, each under its own name, refused by the world
    assert calls == [("a__inc", {"by": 10**9}, True), ("b__inc", {"by": 10**9}, True)]
    assert result.status == "failed"


def test_a_child_exploit_sees_its_world_s_view_of_the_task(pack):
    """read_expected reads the checkers' parameters: through the composite it sees the inner
    checkers of its world (t_count_is), not the composite wrappers."""
    result = play(pack, by_name(pack)["composite.t_counter.read_expected"])
    assert result.trajectory.final_answer == "10"  # the last world played (b) sees only its own checker
    assert result.status == "failed"
