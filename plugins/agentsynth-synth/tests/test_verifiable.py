"""``challenger`` with ``acceptance: verifiable``: N weak + N strong attempts in the notes world, the
pack's checkers decide; reflector feedback between rounds; every reason stored."""

from __future__ import annotations

import json
import re

import pytest

from agentsynth_kernel import SpecError
from agentsynth_synth import make_generator, run_generator
from conftest import first_user, policy, reply, solver, turn

REFLECTED = "A task written for AI agents"  # how the reflector's prompt starts
ADVICE = "Ask for two notes at once."


def task(instruction, checkers, **extra):
    return reply(json.dumps({"instruction": instruction, "checkers": checkers, **extra}))


def note(key, value):
    return {"type": "note_equals", "key": key, "value": value}


def scripted(*rounds):
    """A challenger whose round k answers ``rounds[k]`` (the last one repeats); it also reflects."""
    def handle(request):
        if first_user(request).startswith(REFLECTED):
            return reply(ADVICE)
        return rounds[min(turn(request), len(rounds) - 1)]
    return handle


GOOD = task("Set the note 'shape' to 'circle'.", [note("shape", "circle")])
EASY = task("Set the note 'easy' to 'yes'.", [note("easy", "yes")])
BROKEN = task("Set the note 'shape' to 'circle'.", [note("shape", "square")])  # the checker contradicts the request


def weak(request):
    """Solves only the 'easy' requests; answers anything else without doing it."""
    return solver(request) if "'easy'" in first_user(request) else reply("done")


def params(llm, **extra):
    return {"model": "openai/challenger", "api_base": llm.base_url, "strong": [policy(llm, "good")],
            "weak": [policy(llm, "weak")], "acceptance": "verifiable", "n": 1, **extra}


@pytest.fixture
def seeded_pack(pack_dir):
    """The notes pack whose first observation names the episode's seed."""
    path = pack_dir / "pack.yaml"
    path.write_text(path.read_text().replace("environment: {type: notes}", "environment: {type: notes, show_seed: true}"))
    return pack_dir


def requests_of(llm, model):
    return [r for r in llm.requests if r.json.get("model") == model]


def test_accepted_when_strong_wins_and_weak_fails(llm, seeded_pack, tmp_path):
    llm.router.routes.update(challenger=scripted(GOOD), weak=weak)
    report = run_generator("challenger", seeded_pack, params(llm), run_dir=tmp_path / "run", out=tmp_path / "out",
                           cache=False)
    assert [r.task_id for r in report.accepted] == ["ch-0000"] and not report.rejected
    synth = report.accepted[0].trajectory.metadata["synth"]
    assert synth["acceptance"] == "verifiable"
    assert synth["rationale"].startswith("verifiable: weak solved 0 of 4 (<= 1), strong 4 of 4 (>= 3)")
    assert synth["scores"] == {"attempts": 4, "weak_correct": 0, "strong_correct": 4}
    rows = synth["attempts"]
    assert [(a["who"], a["i"], a["passed"]) for a in rows] == [("weak", i, False) for i in range(4)] + \
        [("strong", i, True) for i in range(4)]
    assert all("shape=None" in a["detail"] for a in rows if not a["passed"]), "each failure says what the world held"
    assert report.accepted[0].scores == {"weak_pass_rate": 0.0, "strong_pass_rate": 1.0}
    # 1 proposal + 4 strong attempts of 2 turns + 4 weak attempts of 1 turn, all in the report
    assert len(llm.requests) == 13 == report.requests == synth["item_requests"]
    assert report.to_dict()["llm_requests_per_accepted"] == 13
    assert synth["oracle"] == [{"tool": "write", "arguments": {"key": "shape", "value": "circle"}}, {"answer": "done"}]
    assert (tmp_path / "out" / "pack.yaml").is_file()


def test_solvers_are_not_told_which_side_they_are_on(llm, seeded_pack):
    llm.router.routes.update(challenger=scripted(GOOD), weak=weak)
    run_generator("challenger", seeded_pack, params(llm), cache=False)
    first = {m: sorted(json.dumps({k: v for k, v in r.json.items() if k != "model"}, sort_keys=True)
                       for r in requests_of(llm, m) if turn(r.json) == 0) for m in ("good", "weak")}
    assert len(first["good"]) == 4 and len(set(first["good"])) == 4, "four attempts, four different worlds"
    assert first["good"] == first["weak"], "weak attempt i and strong attempt i get the very same request"
    for body in first["good"]:
        assert not re.search(r"weak|strong|challenger", body, re.IGNORECASE), body


