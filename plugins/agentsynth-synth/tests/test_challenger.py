"""``challenger``, ``evolve`` and ``from_failures``: proposals are accepted only when solvers say so."""

from __future__ import annotations

import asyncio
import json
import re

import yaml

from agentsynth_kernel import ComponentSpec, RunSpec, execute, load_pack
from agentsynth_synth import run_generator
from conftest import SET_RE, first_user, policy, reply, solver, turn


def task(instruction, checkers, **extra):
    return reply(json.dumps({"instruction": instruction, "checkers": checkers, **extra}))


def note(key, value):
    return {"type": "note_equals", "key": key, "value": value}


def challenger(request):
    number = int(re.search(r"Write task #(\d+)", first_user(request)).group(1))
    k = turn(request)
    if number == 1:
        rounds = [
            task("Make sure the color is red.", [note("color", "red")]),  # already true: noop passes
            task("Set the note 'shape' to 'circle'.", [note("shape", "square")]),  # checker contradicts the request
            task("Set the note 'shape' to 'circle'.", [note("shape", "circle")]),
        ]
        return rounds[min(k, 2)]
    if number == 2:  # always too easy: the weak solver does it too
        return task("Set the note 'easy' to 'yes'.", [note("easy", "yes")])
    if number == 3:  # not a valid task
        return task("Set the note 'x' to 'y'.", [{"type": "note_equal", "key": "x", "value": "y"}])
    return reply("no idea")


def weak(request):
    # solves only the easy requests; answers anything else without doing it
    return solver(request) if "'easy'" in first_user(request) else reply("done")


def solver_params(llm, **extra):
    return {"model": "openai/challenger", "api_base": llm.base_url, "strong": [policy(llm, "good")],
            "weak": [policy(llm, "weak")], "weak_trials": 2, "rounds": 3, **extra}


def test_acceptance_logic_with_feedback_and_round_limit(llm, pack_dir, tmp_path):
    llm.router.routes.update(challenger=challenger, weak=weak)
    out = tmp_path / "challenged"
    report = run_generator("challenger", pack_dir, solver_params(llm, n=3), out=out, run_dir=tmp_path / "run",
                           cache=False)
    assert [r.task_id for r in report.accepted] == ["ch-0000"]
    assert report.rejected == {"not_discriminative": 1, "invalid_task": 1}
    accepted = report.accepted[0].trajectory.metadata["synth"]
    assert accepted["rounds"] == 3
    assert [h["reason"] for h in accepted["history"]] == ["noop_passes", "unsolvable", "accepted"]
    assert accepted["solved_by"] == "openai/good"
    # the feedback of each round reached the challenger
    item1 = [r for r in llm.requests if r.json.get("model") == "challenger" and "Write task #1" in
             r.messages[0]["content"]]
    assert "noop_passes" in item1[1].messages[-1]["content"] and "unsolvable" in item1[2].messages[-1]["content"]
    rejected = {e["item"]: e["rejected"] for e in report.per_item if e["rejected"]}
    assert rejected["ch-0001"][0]["rounds"] == 3
    assert "weak solvers pass 100%" in rejected["ch-0001"][0]["detail"]
    assert "tasks[0].checkers[0].type: unknown checker" in rejected["ch-0002"][0]["detail"]
    assert "note_equals" in rejected["ch-0002"][0]["detail"]
    written = yaml.safe_load((out / "pack.yaml").read_text())
    assert written["tasks"][0]["instruction"] == "Set the note 'shape' to 'circle'."
    assert written["tasks"][0]["checkers"] == [note("shape", "circle")]


def test_a_task_the_strong_solver_fails_is_rejected(llm, pack_dir):
    llm.router.routes.update(challenger=lambda r: task("Set the note 'shape' to 'circle'.", [note("shape", "oval")]),
                             weak=weak)
    report = run_generator("challenger", pack_dir, solver_params(llm, n=1, rounds=2), cache=False)
    assert not report.accepted
    assert report.rejected == {"unsolvable": 1}
    assert llm.router.counts["challenger"] == 2, "one revision, then the round limit"
    assert llm.router.counts.get("weak", 0) == 0, "weak solvers only run on solvable tasks"


def test_challenger_pack_passes_pack_validate_via_the_cli(llm, pack_dir, tmp_path, monkeypatch, capsys):
    from agentsynth_kernel.cli import main

    llm.router.routes.update(challenger=challenger, weak=weak)
    monkeypatch.chdir(tmp_path)
    args = ["synth", str(pack_dir), "-g", "challenger", "-p", "model=openai/challenger", "-p",
            f"api_base={llm.base_url}", "-p", f"strong=[{json.dumps(policy(llm, 'good'))}]", "-p",
            f"weak=[{json.dumps(policy(llm, 'weak'))}]", "-p", "n=2", "-o", "out-pack", "--run-dir", "rd",
            "--no-cache", "--json", "report.json"]
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    printed = capsys.readouterr()
    assert (code or 0) == 0, printed
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["accepted"] == 1 and data["validation"]["oracle"] == "pass"
    assert all(v == "pass" for v in data["validation"].values())
    assert data["llm_requests_per_accepted"] == data["llm_requests"]
    assert "pack validate: all gates pass" in printed.out


