"""The checkers' verdict vetoes an LLM judge's pass (as it does the heuristic judge's): a model that
scores a trajectory 10/10 cannot pass an episode whose world-state check failed."""

from __future__ import annotations

import json

import pytest

from agentsynth_judge import DEFAULT_RUBRIC, LLMJudge
from agentsynth_kernel import ComponentSpec, build, structure
from agentsynth_kernel.testing import reply
from conftest import FAIL, PASS, traj

CLAIM = traj("Done! I have updated the note successfully.")


def full_marks() -> str:
    return json.dumps({"dimensions": {n: {"score": 10, "rationale": "great"} for n in DEFAULT_RUBRIC.names},
                       "rationale": "flawless"})


async def test_a_failed_checker_vetoes_the_llm_judges_pass(llm_server):
    llm_server.add(reply(full_marks()))
    result = await LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False).score(CLAIM, FAIL)
    assert result.score == pytest.approx(1.0)  # the model's score is kept ...
    assert result.passed is False and result.dimensions["passed"] == 0.0  # ... but the world has the last word
    assert "fails despite the score: checker(s) note_equals failed" in result.rationale


async def test_veto_also_applies_when_the_model_does_not_see_the_verdicts(llm_server):
    llm_server.add(reply(full_marks()))
    judge = LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False, include_verdicts=False)
    result = await judge.score(CLAIM, FAIL)
    assert "note_equals" not in llm_server.requests[0].json["messages"][1]["content"]
    assert result.passed is False


async def test_veto_can_be_turned_off_and_does_not_touch_passing_or_blind_episodes(llm_server):
    llm_server.add(reply(full_marks()), reply(full_marks()), reply(full_marks()))
    spec = structure({"type": "llm", "model": "openai/judge-model", "api_base": llm_server.base_url,
                      "cache": False, "veto": False}, ComponentSpec, source="test", prefix="judge")
    off = build("judge", spec)
    assert (await off.score(CLAIM, FAIL)).passed is True
    on = LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False)
    assert (await on.score(CLAIM, PASS)).passed is True
    assert (await on.score(CLAIM, [])).passed is True  # blind scoring (calibration): nothing to veto with