def test_too_easy_is_rejected_and_the_reflection_reaches_the_next_proposal(llm, pack_dir, tmp_path):
    llm.router.routes.update(challenger=scripted(EASY), weak=weak)
    report = run_generator("challenger", pack_dir, params(llm, rounds=2), run_dir=tmp_path / "run", cache=False)
    assert not report.accepted and report.rejected == {"weak_too_strong": 1}
    entry = report.per_item[0]["rejected"][0]
    assert entry["detail"].startswith("too easy: weak solved 4 of 4 (at most 1 allowed)")
    assert [h["reason"] for h in entry["history"]] == ["weak_too_strong", "weak_too_strong"]
    assert entry["history"][0]["reflection"] == ADVICE and "reflection" not in entry["history"][1]
    assert all(len(h["attempts"]) == 8 for h in entry["history"])
    proposals = [r for r in requests_of(llm, "challenger") if not first_user(r.json).startswith(REFLECTED)]
    reflections = [r for r in requests_of(llm, "challenger") if first_user(r.json).startswith(REFLECTED)]
    assert len(proposals) == 2 and len(reflections) == 1, "no reflection after the last round"
    assert "weak_too_strong: too easy" in reflections[0].messages[0]["content"]
    assert "weaker solvers passed 4 of 4" in reflections[0].messages[0]["content"]
    last = proposals[1].messages[-1]["content"]
    assert last.startswith("Rejected (weak_too_strong)") and f"Advice: {ADVICE}" in last
    # the reason is in the run store, not only in memory
    from agentsynth_kernel import RunStore

    store = RunStore(tmp_path / "run", create=False)
    try:
        events = [d for _, kind, d in store.events() if kind == "synth_item"]
    finally:
        store.close()
    assert events[0]["rejected"][0]["reason"] == "weak_too_strong"


def test_too_hard_or_broken_is_rejected(llm, pack_dir):
    llm.router.routes.update(challenger=scripted(BROKEN), weak=weak)
    report = run_generator("challenger", pack_dir, params(llm, rounds=1), cache=False)
    assert not report.accepted and report.rejected == {"strong_too_weak": 1}
    entry = report.per_item[0]["rejected"][0]
    assert entry["detail"].startswith("too hard or broken: strong solved 0 of 4 (at least 3 needed)")
    assert "shape='circle', expected 'square'" in entry["detail"]
    assert llm.router.counts.get("challenger") == 1, "one round: no reflection"


def test_a_revision_that_separates_the_solvers_is_accepted(llm, pack_dir):
    llm.router.routes.update(challenger=scripted(EASY, BROKEN, GOOD), weak=weak)
    report = run_generator("challenger", pack_dir, params(llm, max_rounds=3, reflector=False), cache=False)
    synth = report.accepted[0].trajectory.metadata["synth"]
    assert [h["reason"] for h in synth["history"]] == ["weak_too_strong", "strong_too_weak", "accepted"]
    assert synth["rounds"] == 3 and llm.router.counts["challenger"] == 3, "reflector: false makes no requests"


def test_short_circuit_runs_strong_only_when_the_weak_gate_passes(llm, pack_dir):
    llm.router.routes.update(challenger=scripted(EASY), weak=weak)
    report = run_generator("challenger", pack_dir, params(llm, rounds=1, short_circuit_strong=True), cache=False)
    assert report.rejected == {"weak_too_strong": 1}
    assert report.per_item[0]["rejected"][0]["history"][0]["short_circuited"] is True
    assert "good" not in llm.router.counts, "the strong solver was never asked"
    llm.clear()
    llm.router.routes["challenger"] = scripted(GOOD)
    report = run_generator("challenger", pack_dir, params(llm, rounds=1, short_circuit_strong=True), cache=False)
    assert len(report.accepted) == 1
    models = [r.json["model"] for r in llm.requests if r.json["model"] in ("weak", "good")]
    assert models == ["weak"] * 4 + ["good"] * 8, "every weak attempt before any strong one"


def test_attempts_and_thresholds_are_configurable(llm, pack_dir):
    # weak attempt 0 is lazy, attempt 1 solves it: 1 of 2 weak attempts pass
    llm.router.routes.update(challenger=scripted(GOOD))
    p = params(llm, rounds=1, attempts=2, weak=[policy(llm, "lazy"), policy(llm, "good2")])
    report = run_generator("challenger", pack_dir, p, cache=False)
    assert report.rejected == {"weak_too_strong": 1}, "scaled: at most 0.5 of 2 weak passes"
    assert "solved 1 of 2 (at most 0.5 allowed)" in report.per_item[0]["rejected"][0]["detail"]
    report = run_generator("challenger", pack_dir, {**p, "thresholds": {"weak_correct_max": 2}}, cache=False)
    synth = report.accepted[0].trajectory.metadata["synth"]
    assert [a["policy"] for a in synth["attempts"] if a["who"] == "weak"] == ["openai/lazy", "openai/good2"]
    assert synth["scores"] == {"attempts": 2, "weak_correct": 1, "strong_correct": 2}


