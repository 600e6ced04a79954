"""Rubric mode (docs_qa), judge mode and the PII filter, against the scripted server."""

import json
import re

import pytest

from agentsynth_domains.loop import rubric_score
from conftest import Roles, read_jsonl, spec_text

DOC = ("The Zorblat river rises in the Kell mountains and floods every spring. Farmers along the Zorblat plant "
       "barley after the floods recede, usually in early May. The river freezes for six weeks each winter, when "
       "ferries stop and goods cross the ice on sledges. ") * 3


@pytest.fixture
def docs(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "river.md").write_text(DOC, encoding="utf-8")
    return {"type": "docs_qa", "path": "docs", "chunk_chars": 2000}


def challenger(prompt, n):
    return json.dumps({"question": "When do farmers plant barley and why then?",
                       "answer": "Farmers plant barley after the floods recede, usually in early May",
                       "rubric": [{"criterion": "Says early May", "weight": 2},
                                  {"criterion": "Links planting to the floods receding", "weight": 1}]})


def scored(*scores):
    """Solver answers carrying a marker the judge reads back as that attempt's score."""
    return lambda prompt, n: f"My answer. SCORE={scores[n % len(scores)]}"


def judge(prompt, n):
    score = float(re.search(r"SCORE=([0-9.]+)", prompt).group(1))
    return json.dumps({"score": score, "rationale": f"graded {score}"})


@pytest.mark.parametrize("weak, strong, outcome", [
    ((0.3, 0.4, 0.5, 0.2), (0.8, 0.8, 0.9, 0.7), "accepted"),
    ((0.7, 0.7, 0.6, 0.7), (0.9, 0.9, 0.9, 0.9), "weak_too_strong"),  # weak average 0.675 > 0.65
    ((0.2, 0.2, 0.2, 0.8), (0.9, 0.9, 0.9, 0.9), "weak_too_strong"),  # weak best 0.8 > 0.75
    ((0.1, 0.1, 0.1, 0.1), (0.5, 0.6, 0.5, 0.6), "strong_too_weak"),  # strong average 0.55 < 0.60
    ((0.1, 0.1, 0.1, 0.1), (1.0, 0.9, 1.0, 0.9), "too_easy"),  # strong average 0.95: saturated
    ((0.5, 0.5, 0.5, 0.5), (0.6, 0.7, 0.6, 0.7), "gap_too_small"),  # gap 0.15 < 0.20
])
def test_rubric_acceptance(server, run_spec, docs, weak, strong, outcome):
    roles = Roles(challenger=challenger, weak=scored(*weak), strong=scored(*strong), judge=judge)
    server.handler = roles
    code, report, out = run_spec(spec_text(server, docs, max_rounds=1, reflector=None))
    assert code == 0, out
    assert report["acceptance"] == "rubric"
    if outcome == "accepted":
        [record] = read_jsonl(report["output"])
        meta = record["metadata"]
        assert meta["scores"]["weak_avg"] == 0.35 and meta["scores"]["strong_avg"] == 0.8
        assert "gap 0.45" in meta["rationale"] and "quality audit passed" in meta["rationale"]
        assert "SCORE=0.9" in record["messages"][1]["content"]  # the best strong attempt
        assert "Zorblat" in record["messages"][0]["content"] and "chunk" not in meta["candidate"]
        assert len(roles.calls("judge")) == 8  # one per attempt, rubric mode always asks the judge
    else:
        assert report["accepted"] == 0 and report["rejected"] == {outcome: 1}


def test_rubric_weights_are_capped_and_positive_only():
    rubric = [{"criterion": "a", "weight": 10}, {"criterion": "b", "weight": 1}, {"criterion": "c", "weight": -5}]
    answer = {"criteria": [{"index": 0, "met": False}, {"index": 1, "met": True}, {"index": 2, "met": True}]}
    # a's weight is capped at 3, c (negative) is left out: 1 / (3 + 1)
    assert rubric_score(answer, rubric, 3.0) == 0.25
    assert rubric_score({"score": 1.7}, rubric, 3.0) == 1.0
    with pytest.raises(ValueError):
        rubric_score({"verdict": "good"}, rubric, 3.0)


