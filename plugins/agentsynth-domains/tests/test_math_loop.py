"""The loop on the math domain (verifiable mode) through `agentsynth run`, against the scripted server."""

import json
import re

from agentsynth_kernel.testing import status
from conftest import Roles, llm, read_jsonl, spec_text

PROBLEM = "A baker uses 3/4 of a bag of flour per cake and bakes {n} cakes; how many bags does he use?"


def challenger_for(answer="3/4", problem=PROBLEM):
    return lambda prompt, n: json.dumps({"problem": problem.format(n=1), "answer": answer})


def solver(right: int, answer="0.75"):
    """The n-th identical attempt is right when n < right."""
    return lambda prompt, n: f"Let me think.\nanswer: {answer if n < right else '5'}"


def math_spec(server, **extra):
    return spec_text(server, {"type": "math", "count": 1}, **extra)


def test_accepted_with_rationale_scores_and_requests(server, run_spec, tmp_path):
    roles = Roles(challenger=challenger_for(), weak=solver(1), strong=solver(4))
    server.handler = roles
    code, report, out = run_spec(math_spec(server, reflector=None))
    assert code == 0, out
    assert report["accepted"] == 1 and report["rejected"] == {}
    # challenger + audit + 4 weak + 4 strong, no judge calls (verify decides)
    assert report["llm_requests"] == 10 == len(server.requests)
    assert report["llm_requests_per_accepted"] == 10
    [record] = read_jsonl(report["output"])
    assert record["messages"][0]["role"] == "user" and PROBLEM.format(n=1) in record["messages"][0]["content"]
    assert record["messages"][1]["content"].endswith("answer: 0.75")
    meta = record["metadata"]
    assert meta["acceptance"] == "verifiable" and meta["scores"]["weak_correct"] == 1
    assert meta["scores"]["strong_correct"] == 4 and "weak solved 1 of 4" in meta["rationale"]
    assert meta["requests"] == 10 and meta["round"] == 1


def test_solvers_get_identical_prompts(server, run_spec):
    roles = Roles(challenger=challenger_for(), weak=solver(0), strong=solver(4))
    server.handler = roles
    code, _, out = run_spec(math_spec(server))
    assert code == 0, out
    weak, strong = roles.calls("weak"), roles.calls("strong")
    assert len(weak) == len(strong) == 4
    assert {json.dumps(c["messages"]) for c in weak} == {json.dumps(c["messages"]) for c in strong}
    assert all("weak" not in json.dumps(c["messages"]).lower() and "strong" not in json.dumps(c["messages"]).lower()
               for c in weak)


def test_weak_too_strong_and_strong_too_weak_are_rejected(server, run_spec):
    server.handler = Roles(challenger=challenger_for(), weak=solver(2), strong=solver(4))
    code, report, out = run_spec(math_spec(server, max_rounds=1, reflector=None), run_dir="a")
    assert code == 0, out
    assert report["accepted"] == 0 and report["rejected"] == {"weak_too_strong": 1}
    server.handler = Roles(challenger=challenger_for(), weak=solver(0), strong=solver(2))
    code, report, out = run_spec(math_spec(server, max_rounds=1, reflector=None), name="b.yaml", run_dir="b")
    assert report["rejected"] == {"strong_too_weak": 1}
    assert read_jsonl(report["output"]) == []


def test_improved_by_reflection_then_accepted_in_round_two(server, run_spec):
    easy = "What is 1 + 1 when you add one apple to one apple in a basket?"
    hard = "Three pipes fill a tank in 2, 3 and 6 hours; what fraction is filled in 20 minutes together?"

    def challenger(prompt, n):
        if "Feedback on your previous attempt" in prompt:
            assert "weak_too_strong" in prompt and "make it need more steps" in prompt
            return json.dumps({"problem": hard, "answer": "1/3"})
        return json.dumps({"problem": easy, "answer": "2"})

    def weak(prompt, n):
        return "answer: 2" if easy in prompt else "answer: 1/2"

    def strong(prompt, n):
        return "answer: 2" if easy in prompt else "answer: 0.3333333333333333" if n == 0 else "answer: 1/3"

    roles = Roles(challenger=challenger, weak=weak, strong=strong,
                  reflector=lambda prompt, n: "Too easy: make it need more steps.")
    server.handler = roles
    code, report, out = run_spec(math_spec(server))
    assert code == 0, out
    assert report["accepted"] == 1 and report["rounds"] == {"accepted": 1, "weak_too_strong": 1}
    [record] = read_jsonl(report["output"])
    assert record["metadata"]["round"] == 2 and hard in record["messages"][0]["content"]
    assert record["metadata"]["rejected_rounds"][0]["reason"] == "weak_too_strong"
    assert len(roles.calls("reflector")) == 1
    # 0.333... is not exactly 1/3: that attempt is wrong, the other three are right
    assert record["metadata"]["scores"]["strong_correct"] == 3