def overriding(pack_dir):
    """The notes pack with a task that overrides the world's ``initial`` notes (so proposals may too)."""
    path = pack_dir / "pack.yaml"
    path.write_text(path.read_text().replace("    split: train\n", "    split: train\n"
                                             "    environment: {initial: {size: M, color: red}}\n"))
    return pack_dir


@pytest.mark.parametrize("proposal, why", [
    (task("Make sure the color is red.", [note("color", "red")]), "already true in the seed"),
    (task("Set the note 'shape' to 'circle'.", [note("shape", "circle")], environment={"initial": {"shape": "circle"}}),
     "the task's own environment override pre-seeds the answer"),
    (task("Set the note 'shape' to 'circle'.", [{"type": "synth_fingerprint"}]), "a checker that always passes"),
])
def test_a_task_the_untouched_world_already_passes_is_rejected_before_any_solver(llm, pack_dir, proposal, why):
    overriding(pack_dir)
    llm.router.routes.update(challenger=scripted(proposal), weak=weak)
    report = run_generator("challenger", pack_dir, params(llm, rounds=2), cache=False)
    assert not report.accepted and report.rejected == {"noop_passes": 1}, why
    assert "good" not in llm.router.counts and "weak" not in llm.router.counts, "no solver request is spent on it"


@pytest.mark.parametrize("extra, message", [
    ({"weak": []}, "acceptance: verifiable needs strong and weak solver policies"),
    ({"acceptance": "verifiabel"}, "did you mean 'verifiable'"),
    ({"weak_trials": 3}, "weak_trials: a setting of acceptance: single"),
    ({"acceptance": "single", "attempts": 8}, "attempts: a setting of acceptance: verifiable"),
    ({"thresholds": {"weak_correct_max": 5}}, "thresholds.weak_correct_max: must be within [0, 4]"),
    ({"thresholds": {"weak_corect_max": 1}}, "weak_corect_max"),
    ({"thresholds": {"weak_correct_max": 3, "strong_correct_min": 2}}, "must be below strong_correct_min"),
    ({"rounds": 2, "max_rounds": 4}, "give rounds or max_rounds, not both"),
    ({"reflector": {"api_base": "http://127.0.0.1:1/v1"}}, "reflector: expected false, true"),
    ({"attempts": 0}, "attempts: must be at least 1"),
])
def test_bad_loop_settings_are_path_qualified_errors(llm, extra, message):
    with pytest.raises(SpecError) as info:
        make_generator("challenger", params(llm, **extra), source="gen.yaml")
    text = str(info.value)
    assert message in text and "gen.yaml" in text, text


def test_a_proposal_may_override_only_what_the_packs_tasks_override(llm, pack_dir):
    llm.router.routes.update(challenger=scripted(task("Set the note 'shape' to 'circle'.", [note("shape", "circle")],
                                                      environment={"show_seed": True})), weak=weak)
    report = run_generator("challenger", pack_dir, params(llm, rounds=1), cache=False)
    assert report.rejected == {"invalid_task": 1}
    assert ("task.environment.show_seed: the tasks of this pack do not override 'show_seed'; a proposal may override "
            "nothing") in report.per_item[0]["rejected"][0]["detail"]


def test_a_proposal_that_names_a_host_file_is_rejected(llm, pack_dir, tmp_path):
    overriding(pack_dir)
    secret = tmp_path / "secret.txt"  # outside the pack directory (tmp_path/notes)
    secret.write_text("hunter2")
    for value in (str(secret), "../secret.txt"):
        llm.clear()
        llm.router.counts.clear()
        llm.router.routes.update(challenger=scripted(task("Set the note 'shape' to 'circle'.",
                                                          [note("shape", "circle")], environment={"initial": value})),
                                 weak=weak)
        report = run_generator("challenger", pack_dir, params(llm, rounds=1), cache=False)
        assert report.rejected == {"invalid_task": 1}, value
        detail = report.per_item[0]["rejected"][0]["detail"]
        assert "task.environment.initial: names a path outside the pack directory" in detail
        assert "good" not in llm.router.counts and "weak" not in llm.router.counts


def test_a_challenger_cannot_seed_the_sql_world_from_a_host_database(llm, tmp_path):
    secret = tmp_path / "private.sql"
    secret.write_text("CREATE TABLE secrets (v TEXT); INSERT INTO secrets VALUES ('hunter2');")
    proposal = task("Set the note 'shape' to 'circle'.", [{"type": "sql", "query": "SELECT v FROM secrets",
                                                           "expect": "x"}], environment={"seed": str(secret)})
    llm.router.routes.update(challenger=scripted(proposal), weak=weak)
    report = run_generator("challenger", "core", params(llm, rounds=1), cache=False)
    assert report.rejected == {"invalid_task": 1}
    detail = report.per_item[0]["rejected"][0]["detail"]
    assert "task.environment.seed: the tasks of this pack do not override 'seed'" in detail
    assert "task.environment.seed: names a path outside the pack directory" in detail
    assert not any("hunter2" in json.dumps(r.json) for r in llm.requests)


