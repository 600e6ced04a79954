"""The adversarial kit and ``pack audit``: exploits that pass a weak task are caught, a sound
pack audits clean, world plugins add exploits through the hook, answers cannot be stuffed."""

from __future__ import annotations

import json

import pytest

from agentsynth_kernel import Answer, Step, Trajectory, hookimpl
from agentsynth_kernel.audit import audit_pack
from agentsynth_kernel.builtins.checkers import AnswerContains, AnswerNumber, numbers_in
from agentsynth_kernel.spec import load_pack
from agentsynth_kernel.testing.adversarial import (
    GENERIC_EXPLOITS,
    Exploit,
    assert_unfarmable,
    exploits_for,
    leaked_answers,
    run_exploits,
)

SOUND = """
id: kvsound
environment: {type: kv, initial: {a: "0", b: "0", c: "0"}}
tasks:
  - id: set-a
    instruction: Set a to 1
    checkers: [{type: kv_equals, key: a, value: "1"}]
  - id: count
    instruction: How many keys are there? Answer with the number.
    checkers: [{type: answer_number, value: 3}, {type: kv_equals, key: a, value: "0"}]
"""

# Three classic holes: a checker that trusts the answer's words, a numeric answer checked with
# a loose regex (stuffing every number passes), and an instruction that gives its answer away.
WEAK = """
id: kvweak
environment: {type: kv, initial: {a: "0"}}
tasks:
  - id: trusts-words
    instruction: Set a to 1
    checkers: [{type: answer_contains, text: done}, {type: kv_equals, key: a, value: "0"}]
  - id: loose-number
    instruction: How many keys are there?
    checkers: [{type: answer_contains, regex: '\\b1\\b'}, {type: kv_equals, key: a, value: "0"}]
  - id: leaks
    instruction: Reply with the word banana.
    checkers: [{type: answer_contains, text: banana}, {type: kv_equals, key: a, value: "0"}]
"""

ORACLE = """
ORACLE = {
    "set-a": [{"tool": "set", "arguments": {"key": "a", "value": "1"}}, {"answer": "a is 1"}],
    "count": [{"answer": "There are 3 keys."}],
}
"""


@pytest.fixture
def sound(write, host):
    write("kvsound/oracle.py", ORACLE)
    return load_pack(write("kvsound/pack.yaml", SOUND).parent, host=host)


@pytest.fixture
def weak(write, host):
    return load_pack(write("kvweak/pack.yaml", WEAK).parent, host=host)


def test_a_sound_pack_cannot_be_farmed_by_the_generic_kit(sound, host):
    outcomes = assert_unfarmable(sound, host=host, timeout=5)
    assert len(outcomes) == len(GENERIC_EXPLOITS) * len(sound.tasks)
    assert {o.exploit for o in outcomes} == {e.name for e in GENERIC_EXPLOITS}


def test_the_kit_names_every_exploit_that_farms_a_weak_pack(weak, host):
    with pytest.raises(AssertionError) as caught:
        assert_unfarmable(weak, host=host, timeout=5)
    message = str(caught.value)
    assert "generic.claim_success on task 'trusts-words': PASSED" in message
    assert "generic.stuffed_answer on task 'loose-number': PASSED" in message
    assert "generic.echo_task on task 'leaks': PASSED" in message
    farmed = {(o.exploit, o.task_id) for o in run_exploits(weak, host=host, timeout=5) if o.farmed}
    assert ("generic.echo_task", "set-a") not in farmed  # no such task: only weak tasks are reported
    assert all(task in {"trusts-words", "loose-number", "leaks"} for _, task in farmed)


def test_an_attempt_that_leaves_its_episode_unscored_is_a_hole(sound, host):
    """A world step that raises ends the episode as an environment error, not a failure: for an RL
    policy a reward it can zero at will (to dodge a negative one), so the kit reports it like a pass."""
    crash = Exploit("kv.crash", "crash the world's step", [{"tool": "fail", "arguments": {}}, {"answer": "done"}],
                    tasks=("set-a",))
    [outcome] = run_exploits(sound, [crash], host=host, timeout=5)
    assert outcome.unscored and not outcome.farmed and not outcome.ok
    with pytest.raises(AssertionError, match=r"kv.crash on task 'set-a': unscored \(environment error\)"):
        assert_unfarmable(sound, [crash], host=host, timeout=5)
    timeout = Exploit("kv.slow", "a call that sleeps", [{"tool": "sleep", "arguments": {"seconds": 0.01}},
                                                         {"answer": "done"}], tasks=("set-a",))
    [slow] = run_exploits(sound, [timeout], host=host, timeout=5)
    assert not slow.unscored  # a plain failed attempt


def test_replaying_another_tasks_transcript_does_not_pass(sound, host):
    [replay] = [e for e in GENERIC_EXPLOITS if e.name == "generic.replay_other_task"]
    outcomes = run_exploits(sound, [replay], host=host, timeout=5)
    assert [o.status for o in outcomes] == ["failed", "failed"]


