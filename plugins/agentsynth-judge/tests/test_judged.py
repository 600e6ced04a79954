"""The ``judged`` checker: a judge's score as a check, e.g. a simulated user's rules (``user.checks``)."""

from __future__ import annotations

import json

import pytest

from agentsynth_judge import DEFAULT_RUBRIC
from agentsynth_kernel import (
    Answer,
    ComponentSpec,
    Observation,
    SpecError,
    Step,
    Trajectory,
    build,
    structure,
)
from agentsynth_kernel.testing import reply
from conftest import read, traj, write

# a simulated user's side of a talk: its messages, each answered by the agent's next one
USER_SIDE = Trajectory("t", "You are Dana; your order is 1042.", steps=[
    Step(Answer("My order number is 1042."), Observation("Shall I refund it?")),
    Step(Answer("Yes, go ahead. ###STOP###")),
])


def marks(score: int) -> str:
    return json.dumps({"dimensions": {n: {"score": score, "rationale": "r"} for n in DEFAULT_RUBRIC.names},
                       "rationale": "the user kept to its brief" if score > 5 else "the user invented an order"})


def checker(llm_server, min_score: float = 0.7):
    spec = structure({"type": "judged", "min_score": min_score,
                      "judge": {"type": "llm", "model": "openai/judge-model", "api_base": llm_server.base_url,
                                "cache": False}}, ComponentSpec, source="test", prefix="checker")
    return build("checker", spec)


async def test_a_high_score_passes_and_the_judge_reads_the_trajectory_it_is_given(llm_server):
    llm_server.add(reply(marks(9)))
    verdict = await checker(llm_server).check(None, USER_SIDE)
    assert verdict.passed and verdict.score == pytest.approx(0.9) and "kept to its brief" in verdict.detail
    sent = " ".join(str(m.get("content")) for m in llm_server.requests[0].json["messages"])
    assert "You are Dana" in sent and "said: My order number is 1042. -> reply: Shall I refund it?" in sent


async def test_a_low_score_fails_with_the_judges_reason(llm_server):
    llm_server.add(reply(marks(2)))
    verdict = await checker(llm_server).check(None, USER_SIDE)
    assert not verdict.passed and "invented an order" in verdict.detail and "min_score 0.7" in verdict.detail


@pytest.mark.parametrize("bad", [1.5, -0.1, "high"])
def test_min_score_out_of_range_is_a_path_qualified_error(bad):
    spec = ComponentSpec("judged", {"min_score": bad, "judge": {"type": "heuristic"}})
    with pytest.raises((SpecError, ValueError)) as info:
        build("checker", spec)
    assert "min_score" in str(info.value)


async def test_a_heuristic_judged_check_is_not_passed_by_parroting_the_instruction():
    """The `judged` checker reads the score, not the veto: the parrot's score itself must be below min_score."""
    check = build("checker", ComponentSpec("judged", {"judge": {"type": "heuristic"}}))
    for answer in ["Set the note 'color' to blue.", "I set the note 'color' to blue.", "Done: set the note 'color' to blue."]:
        for steps in ([], [read("color", "red")]):
            verdict = await check.check(None, traj(*steps, answer))
            assert not verdict.passed and verdict.score < 0.7, (answer, verdict.detail)
    honest = await check.check(None, traj(read("color", "red"), write("color", "blue"), "The note 'color' is now blue."))
    assert honest.passed
