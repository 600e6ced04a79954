"""Confidence routing on fresh runs of the `core` pack: the counts add up, the judge is called only for
the borderline band (the heuristic judge, and the llm judge over a real HTTP server), a failing judge
call fails one item, gamed trajectories are not auto-accepted, and the learned / routed judges in a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsynth_judge import read_run
from agentsynth_judge.learned import load_verifier
from agentsynth_judge.routing import decide
from agentsynth_kernel import RunStore
from agentsynth_kernel.testing import reply
from conftest import CHEATS, run_cli, write_spec

FRESH = ("fresh-sloppy", "fresh-random")


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def route(core_runs, verifier_file, tmp_path, *extra: str, runs=FRESH) -> tuple[int, dict, list[dict]]:
    out, report = tmp_path / "routed.jsonl", tmp_path / "route.json"
    code = run_cli("judge", "route", *(str(core_runs[r]) for r in runs), "--verifier", str(verifier_file),
                   "-o", str(out), "--json", str(report), *extra)
    return code, (json.loads(report.read_text()) if report.exists() else {}), (rows_of(out) if out.exists() else [])


def test_counts_add_up_and_only_the_band_is_judged(core_runs, verifier_file, tmp_path):
    code, rep, rows = route(core_runs, verifier_file, tmp_path, "--accept-above", "0.8", "--drop-below", "0.2")
    assert code == 0
    n = sum(len(read_run(core_runs[r])[0]) for r in FRESH)
    assert rep["n"] == len(rows) == n
    assert rep["accepted"] + rep["dropped"] + rep["judged"] == n
    assert rep["judge_calls"] == rep["judged"] and rep["judge_calls"] + rep["judge_calls_saved"] == n
    assert rep["undecided"] == 0 and rep["judge_errors"] == 0
    by_route = {k: [r for r in rows if r["route"] == k] for k in ("accept", "drop", "judge")}
    assert [len(by_route[k]) for k in ("accept", "drop", "judge")] == [rep["accepted"], rep["dropped"], rep["judged"]]
    assert all(r["p_pass"] >= 0.8 and r["passed"] is True and "judge_score" not in r for r in by_route["accept"])
    assert all(r["p_pass"] <= 0.2 and r["passed"] is False for r in by_route["drop"])
    assert all(0.2 < r["p_pass"] < 0.8 or r.get("novelty") for r in by_route["judge"])
    assert all(r["judge_score"] is not None for r in by_route["judge"])
    assert rep["accepted"] + rep["dropped"] > 0, "the verifier decided nothing on in-distribution runs"
    assert rep["vs_world"]["n"] == n and 0.0 <= rep["vs_world"]["routed"] <= 1.0
    assert rep["verifier"] == load_verifier(verifier_file).id and "vs_judge_all" not in rep


def test_compare_measures_the_agreement_routing_loses(core_runs, verifier_file, tmp_path):
    _, wide, _ = route(core_runs, verifier_file, tmp_path, "--accept-above", "0.6", "--drop-below", "0.4", "--compare")
    full = wide["vs_judge_all"]
    assert full["n"] == wide["n"] and full["compare_calls"] == wide["accepted"] + wide["dropped"]
    assert full["agreement"] + full["agreement_lost"] == pytest.approx(1.0)
    # everything to the judge (no item is that confident): routed == judge-all, nothing saved, nothing lost
    _, none, rows = route(core_runs, verifier_file, tmp_path, "--accept-above", "1.0", "--drop-below", "0.0",
                          "--compare")
    confident = sum(1 for r in rows if r["p_pass"] in (0.0, 1.0))
    assert none["judged"] >= none["n"] - confident
    decided = [r for r in rows if r["route"] == "judge"]
    assert all(r["passed"] == r["judge_all"] for r in decided)


def test_route_with_the_llm_judge_over_http(core_runs, verifier_file, tmp_path, llm_server):
    """The llm judge (a scripted model on 127.0.0.1) gets exactly the borderline items, no more."""
    from test_llm_judge import scores_json

    def handler(body):  # a 'model' that likes trajectories which wrote something
        prompt = body["messages"][1]["content"]
        return reply(scores_json(9 if "call sql_execute" in prompt else 3))

    llm_server.handler = handler
    spec = write_spec(tmp_path / "judge.yaml", f"type: llm\nmodel: openai/judge\napi_base: {llm_server.base_url}\n"
                                              "cache: false\n")
    code, rep, rows = route(core_runs, verifier_file, tmp_path, "--judge", str(spec), "--accept-above", "0.8",
                            "--drop-below", "0.2")
    assert code == 0
    assert len(llm_server.requests) == rep["judge_calls"] == rep["judged"] > 0
    assert rep["judge"] == "llm (openai/judge)"
    judged = [r for r in rows if r["route"] == "judge"]
    assert {r["judge_score"] for r in judged} <= {0.9, 0.3}


def test_a_failing_judge_call_fails_one_item_not_the_run(core_runs, verifier_file, tmp_path, llm_server):
    from test_llm_judge import scores_json

    def handler(body):  # no valid reply for the tasks about orders, a fine one for the others
        task = next(line for line in body["messages"][1]["content"].splitlines() if line.startswith("TASK:"))
        return reply("no idea" if "order" in task.lower() else scores_json(8))

    llm_server.handler = handler
    spec = write_spec(tmp_path / "judge.yaml", f"type: llm\nmodel: openai/judge\napi_base: {llm_server.base_url}\n"
                                              "cache: false\nmax_reasks: 0\n")
    code, rep, rows = route(core_runs, verifier_file, tmp_path, "--judge", str(spec))
    assert code == 0 and rep["judge_errors"] > 0 and rep["undecided"] == rep["judge_errors"]
    failed = [r for r in rows if r.get("error")]
    assert len(failed) == rep["judge_errors"] and all(r["passed"] is None for r in failed)
    assert len(rows) == rep["n"]  # every item has its row, decided or not
    # a judge that always fails: exit 1, the rows are still written
    llm_server.handler = lambda body: reply("no idea")
    code, rep, rows = route(core_runs, verifier_file, tmp_path, "--judge", str(spec))
    assert code == 1 and len(rows) == rep["n"] and rep["judge_errors"] == rep["judge_calls"] > 0


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_gamed_trajectories_are_not_auto_accepted(core_runs, verifier_file, tmp_path, cheat):
    """No tool call at all, but the oracle's words (or a long confident report): the verifier's own
    probability may be high - trusting it would accept them - but routing sends them to the judge."""
    _, trusting, _ = route(core_runs, verifier_file, tmp_path, "--accept-above", "0.5", "--ood", "trust",
                           runs=(cheat,))
    _, rep, rows = route(core_runs, verifier_file, tmp_path, "--accept-above", "0.5", runs=(cheat,))
    print(f"{cheat}: P(pass) {sorted(r['p_pass'] for r in rows)}; trusting the verifier accepts "
          f"{trusting['accepted']} of {trusting['n']}")
    assert rep["accepted"] == 0
    assert all(r["route"] == "judge" and r["novelty"] for r in rows if r["p_pass"] >= 0.5)
    # the decisions are the judge's, and they agree with the world better than trusting the verifier
    print(f"  agreement with the world: routed {rep['vs_world']['routed']}, trusting {trusting['vs_world']['routed']}")
    assert all(r["passed"] is (r["judge_score"] >= 0.7) for r in rows if r["route"] == "judge")
    assert rep["vs_world"]["routed"] > trusting["vs_world"]["routed"]
    # not one tool call: the blind heuristic judge passes none of them, whatever the words
    assert not any(r["passed"] for r in rows if r["route"] == "judge")


def test_bad_route_input_is_a_clear_error(core_runs, verifier_file, tmp_path, capsys):
    run = str(core_runs["fresh-random"])
    cases = [
        (["--verifier", str(tmp_path / "nope.zip")], f"{tmp_path / 'nope.zip'}: no such verifier file"),
        (["--verifier", str(verifier_file), "--accept-above", "0.3", "--drop-below", "0.5"],
         "need 0 <= drop_below < accept_above <= 1"),
        (["--verifier", str(verifier_file), "--judge", "nonexistent-judge"], "nonexistent-judge"),
    ]
    for extra, expected in cases:
        assert run_cli("judge", "route", run, "-o", str(tmp_path / "r.jsonl"), *extra) == 2, extra
        assert expected in capsys.readouterr().err
    assert run_cli("judge", "route", str(tmp_path / "missing"), "--verifier", str(verifier_file),
                   "-o", str(tmp_path / "r.jsonl")) == 2
    assert f"{tmp_path / 'missing'}: not a run directory" in capsys.readouterr().err


def test_decide_is_conservative_about_doubts():
    from agentsynth_judge.learned import Prediction

    assert decide(Prediction(0.95, []), 0.9, 0.1) == "accept"
    assert decide(Prediction(0.95, ["far from every training example"]), 0.9, 0.1) == "judge"
    assert decide(Prediction(0.95, [], unlike_passed=["tool_calls 0 ..."]), 0.9, 0.1) == "judge"
    assert decide(Prediction(0.95, [], unlike_passed=["tool_calls 0 ..."]), 0.9, 0.1, "trust") == "accept"
    assert decide(Prediction(0.05, [], unlike_passed=["x"]), 0.9, 0.1) == "drop"
    assert decide(Prediction(0.05, [], unlike_failed=["x"]), 0.9, 0.1) == "judge"
    assert decide(Prediction(0.5, []), 0.9, 0.1) == "judge"


def test_learned_and_routed_judges_in_a_run(core_runs, verifier_file, tmp_path):
    spec = write_spec(tmp_path / "routed.yaml", f"""pack: core