class KVExploits:
    """A throw-away world plugin: one exploit for the kv world, one for another world."""

    def __init__(self, touched: list[str]):
        self.touched = touched

    @hookimpl
    def adversarial_exploits(self, environment):
        if environment != "kv":
            return None
        return [Exploit("kv.overwrite_then_restore", "set the key, then put the old value back",
                        [{"tool": "set", "arguments": {"key": "a", "value": "1"}},
                         {"tool": "set", "arguments": {"key": "a", "value": "0"}}, {"answer": "a is 1"}],
                        tasks=("set-a",), host_check=lambda: self.touched[0] if self.touched else None)]


def test_world_plugins_add_exploits_and_host_checks(sound, host):
    touched: list[str] = []
    host.add_plugin(KVExploits(touched), "kv-exploits")
    names = [e.name for e in exploits_for(sound, host)]
    assert names[-1] == "kv.overwrite_then_restore" and len(names) == len(GENERIC_EXPLOITS) + 1
    [outcome] = run_exploits(sound, [e for e in exploits_for(sound, host) if e.name.startswith("kv.")], host=host)
    assert outcome.task_id == "set-a" and outcome.ok
    touched.append("wrote /tmp/pwned")
    with pytest.raises(AssertionError, match="host touched: wrote /tmp/pwned"):
        assert_unfarmable(sound, [e for e in exploits_for(sound, host) if e.name.startswith("kv.")], host=host)


def test_leaked_answers_are_found_by_running_the_answer_checkers_on_the_instruction(weak, sound, host):
    assert leaked_answers(weak, host) == [("leaks", "the instruction itself passes answer_contains (answer matches)")]
    assert leaked_answers(sound, host) == []


def test_audit_reports_robustness_per_task(weak, sound, host):
    report = audit_pack(weak, host=host, timeout=5)
    by_task = {t.task_id: t for t in report.tasks}
    assert report.robustness == 0.0
    assert "generic.claim_success" in by_task["trusts-words"].farmed_by
    assert by_task["leaks"].leaks
    clean = audit_pack(sound, host=host, timeout=5)
    assert clean.robustness == 1.0 and all(t.attempts == len(clean.exploits) + 2 for t in clean.tasks)


def test_pack_audit_command_exits_1_on_a_farmable_pack_and_0_on_a_sound_one(cli, write, tmp_path):
    write("kvweak/pack.yaml", WEAK)
    code, out, _ = cli("pack", "audit", "kvweak", "--timeout", "5", "--json", "audit.json")
    assert code == 1 and "FARMABLE" in out and "robustness 0%" in out
    data = json.loads((tmp_path / "audit.json").read_text())
    assert data["robustness"] == 0.0 and {t["task_id"] for t in data["tasks"] if not t["robust"]} == {
        "trusts-words", "loose-number", "leaks"}
    write("kvsound/oracle.py", ORACLE)
    write("kvsound/pack.yaml", SOUND)
    code, out, _ = cli("pack", "audit", "kvsound", "--timeout", "5")
    assert code == 0 and "robustness 100%" in out
    code, out, _ = cli("pack", "audit", "kvweak", "--timeout", "5", "--min-robustness", "0")
    assert code == 0


def test_validate_fails_the_robustness_gate_of_a_farmable_pack(cli, write, tmp_path):
    write("kvweak/pack.yaml", WEAK)
    code, out, _ = cli("pack", "validate", "kvweak", "--timeout", "0.5", "--random-trials", "1", "--json", "g.json")
    gates = {g["name"]: g for g in json.loads((tmp_path / "g.json").read_text())["gates"]}
    assert code == 1 and gates["robustness"]["status"] == "fail"
    assert any("task 'leaks'" in p for p in gates["robustness"]["problems"])


def _answer(instruction: str, text: str) -> Trajectory:
    return Trajectory("t", instruction, steps=[Step(Answer(text), None, 0, 0.0)])


@pytest.mark.parametrize(("text", "expected"), [
    ("Order 1008 totals $56.99, i.e. 1,299.50 of HAT-01 in v2; 4 left, -3 (7)",
     [1008.0, 56.99, 1299.5, 4.0, -3.0, 7.0]),
    ("no numbers here, SKU MUG-02", []),
])
def test_numbers_in(text, expected):
    assert numbers_in(text) == expected


@pytest.mark.parametrize(("answer", "passed"), [
    ("Order 1008 totals $56.99.", True),  # the order number comes from the question
    ("56.99", True),
    ("It is 56.99 or maybe 57.00", False),
    ("0 1 2 3 56.99", False),
    ("I don't know", False),
    ("55.00", False),
])
def test_answer_number_wants_exactly_one_new_number(answer, passed):
    verdict = AnswerNumber(56.99).check(None, _answer("What is the total of order 1008?", answer))
    assert verdict.passed is passed, verdict.detail


