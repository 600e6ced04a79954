"""A real run (engine + run store) with known outcomes: judge scores in the store, calibration numbers,
preference pairs, and `agentsynth run` / `agentsynth judge ...` end to end."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from agentsynth_judge import HeuristicJudge, calibrate_results, read_run
from agentsynth_kernel import RunStore, execute, load_run_spec
from agentsynth_kernel.cli import cli, main
from conftest import write_spec

W = '{tool: write, arguments: {key: color, value: %s}}'
R = '{tool: read, arguments: {key: %s}}'

# world verdict / blind heuristic verdict, by construction:
#   good: pass/pass (tp)  noop: fail/fail (tn)  claim: fail/fail (tn)
#   wrong: fail/pass (fp) unsure: pass/fail (fn)
SPEC = f"""
name: notes-calibration
environment: {{type: notes, initial: {{color: red}}}}
policy: script
concurrency: 2
checkers: []
tasks:
  - id: good
    instruction: Set the note 'color' to blue.
    checkers: [{{type: note_equals, key: color, value: blue}}]
    metadata: {{script: [{R % 'color'}, {W % 'blue'}, {{answer: "The note 'color' is now blue."}}]}}
  - id: noop
    instruction: Set the note 'color' to blue.
    checkers: [{{type: note_equals, key: color, value: blue}}]
    metadata: {{script: [{{answer: ""}}]}}
  - id: claim
    instruction: Set the note 'color' to blue.
    checkers: [{{type: note_equals, key: color, value: blue}}]
    metadata: {{script: [{{answer: "Done! I have updated the note successfully."}}]}}
  - id: wrong
    instruction: Set the note 'color' to blue.
    checkers: [{{type: note_equals, key: color, value: blue}}]
    metadata: {{script: [{W % 'green'}, {{answer: "The note 'color' is now green."}}]}}
  - id: unsure
    instruction: Set the note 'color' to blue.
    checkers: [{{type: note_equals, key: color, value: blue}}]
    metadata: {{script: [{W % 'blue'}, {R % 'colr'}, {R % 'colr'}, {R % 'colr'}, {R % 'colr'}, {R % 'colr'},
                         {{answer: "I could not verify it."}}]}}