def test_short_circuit_skips_the_strong_solver(server, run_spec):
    roles = Roles(challenger=challenger_for(), weak=solver(100), strong=solver(100))
    server.handler = roles
    code, report, out = run_spec(math_spec(server, short_circuit_strong=True, max_rounds=2, reflector=None))
    assert code == 0, out
    assert report["rejected"] == {"weak_too_strong": 1} and report["stages"]["strong_skipped"] == 2
    assert roles.calls("strong") == [] and len(roles.calls("weak")) == 8
    # the weak gate passes: strong runs
    roles2 = Roles(challenger=challenger_for(), weak=solver(0), strong=solver(3))
    server.handler = roles2
    code, report, out = run_spec(math_spec(server, short_circuit_strong=True), name="b.yaml", run_dir="b")
    assert report["accepted"] == 1 and len(roles2.calls("strong")) == 4


def test_audit_failed_and_invalid_candidates_never_reach_solvers(server, run_spec):
    roles = Roles(challenger=challenger_for(),
                  auditor=lambda p, n: json.dumps({"pass": False, "reason": "two answers are possible"}),
                  weak=solver(0), strong=solver(4))
    server.handler = roles
    code, report, out = run_spec(math_spec(server, max_rounds=2, reflector=None), run_dir="a")
    assert report["rejected"] == {"audit_failed": 1} and report["rounds"] == {"audit_failed": 2}
    assert roles.calls("weak") == [] and roles.calls("strong") == []
    # the audit reason is the next round's feedback
    assert "two answers are possible" in roles.calls("challenger")[1]["user"]

    roles = Roles(challenger=lambda p, n: json.dumps({"problem": PROBLEM, "answer": "lots"}) if n == 0 else "no json",
                  weak=solver(0), strong=solver(4))
    server.handler = roles
    code, report, out = run_spec(math_spec(server, max_rounds=2), name="b.yaml", run_dir="b")
    assert report["rejected"] == {"invalid_candidate": 1} and roles.calls("weak") == []
    assert "answer: expected one exact number" in roles.calls("challenger")[1]["user"]
    assert roles.calls("auditor") == [] and roles.calls("reflector") == []


def test_an_llm_error_fails_only_that_item_and_a_rerun_retries_it(server, run_spec):
    broken = {"on": True}

    def challenger(prompt, n):
        if "splitting a bill" in prompt and broken["on"]:
            return status(400, {"error": {"message": "model overloaded for this prompt"}})
        topic = re.search(r"about (.*?) \(variant", prompt).group(1)
        return json.dumps({"problem": f"{PROBLEM.format(n=2)} (about {topic})", "answer": "3/4"})

    server.handler = Roles(challenger=challenger, weak=solver(0), strong=solver(4))
    text = spec_text(server, {"type": "math", "count": 3})
    code, report, out = run_spec(text)
    assert code == 4, out
    assert report["accepted"] == 2 and report["failed_items"] == 1 and "math-0000" in report["errors"][0]
    broken["on"] = False
    code, report, out = run_spec(text)
    assert code == 0, out
    assert report["restored_items"] == 2 and report["done_items"] == 1 and report["accepted"] == 3
    records = read_jsonl(report["output"])
    assert sorted(r["metadata"]["item"] for r in records) == ["math-0000", "math-0001", "math-0002"]


def test_json_mode_asks_for_json_only_on_json_roles(server, run_spec):
    from conftest import llm

    roles = Roles(challenger=challenger_for(), weak=solver(0), strong=solver(4))
    server.handler = roles
    code, _, out = run_spec(math_spec(server, challenger={**llm(server, "challenger"), "json_mode": True},
                                      weak={**llm(server, "weak"), "json_mode": True}))
    assert code == 0, out
    fmt = roles.calls("challenger")[0]["body"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == ["problem", "answer"]
    assert all("response_format" not in c["body"] for c in roles.calls("weak"))  # solvers answer in prose
    assert all("response_format" not in c["body"] for c in roles.calls("auditor"))  # json_mode is per model


def test_a_budget_stop_keeps_finished_items_and_a_larger_budget_continues(server, run_spec):
    def challenger(prompt, n):
        topic = re.search(r"about (.*?) \(variant", prompt).group(1)
        return json.dumps({"problem": f"{PROBLEM.format(n=2)} (about {topic})", "answer": "3/4"})

    server.handler = Roles(challenger=challenger, weak=solver(0), strong=solver(4))
    text = spec_text(server, {"type": "math", "count": 4}, concurrency=1, reflector=None,
                     weak={**llm(server, "weak"), "max_tokens": 64}, strong={**llm(server, "strong"), "max_tokens": 64})
    small = text.replace('"name": "test"', '"name": "test", "budget": {"tokens": 1200}')
    code, report, out = run_spec(small, name="spec.yaml")
    assert code == 3, (out, report)
    assert report["stopped"].startswith("budget") and 1 <= report["accepted"] < 4
    stored = report["accepted"]
    assert len(read_jsonl(report["output"])) == stored
    big = text.replace('"name": "test"', '"name": "test", "budget": {"tokens": 1000000}')
    code, report, out = run_spec(big, name="spec.yaml")
    assert code == 0, out
    assert report["restored_items"] == stored and report["accepted"] == 4
    assert len(read_jsonl(report["output"])) == 4