def test_an_ungrounded_reference_answer_is_invalid(server, run_spec, docs):
    roles = Roles(challenger=lambda p, n: json.dumps({
        "question": "Why?", "answer": "Because the Danube carries snowmelt from Austria",
        "rubric": [{"criterion": "Mentions snowmelt", "weight": 1}]}), judge=judge)
    server.handler = roles
    code, report, _ = run_spec(spec_text(server, docs, max_rounds=1))
    assert report["rejected"] == {"invalid_candidate": 1} and roles.calls("weak") == []


def test_judge_mode_improves_then_accepts(server, run_spec, docs):
    def loop_judge(prompt, n):
        assert "solver A" in prompt and "weak" not in prompt.lower().replace("weaker", "")
        if n == 0 and "sledges" not in prompt:
            return json.dumps({"decision": "improve", "rationale": "both solvers ace it",
                               "suggestion": "Ask about the sledges in winter instead."})
        return json.dumps({"decision": "accept", "rationale": "B clearly beats A"})

    def challenger2(prompt, n):
        if "Ask about the sledges in winter instead." in prompt:
            return json.dumps({"question": "How do goods cross in winter, and for how long?",
                               "answer": "goods cross the ice on sledges for six weeks each winter",
                               "rubric": [{"criterion": "Says sledges", "weight": 1}]})
        return challenger(prompt, n)

    roles = Roles(challenger=challenger2, weak=scored(0.2), strong=scored(0.9), judge=judge, loop_judge=loop_judge)
    server.handler = roles
    code, report, out = run_spec(spec_text(server, docs, acceptance="judge"))
    assert code == 0, out
    assert report["rounds"] == {"accepted": 1, "judge_improve": 1}
    [record] = read_jsonl(report["output"])
    assert record["metadata"]["rationale"] == "judge: B clearly beats A" and record["metadata"]["round"] == 2
    assert roles.calls("reflector") == []  # the loop judge's suggestion is the feedback


def test_judge_mode_reject(server, run_spec, docs):
    server.handler = Roles(challenger=challenger, weak=scored(0.2), strong=scored(0.9), judge=judge,
                           loop_judge=lambda p, n: json.dumps({"decision": "reject", "rationale": "ambiguous"}))
    code, report, _ = run_spec(spec_text(server, docs, acceptance="judge", max_rounds=1))
    assert report["rejected"] == {"judge_rejected": 1}


LEAKY = "Call Bob at +1 415 555 0100 or bob.smith@example.com; key sk-abcdefghijklmnop1234. SCORE=0.9"


@pytest.mark.parametrize("mode", ["mask", "drop", "off"])
def test_pii_filter(server, run_spec, docs, tmp_path, mode):
    server.handler = Roles(challenger=challenger, weak=scored(0.2), strong=lambda p, n: LEAKY, judge=judge)
    code, report, out = run_spec(spec_text(server, docs, max_rounds=1, pii=mode))
    assert code == 0, out
    records = read_jsonl(report["output"])
    stored = b"".join(p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file())
    if mode == "mask":
        [record] = records
        text = record["messages"][1]["content"]
        assert "<email>" in text and "<phone>" in text and "<redacted>" in text
        assert "bob.smith@example.com" not in text and "555 0100" not in text and "sk-abcdef" not in text
        assert record["metadata"]["pii_masked"] == ["email", "phone", "secret"]
        assert b"bob.smith@example.com" not in stored and b"sk-abcdefghijklmnop1234" not in stored
    elif mode == "drop":
        assert records == [] and report["rejected"] == {"pii_dropped": 1}
        assert b"bob.smith@example.com" not in stored
    else:
        [record] = records
        assert "bob.smith@example.com" in record["messages"][1]["content"]


def test_each_judge_call_fires_as_its_solver_lands(server, run_spec, docs):
    from agentsynth_kernel.testing import reply

    # one weak attempt is slow (1 s); the judge must already be grading the others meanwhile
    roles = Roles(challenger=challenger, judge=judge, strong=scored(0.8),
                  weak=lambda p, n: reply("SCORE=0.3", delay=1.0 if n == 0 else 0.0))
    server.handler = roles
    code, report, out = run_spec(spec_text(server, docs, max_rounds=1, reflector=None))
    assert code == 0 and report["accepted"] == 1, out
    slow_done = min(c["at"] for c in roles.calls("weak")) + 1.0
    first_judge = min(c["at"] for c in roles.calls("judge"))
    assert first_judge < slow_done - 0.5