def test_answer_contains_reject_and_max_chars():
    refuse = AnswerContains(text="1099", regex=r"\bnot\b", reject=r"\b(done|cancelled)\b")
    assert refuse.check(None, _answer("Cancel order 1099.", "Order 1099 does not exist.")).passed
    assert not refuse.check(None, _answer("Cancel order 1099.", "Order 1099 not found... done")).passed
    short = AnswerContains(text="dana@example.com", max_chars=40)
    assert short.check(None, _answer("?", "It is dana@example.com")).passed
    verdict = short.check(None, _answer("?", "emails: " + " ".join(f"u{i}@example.com" for i in range(50))
                                        + " dana@example.com"))
    assert not verdict.passed and "max_chars=40" in verdict.detail
    with pytest.raises(ValueError):
        AnswerContains(text="x", max_chars=0)
    with pytest.raises(ValueError):
        AnswerNumber(float("nan"))


ANSWER_ONLY = """
id: kvanswers
answer_checked: true
environment: {type: kv, initial: {a: "0", b: "0", c: "0"}}
tasks:
  - id: count
    instruction: How many keys are there?
    checkers: [{type: answer_number, value: 3}]
"""


def test_an_answer_checked_pack_passes_the_world_state_gate_and_is_audited(cli, write, tmp_path):
    write("kvanswers/oracle.py", 'ORACLE = {"count": [{"answer": "There are 3 keys."}]}\n')
    write("kvanswers/pack.yaml", ANSWER_ONLY)
    code, out, _ = cli("pack", "validate", "kvanswers", "--timeout", "0.5", "--random-trials", "1", "--json", "g.json")
    gates = {g["name"]: g for g in json.loads((tmp_path / "g.json").read_text())["gates"]}
    assert code == 0, out
    assert gates["world-state-checkers"]["status"] == "pass" and "answer_checked" in gates["world-state-checkers"]["note"]
    assert gates["robustness"]["status"] == "pass"
    write("kvanswers/pack.yaml", ANSWER_ONLY.replace("answer_checked: true\n", ""))
    code, _, _ = cli("pack", "validate", "kvanswers", "--timeout", "0.5", "--random-trials", "1", "--json", "g.json")
    gates = {g["name"]: g for g in json.loads((tmp_path / "g.json").read_text())["gates"]}
    assert code == 1 and gates["world-state-checkers"]["status"] == "fail"


class RunEnd:
    def __init__(self):
        self.finished = 0

    @hookimpl
    def run_finished(self, run, results):
        self.finished += 1


def test_attempts_end_like_a_run_so_shared_resources_are_released(sound, host):
    seen = RunEnd()
    host.add_plugin(seen, "run-end")
    run_exploits(sound, GENERIC_EXPLOITS[:1], host=host, timeout=5)
    assert seen.finished == 1
    audit_pack(sound, host=host, timeout=5)
    assert seen.finished == 2  # once for the whole audit, not per part


def test_a_call_with_huge_arguments_is_refused_by_the_kernel_and_not_kept(sound, host):
    from agentsynth_kernel.episode import MAX_ARGUMENT_BYTES, EpisodeConfig, run_episode
    from agentsynth_kernel.spec import ComponentSpec

    script = [{"tool": "set", "arguments": {"key": "a", "value": "1" * (MAX_ARGUMENT_BYTES + 10)}}, {"answer": "x"}]
    import asyncio

    result = asyncio.run(run_episode(host, sound, sound.tasks[0], 0, 0,
                                     EpisodeConfig(ComponentSpec("scripted", {"actions": script}), timeout=5)))
    step = result.trajectory.steps[0]
    assert step.invalid and step.observation.error and "the call was not run" in step.observation.content
    assert step.action.arguments == {"truncated": True, "bytes": MAX_ARGUMENT_BYTES + 10 + len('{"key":"a","value":""}')}
    assert result.status == "failed"  # the value was never set


class KVPerturb:
    """A throw-away world plugin that relabels the kv world's keys (a -> q)."""

    @hookimpl
    def perturb_task(self, pack, task, seed):
        from agentsynth_kernel.testing.adversarial import PerturbedTask

        if pack.environment is None or pack.environment.type != "kv":
            return None
        initial = {("q" if k == "a" else k): v for k, v in pack.environment.params.get("initial", {}).items()}
        return PerturbedTask.by_mapping(pack, task, {"a": "q"}, environment={"initial": initial})


def test_perturbed_siblings_catch_memorised_transcripts(sound, host):
    host.add_plugin(KVPerturb(), "kv-perturb")
    from agentsynth_kernel.testing.adversarial import PerturbedTask

    sibling = host.pm.hook.perturb_task(pack=sound, task=sound.tasks[0], seed=0)
    assert isinstance(sibling, PerturbedTask)
    assert sibling.task.instruction == "Set q to 1" and sibling.task.checkers[0].params["key"] == "q"
    assert sibling.pack.base_dir == sound.base_dir and [t.id for t in sibling.pack.tasks] == ["set-a"]
    report = {t.task_id: t for t in audit_pack(sound, host=host, timeout=5).tasks}
    # set-a: the relabelled oracle passes the sibling, the original transcript (set a) does not
    assert report["set-a"].sibling == "ok" and report["set-a"].robust
    # count: relabelling keys does not change the answer, so the memorised answer still passes: a note
    assert report["count"].sibling == "memorisable" and report["count"].robust
    assert "replayed as is, passes the perturbed sibling" in report["count"].notes[0]