def test_a_written_pack_copies_no_file_from_outside_the_source_pack(pack_dir, tmp_path):
    from agentsynth_kernel import EpisodeResult, Trajectory, load_pack
    from agentsynth_synth import write_pack

    (tmp_path / "outside.txt").write_text("not the pack's")
    record = {"id": "t1", "instruction": "x", "checkers": [note("a", "b")], "environment": {"initial": "../outside.txt"}}
    traj = Trajectory("t1", "x", metadata={"synth": {"new_task": True, "task": record, "oracle": [{"answer": "ok"}]}})
    out = tmp_path / "deep" / "er" / "out"
    write_pack([EpisodeResult("t1", 0, 0, "passed", trajectory=traj)], load_pack(pack_dir), out)
    assert (out / "pack.yaml").is_file()
    assert not (out.parent / "outside.txt").exists(), "a file was copied outside the output directory"


def test_evolve_with_verifiable_acceptance_keeps_the_proposed_oracle(llm, pack_dir):
    def evolver(request):
        if first_user(request).startswith(REFLECTED):
            return reply(ADVICE)
        return task("Set the note 'color' to 'navy'.", [note("color", "navy")],
                    oracle=[{"tool": "write", "arguments": {"key": "color", "value": "navy"}}, {"answer": "ok"}])

    llm.router.routes.update(evolver=evolver)
    report = run_generator("evolve", pack_dir, {"model": "openai/evolver", "api_base": llm.base_url,
                                                "only": ["set-color"], "acceptance": "verifiable", "attempts": 2,
                                                "strong": [policy(llm, "good")], "weak": [policy(llm, "lazy")]},
                           cache=False)
    synth = report.accepted[0].trajectory.metadata["synth"]
    assert synth["source_task"] == "set-color" and synth["acceptance"] == "verifiable"
    assert synth["oracle"][-1] == {"answer": "ok"}, "the evolver's own oracle, replayed to a pass"
    assert synth["scores"] == {"attempts": 2, "weak_correct": 0, "strong_correct": 2}


def test_an_item_killed_before_its_commit_is_rebuilt_from_its_steps_without_a_request(llm, pack_dir, tmp_path):
    """The last moment a kill can come: every step stored, the item not. The rerun requests nothing
    and makes the same record (the restored strong attempt is the oracle)."""
    import sqlite3

    llm.router.routes.update(challenger=scripted(EASY, GOOD), weak=weak)
    run_dir = tmp_path / "run"
    first = run_generator("challenger", pack_dir, params(llm, rounds=2), run_dir=run_dir, cache=False)
    before = first.accepted[0].trajectory.metadata["synth"]
    db = sqlite3.connect(run_dir / "run.sqlite")
    with db:
        db.execute("DELETE FROM events WHERE kind = 'synth_item'")
        db.execute("DELETE FROM episodes")
    db.close()
    llm.clear()
    again = run_generator("challenger", pack_dir, params(llm, rounds=2), run_dir=run_dir, cache=False)
    assert llm.requests == [], "every proposal, attempt and reflection came from the store"
    assert again.restored_steps == 2 + 16 + 1 and again.done_items == 1
    after = again.accepted[0].trajectory.metadata["synth"]
    assert after["oracle"] == before["oracle"] and after["attempts"] == before["attempts"]
    assert after["history"] == before["history"] and after["item_requests"] == before["item_requests"] == 31


def test_a_provider_failure_fails_the_item_keeps_its_attempts_and_the_rerun_finishes_it(llm, pack_dir, tmp_path):
    from conftest import status

    llm.router.routes.update(challenger=scripted(GOOD), weak=weak, good=lambda r: status(401, "no such key"))
    run_dir = tmp_path / "run"
    p = params(llm, rounds=1, short_circuit_strong=True)
    report = run_generator("challenger", pack_dir, p, run_dir=run_dir, cache=False)
    assert report.incomplete == 1 and not report.accepted and report.done_items == 0
    assert "provider" in report.errors[0]
    llm.clear()
    llm.router.routes["good"] = solver
    again = run_generator("challenger", pack_dir, p, run_dir=run_dir, cache=False)
    assert [r.task_id for r in again.accepted] == ["ch-0000"]
    asked = {r.json["model"] for r in llm.requests}
    assert asked == {"good"}, "the proposal and the weak attempts came from the store"
    assert again.restored_steps == 1 + 4
