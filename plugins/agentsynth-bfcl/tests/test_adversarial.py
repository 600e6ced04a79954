"""The kernel's adversarial kit against the BFCL packs: no attempt passes a task that expects
calls, even those that know the possible answers (spraying values, repeating the right call,
saying it in text, both names, stringified values, an extra argument, another function)."""

from __future__ import annotations

import pytest

from agentsynth_bfcl.env import ACK, BfclAst, BfclEnvironment, item_functions, to_tool
from agentsynth_bfcl.exploits import bfcl_exploits
from agentsynth_bfcl.matcher import ground_truth_calls, match
from agentsynth_kernel import ToolCall, Trajectory, load_pack
from agentsynth_kernel.testing.adversarial import (
    GENERIC_EXPLOITS,
    assert_unfarmable,
    exploits_for,
    run_exploits,
)


def test_the_hook_ships_distinct_bfcl_exploits():
    names = [e.name for e in exploits_for(load_pack("bfcl:simple"))]
    ours = [n for n in names if n.startswith("bfcl.")]
    assert len(ours) == len(set(ours)) >= 9
    assert {e.name for e in GENERIC_EXPLOITS} <= set(names)


@pytest.mark.parametrize("category", ["simple", "multiple", "parallel", "parallel-multiple", "live-simple",
                                      "live-parallel"])
def test_call_categories_cannot_be_farmed(category):
    pack = load_pack(f"bfcl:{category}")
    outcomes = run_exploits(pack, concurrency=4, timeout=30)
    farmed = {(o.exploit, o.task_id) for o in outcomes if not o.ok}
    # BFCL has near-duplicate items (simple_python_11 asks simple_python_0's question again): the
    # next task's transcript is then a right answer, which the kit reports; nothing else may pass.
    duplicates = {("generic.replay_other_task", t.id) for t in pack.tasks if _next_truth_passes(pack, t)}
    assert farmed <= duplicates, farmed - duplicates
    if category == "simple":
        assert duplicates == {("generic.replay_other_task", "simple_python_11")}
    by_name = {o.exploit: o for o in outcomes}
    assert {e.name for e in bfcl_exploits()} <= set(by_name)
    # they failed for the reason the matcher gives, not by crashing
    assert all(o.status == "failed" for o in outcomes if o.exploit.startswith("bfcl.")), \
        [o.describe() for o in outcomes if o.status != "failed"]
    assert "0 call(s) made" in by_name["bfcl.answer_in_text"].detail
    assert "call(s) made" in by_name["bfcl.right_call_repeated"].detail


def _next_truth_passes(pack, task) -> bool:
    """Whether the ground truth of the task after ``task`` (the one the replay exploit plays) is a
    right answer to ``task`` too."""
    index = pack.tasks.index(task)
    other = pack.tasks[(index + 1) % len(pack.tasks)]
    functions = item_functions(pack.base_dir / "functions.jsonl", task.id)
    calls = ground_truth_calls(item_functions(pack.base_dir / "functions.jsonl", other.id),
                               other.checkers[0].params["answers"])
    return match(functions, calls, task.checkers[0].params["answers"]).passed


def test_relevance_needs_a_call_and_irrelevance_needs_none():
    # relevance scores only that a fitting function was called (BFCL has no answers for it): any
    # call of an offered function passes, so only the attempts that make none must fail
    talkers = ("generic.claim_success", "generic.echo_task", "generic.fake_verdict", "generic.prompt_injection",
               "generic.stuffed_answer", "generic.unknown_tools", "bfcl.answer_in_text")
    relevance = assert_unfarmable(load_pack("bfcl:live-relevance"),
                                  [e for e in exploits_for(load_pack("bfcl:live-relevance")) if e.name in talkers],
                                  timeout=30)
    assert {o.exploit for o in relevance} == set(talkers)
    irrelevance = load_pack("bfcl:irrelevance")
    calling = [e for e in bfcl_exploits() if e.name in ("bfcl.spray_every_value",)] + \
              [e for e in GENERIC_EXPLOITS if e.name in ("generic.throwaway_call", "generic.step_flood")]
    assert_unfarmable(irrelevance, calling, timeout=30)


def test_the_world_answers_every_call_alike():
    """A right and a wrong call get the same acknowledgement: the world leaks nothing about the answer."""
    env = BfclEnvironment(functions=[{"name": "math.factorial", "parameters": {
        "type": "dict", "properties": {"number": {"type": "integer"}}, "required": ["number"]}}])
    env.reset(0)
    right = env.step(ToolCall("math_factorial", {"number": 5}))
    wrong = env.step(ToolCall("math_factorial", {"number": 6}))
    assert right.content == wrong.content == ACK and not right.error
    assert [c.arguments for c in env.received] == [{"number": 5}, {"number": 6}]
    env.reset(1)
    assert env.received == []


def test_tools_are_bfcl_functions_as_json_schema():
    tool = to_tool({"name": "geo.distance", "description": "d", "parameters": {"type": "dict", "properties": {
        "a": {"type": "tuple", "items": {"type": "float"}}, "b": {"type": "dict", "properties": {
            "x": {"type": "float"}}}, "c": {"type": "any"}, "d": {"type": "string", "optional": True}},
        "required": ["a"]}})
    assert tool.name == "geo_distance"
    props = tool.parameters["properties"]
    assert tool.parameters["type"] == "object" and tool.parameters["required"] == ["a"]
    assert props["a"] == {"type": "array", "items": {"type": "number", "format": "float"}}
    assert props["b"]["type"] == "object" and props["b"]["properties"]["x"]["type"] == "number"
    assert props["c"]["type"] == "string" and "optional" not in props["d"]


def test_bad_world_and_checker_parameters_are_refused():
    with pytest.raises(ValueError, match="give 'functions'"):
        BfclEnvironment()
    with pytest.raises(ValueError, match=r"functions\[0\]"):
        BfclEnvironment(functions=[{"description": "no name"}])
    with pytest.raises(ValueError, match="same tool name"):
        BfclEnvironment(functions=[{"name": "a.b"}, {"name": "a_b"}])
    with pytest.raises(ValueError, match="needs 'answers'"):
        BfclAst(kind="calls")
    with pytest.raises(ValueError, match=r"answers\[0\]"):
        BfclAst(answers=[{"f": 1}])
    verdict = BfclAst(answers=[{"f": {}}]).check(None, Trajectory("t", "i"))
    assert not verdict.passed and "not a bfcl world" in verdict.detail