policy: {{type: callable, function: '{Path(__file__).with_name("sloppy_agent.py")}:SloppyOracle'}}
judge: {{type: routed, verifier: {verifier_file}, judge: heuristic, accept_above: 0.8, drop_below: 0.2}}
""")
    assert run_cli("run", str(spec), "--run-dir", str(tmp_path / "routed"), "-q") == 0
    store = RunStore(tmp_path / "routed")
    results = list(store.results())
    store.close()
    routed = [r for r in results if r.scores.get("judge.routed") == 1.0]
    judged = [r for r in results if r.scores.get("judge.routed") == 0.0]
    assert len(routed) + len(judged) == len(results) == 22 and judged
    assert all("judge.task_completion" in r.scores for r in judged)  # the heuristic judge's rubric
    assert all("judge.reward" in r.scores for r in results)  # auto-decided or judged, the same reward key
    for r in routed:  # auto-decided: a failed checker still vetoes an auto-accept
        assert r.scores["judge.passed"] == float(r.scores["judge.p_pass"] >= 0.8 and r.status == "passed")
        assert r.trajectory.metadata["judge"]["route"] in ("accept", "drop")
    spec = write_spec(tmp_path / "learned.yaml", f"pack: core\npolicy: noop\njudge: {{type: learned, path: "
                                                 f"{verifier_file}}}\n")
    assert run_cli("run", str(spec), "--run-dir", str(tmp_path / "learned"), "-q") == 0
    store = RunStore(tmp_path / "learned")
    results = list(store.results())
    store.close()
    assert all(0.0 <= r.scores["judge.p_pass"] <= 1.0 and r.scores["judge.passed"] == 0.0 for r in results)
    bad = write_spec(tmp_path / "bad.yaml", "pack: core\npolicy: noop\njudge: {type: routed, verifier: v.zip, "
                                            "judge: heuristic, accept_above: 0.2, drop_below: 0.5}\n")
    assert run_cli("run", str(bad), "--run-dir", str(tmp_path / "bad"), "-q") == 2


def test_the_learned_judge_is_vetoed_by_a_failed_checker(core_runs, verifier_file):
    from agentsynth_judge import score_sync
    from agentsynth_judge.routing import LearnedJudge
    from conftest import FAIL, PASS

    verifier = load_verifier(verifier_file)
    trajectory = read_run(core_runs["oracle"])[0][0].trajectory
    always = LearnedJudge(verifier, threshold=0.0)
    assert score_sync(always, trajectory, PASS).passed is True
    vetoed = score_sync(always, trajectory, FAIL)
    assert vetoed.passed is False and "fails despite the score: checker(s) note_equals failed" in vetoed.rationale
    assert score_sync(LearnedJudge(verifier, threshold=0.0, veto=False), trajectory, FAIL).passed is True


def test_another_worlds_run_goes_to_the_judge(verifier_file, tmp_path):
    """A verifier trained on the SQL shop knows nothing of the notes world: what acted there goes to the judge."""
    import asyncio

    from test_calibrate_run import SPEC

    from agentsynth_kernel import execute, load_run_spec

    spec, pack = load_run_spec(write_spec(tmp_path / "notes.yaml", SPEC))
    asyncio.run(execute(spec, pack, run_dir=tmp_path / "notes"))
    out = tmp_path / "r.jsonl"
    assert run_cli("judge", "route", str(tmp_path / "notes"), "--verifier", str(verifier_file), "-o", str(out),
                   "--accept-above", "0.5", "--drop-below", "0.49") == 0
    rows = {r["task_id"]: r for r in rows_of(out)}
    assert len(rows) == 5
    for task in ("good", "wrong", "unsure"):  # they called tools the verifier never saw
        assert rows[task]["route"] == "judge"
        assert any("never seen in training" in why for why in rows[task]["novelty"])
    # an empty trajectory is the same in every world: dropping it is right
    assert all(r["route"] == "judge" or (r["route"] == "drop" and r["world"] == "failed") for r in rows.values())


def test_a_run_without_trajectories_is_an_error(verifier_file, tmp_path, capsys):
    from agentsynth_kernel import RunStore as Store

    Store(tmp_path / "empty").close()
    assert run_cli("judge", "route", str(tmp_path / "empty"), "--verifier", str(verifier_file),
                   "-o", str(tmp_path / "r.jsonl")) == 2
    assert f"{tmp_path / 'empty'}: no stored trajectories to route" in capsys.readouterr().err