def evolver(request):
    text = first_user(request)
    original = re.search(r"Original task:\n(.*)", text).group(1)
    key, value = SET_RE.search(original).groups()
    if key == "size":  # an oracle that does not solve its own task
        return task("Set the note 'size' to 'XL'.", [note("size", "XL")],
                    oracle=[{"tool": "write", "arguments": {"key": "size", "value": "S"}}, {"answer": "done"}])
    return task(f"Set the note '{key}' to 'navy' and the note 'mood' to 'calm'.",
                [note(key, "navy"), note("mood", "calm")],
                oracle=[{"tool": "write", "arguments": {"key": key, "value": "navy"}},
                        {"tool": "write", "arguments": {"key": "mood", "value": "calm"}}, {"answer": "done"}])


def test_evolve_keeps_only_variants_that_still_validate(llm, pack_dir, tmp_path):
    llm.router.routes.update(evolver=evolver)
    out = tmp_path / "evolved"
    report = run_generator("evolve", pack_dir, {"model": "openai/evolver", "api_base": llm.base_url, "rounds": 2},
                           out=out, cache=False)
    assert [r.task_id for r in report.accepted] == ["ev-set-color-0"]
    assert report.rejected == {"oracle_fails": 1}
    meta = report.accepted[0].trajectory.metadata["synth"]
    assert meta["source_task"] == "set-color" and meta["strategy"] == "constraints"
    # the prompt carried the original task and its reference solution
    prompt = next(r for r in llm.requests if r.json.get("model") == "evolver").messages[0]["content"]
    assert "Set the note 'color' to 'blue'." in prompt and '"value": "blue"' in prompt
    written = load_pack(out)
    assert written.tasks[0].instruction.startswith("Set the note 'color' to 'navy'")


def test_from_failures_targets_the_gaps_of_a_run(llm, pack_dir, tmp_path):
    llm.router.routes.update(evolver=evolver)
    pack = load_pack(pack_dir)
    asyncio.run(execute(RunSpec(policy=ComponentSpec("noop")), pack, run_dir=tmp_path / "bench"))
    report = run_generator("from_failures", pack_dir, {"model": "openai/evolver", "api_base": llm.base_url,
                                                       "run": str(tmp_path / "bench"), "rounds": 1}, cache=False)
    assert report.planned == 2
    assert [r.task_id for r in report.accepted] == ["ev-set-color-0"]
    assert report.accepted[0].trajectory.metadata["synth"]["gap"] == "no_call"
    prompts = [r.messages[0]["content"] for r in llm.requests if r.json.get("model") == "evolver"]
    assert all("answered without calling any tool" in p for p in prompts)


def test_from_failures_classifies_failures():
    from agentsynth_kernel import Answer, EpisodeResult, Observation, Step, ToolCall, Trajectory
    from agentsynth_synth.challenger import classify_failure

    def result(*steps):
        return EpisodeResult("t", 0, 0, "failed", trajectory=Trajectory("t", "x", steps=list(steps)))

    write = ToolCall("write", {"key": "a", "value": "b"})
    assert classify_failure(result(Step(Answer("done"))), {"write"}) == "no_call"
    assert classify_failure(result(Step(write, Observation("bad", error=True))), {"write"}) == "bad_arguments"
    assert classify_failure(result(Step(ToolCall("read", {"key": "a"}), Observation("x"))), {"write"}) == "wrong_tool"
    assert classify_failure(result(Step(write, Observation("ok"))), {"write"}) == "wrong_end_state"


def test_evolve_with_weak_solvers_rejects_variants_they_solve(llm, pack_dir):
    llm.router.routes.update(evolver=evolver)
    params = {"model": "openai/evolver", "api_base": llm.base_url, "rounds": 1, "only": ["set-color"],
              "strong": [policy(llm, "good")], "weak": [policy(llm, "good2")], "max_weak_pass_rate": 0.5}
    report = run_generator("evolve", pack_dir, params, cache=False)
    assert not report.accepted and report.rejected == {"not_discriminative": 1}
    report = run_generator("evolve", pack_dir, {**params, "weak": [policy(llm, "lazy")]}, cache=False)
    assert [r.task_id for r in report.accepted] == ["ev-set-color-0"]
    assert report.accepted[0].trajectory.metadata["synth"]["solved_by"] == "openai/good"


def test_a_copy_of_a_pack_task_is_rejected_then_revised(llm, pack_dir):
    def copier(request):
        if turn(request) == 0:
            return task("Set the note 'color' to 'blue'.", [note("color", "blue")])
        return task("Set the note 'shape' to 'star'.", [note("shape", "star")])

    llm.router.routes.update(challenger=copier)
    report = run_generator("challenger", pack_dir, {"model": "openai/challenger", "api_base": llm.base_url,
                                                    "strong": [policy(llm, "good")], "n": 1}, cache=False)
    history = report.accepted[0].trajectory.metadata["synth"]["history"]
    assert [h["reason"] for h in history] == ["duplicate", "accepted"]
    assert "set-color" in history[0]["detail"]