judge: {{type: heuristic}}
""".replace("checkers: []\n", "")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("run")
    spec_file = write_spec(base / "spec.yaml", SPEC)
    spec, pack = load_run_spec(spec_file)
    import asyncio

    report = asyncio.run(execute(spec, pack, run_dir=base / "run"))
    assert {r.task_id: r.status for r in report.results} == {
        "good": "passed", "noop": "failed", "claim": "failed", "wrong": "failed", "unsure": "passed"}
    return base / "run"


def test_judge_scores_and_reward_are_stored_per_episode(run_dir):
    store = RunStore(run_dir)
    by_task = {r.task_id: r for r in store.results()}
    store.close()
    good, wrong = by_task["good"].scores, by_task["wrong"].scores
    for key in ("judge", "judge.task_completion", "judge.safety", "judge.reward", "judge.passed"):
        assert key in good
    assert good["judge"] == 1.0 and good["judge.reward"] == 1.0
    # wrong: outcome 0, verification 0 -> reward is the judge's share only
    assert wrong["judge.reward"] == pytest.approx(0.2 * wrong["judge"], abs=1e-4)
    assert wrong["judge.passed"] == 0.0  # failed checkers veto a pass when the judge sees them
    # the rationale travels with the trajectory (the engine stores only scores)
    note = by_task["wrong"].trajectory.metadata["judge"]
    assert note["kind"] == "heuristic" and note["passed"] is False and note["score"] == wrong["judge"]
    assert "0/1 checkers passed (failed: note_equals)" in note["rationale"]


async def test_calibration_numbers_on_known_outcomes(run_dir):
    results, spec = read_run(run_dir)
    assert spec["judge"]["type"] == "heuristic"
    cal = await calibrate_results(results, HeuristicJudge())
    c = cal.confusion
    assert (c.tp, c.fp, c.fn, c.tn) == (1, 1, 1, 2)
    assert cal.accuracy == pytest.approx(0.6)
    # po = .6, pe = .4*.4 + .6*.6 = .52 -> kappa = .08 / .48
    assert cal.kappa == pytest.approx(0.08 / 0.48)
    assert cal.to_dict()["confusion_matrix"] == {"pass": {"pass": 1, "fail": 1}, "fail": {"pass": 1, "fail": 2}}
    wrong = next(e for e in cal.episodes if e.task_id == "wrong")
    assert wrong.judge_passed and not wrong.world_passed
    # with the verdicts (or the stored scores) the heuristic judge agrees perfectly: that is why blind is the default
    for kwargs in ({"with_verdicts": True}, {"stored": True}):
        seen = await calibrate_results(results, HeuristicJudge(), **kwargs)
        assert (seen.accuracy, seen.kappa) == (1.0, 1.0)


def test_calibrate_command(run_dir, tmp_path):
    runner = CliRunner()
    out = runner.invoke(cli, ["judge", "calibrate", str(run_dir), "--json", "-"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["n"] == 5 and data["accuracy"] == 0.6 and data["kappa"] == pytest.approx(0.1667, abs=1e-4)
    assert data["confusion"] == {"tp": 1, "fp": 1, "fn": 1, "tn": 2} and data["blind"] is True
    assert data["judge"] == "heuristic"
    text = runner.invoke(cli, ["judge", "calibrate", str(run_dir)])
    assert text.exit_code == 0 and "Cohen's kappa 0.167" in text.output and "accuracy  0.600" in text.output
    ens = write_spec(tmp_path / "ens.yaml", "type: ensemble\naggregate: majority\njudges: [heuristic, heuristic]\n")
    out = runner.invoke(cli, ["judge", "calibrate", str(run_dir), "--judge-spec", str(ens), "--json", "-"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["confusion"] == {"tp": 1, "fp": 1, "fn": 1, "tn": 2}
    # an ensemble: per-judge accuracy against the world, and agreement between the judges
    ens2 = write_spec(tmp_path / "ens2.yaml", "type: ensemble\njudges: [heuristic, {type: heuristic, rubric: "
                                              "{dimensions: [{name: safety, weight: 1}]}}]\n")
    data = json.loads(runner.invoke(cli, ["judge", "calibrate", str(run_dir), "--judge-spec", str(ens2),
                                          "--json", "-"]).output)
    # the safety-only member still fails noop and claim: blind, a claim no call backs and an episode with
    # nothing to show fail whatever the rubric; it passes the others (it disagrees with judge[0] on unsure)
    assert [(m["judge"], m["accuracy"], m["kappa"]) for m in data["judges"]] == [
        ("judge[0] heuristic", 0.6, pytest.approx(0.1667, abs=1e-4)),
        ("judge[1] heuristic", 0.8, pytest.approx(0.6154, abs=1e-4))]
    assert data["agreement"]["percent_agreement"] == pytest.approx(0.8)
    text = runner.invoke(cli, ["judge", "calibrate", str(run_dir), "--judge-spec", str(ens2)]).output
    assert "ensemble members (agreement 0.800" in text and "judge[1] heuristic" in text
    # a plain judge has no member table, even though the stored run had notes in the trajectories
    assert "judges" not in json.loads(runner.invoke(cli, ["judge", "calibrate", str(run_dir), "--json", "-"]).output)
    stored = json.loads(runner.invoke(cli, ["judge", "calibrate", str(run_dir), "--stored", "--json", "-"]).output)
    assert stored["accuracy"] == 1.0 and stored["blind"] is False
    twice = json.loads(runner.invoke(cli, ["judge", "calibrate", str(run_dir), str(run_dir), "--json", "-"]).output)
    assert twice["n"] == 10 and twice["confusion"] == {"tp": 2, "fp": 2, "fn": 2, "tn": 4}


def test_score_command_rescores_stored_trajectories(run_dir, tmp_path):
    out_file = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(cli, ["judge", "score", str(run_dir), "-o", str(out_file)])
    assert res.exit_code == 0, res.output
    rows = {r["task_id"]: r for r in map(json.loads, out_file.read_text().splitlines())}
    assert set(rows) == {"good", "noop", "claim", "wrong", "unsure"} and "5 trajectories" in res.output
    assert rows["good"]["score"] == 1.0 and rows["good"]["dimensions"]["reward"] == 1.0
    assert rows["wrong"]["passed"] is False  # the verdicts are shown by default: the world vetoes
    assert "checkers passed" in rows["wrong"]["rationale"]
    blind = tmp_path / "blind.jsonl"
    res = CliRunner().invoke(cli, ["judge", "score", str(run_dir), "-o", str(blind), "--blind",
                                   "--judge", "heuristic"])
    assert res.exit_code == 0, res.output
    rows = {r["task_id"]: r for r in map(json.loads, blind.read_text().splitlines())}
    assert rows["wrong"]["passed"] is True and rows["unsure"]["passed"] is False


def test_pairs_command(run_dir, tmp_path):
    out_file = tmp_path / "pairs.jsonl"
    res = CliRunner().invoke(cli, ["judge", "pairs", str(run_dir), "-o", str(out_file)])
    assert res.exit_code == 0, res.output
    # each task ran once, so no task has both a passed and a failed episode
    assert out_file.read_text() == "" and "0 pairs" in res.output
    # a second run where 'noop' is solved: one outcome pair for that task
    fixed = SPEC.replace('metadata: {script: [{answer: ""}]}',
                         f'metadata: {{script: [{W % "blue"}, {{answer: "The note \'color\' is now blue."}}]}}')
    spec_file = write_spec(tmp_path / "spec.yaml", fixed)
    res = CliRunner().invoke(cli, ["run", str(spec_file), "--run-dir", str(tmp_path / "run2"), "-q"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, ["judge", "pairs", str(run_dir), str(tmp_path / "run2"), "-o", str(out_file),
                                   "--judge", "heuristic"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [(r["task_id"], r["source"]) for r in rows] == [("noop", "outcome")]
    assert rows[0]["chosen"][0]["tool_calls"][0]["function"]["name"] == "write"
    assert rows[0]["rejected"] == [{"role": "assistant", "content": ""}]
    assert rows[0]["prompt"][-1]["role"] == "user"


def test_agentsynth_run_with_a_judge_end_to_end(tmp_path):
    spec_text = SPEC.replace("judge: {type: heuristic}", (
        "judge: {type: ensemble, aggregate: median, judges: ["
        "{type: heuristic, reward: {outcome: 1, verification: 0, judge: 0}}, "
        "{type: heuristic, use_verdicts: false}]}"))
    spec_file = write_spec(tmp_path / "spec.yaml", spec_text)
    res = CliRunner().invoke(cli, ["run", str(spec_file), "--run-dir", str(tmp_path / "r"), "-q",
                                   "--json", str(tmp_path / "report.json")])
    assert res.exit_code == 0, res.output
    results, _ = read_run(tmp_path / "r")
    scores = {r.task_id: r.scores for r in results}
    assert set(scores) == {"good", "noop", "claim", "wrong", "unsure"}
    assert scores["good"]["judge"] == 1.0 and scores["good"]["judge.agreement"] == 1.0
    # the blind judge passes 'wrong' (it wrote confidently), the one that sees the verdicts does not
    assert scores["wrong"]["judge.agreement"] == 0.5
    assert scores["claim"]["judge.agreement"] == 1.0 and scores["claim"]["judge.passed"] == 0.0
    assert scores["claim"]["judge.reward"] < scores["good"]["judge.reward"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"] == {"passed": 2, "failed": 3, "error": 0}
    # the stored ensemble votes give per-judge calibration without re-scoring
    res = CliRunner().invoke(cli, ["judge", "calibrate", str(tmp_path / "r"), "--stored", "--json", "-"])
    data = json.loads(res.output)
    assert [m["accuracy"] for m in data["judges"]] == [1.0, 0.6]  # sees the verdicts / blind
    assert data["agreement"]["percent_agreement"] == pytest.approx(0.6)


@pytest.mark.parametrize(("judge", "expected"), [
    ("{type: heuristc}", "judge.type: unknown judge 'heuristc' (did you mean 'heuristic'?)"),
    ("{type: heuristic, reward: {outcome: -1}}", "reward.outcome: must be >= 0"),
    ("{type: heuristic, rubric: {dimensions: [{name: style, weight: 1}]}}",
     "rubric.dimensions[0].name: the heuristic judge cannot score 'style'"),
    ("{type: heuristic, rubric: {dimensions: [{name: safety, weight: x}]}}",
     "rubric.dimensions[0].weight: expected a number"),
    ("{type: heuristic, disable_safety_rules: [rmrf]}", "disable_safety_rules[0]: no safety rule 'rmrf' (did you mean 'rm_rf'?)"),
    ("{type: ensemble, aggregate: mode, judges: [heuristic]}", "aggregate: expected one of mean, median, majority"),
    ("{type: ensemble, judges: [{type: heuristic, colour: 1}]}", "judges[0]"),
    ("{type: ensemble, judges: []}", "judges: an ensemble needs at least one judge"),
    ("{type: heuristic, reference_steps: 0}", "reference_steps: must be at least 1, got 0"),
])
def test_bad_judge_specs_are_clean_path_qualified_errors(tmp_path, capsys, judge, expected):
    spec_file = write_spec(tmp_path / "spec.yaml", SPEC.replace("judge: {type: heuristic}", f"judge: {judge}"))
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(spec_file), "--no-store", "-q"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: {spec_file}: judge" in err and expected in err


def test_calibrate_refuses_a_non_run_directory(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["judge", "calibrate", str(tmp_path)])
    assert exit_.value.code == 2
    assert "not a run directory" in capsys.readouterr().err


def test_a_bad_rubric_file_found_only_at_build_time_is_a_judge_error(tmp_path):
    sub = tmp_path / "spec"
    sub.mkdir()
    (sub / "rubric.yaml").write_text("dimensions: [{name: safety, weight: heavy}]\n")
    spec_file = write_spec(sub / "spec.yaml", SPEC.replace("judge: {type: heuristic}", "judge: {type: heuristic, rubric: rubric.yaml}"))
    res = CliRunner().invoke(cli, ["run", str(spec_file), "--run-dir", str(tmp_path / "run"), "-q"])
    assert res.exit_code == 0, res.output
    results, _ = read_run(tmp_path / "run")
    assert {r.error_kind for r in results} <= {"", "agent"}  # the checkers' verdicts stand
    assert all(r.judge_error.startswith("judge error:") for r in results)
    assert "rubric.yaml: dimensions[0].weight: expected a number, got str 'heavy'" in results[0].judge_error
