"""``forward``: teachers roll out each task; only verified rollouts that agree on the end state are kept."""

from __future__ import annotations

import pytest

from agentsynth_kernel import RunStore, SpecError, ToolCall, load_pack
from agentsynth_synth import run_generator
from conftest import policy


def test_keeps_only_rollouts_that_pass_the_world_state_checkers(llm, pack_dir, tmp_path):
    params = {"teachers": [policy(llm, "good"), policy(llm, "bad"), policy(llm, "good2", temperature=0.5)]}
    out = tmp_path / "kept.jsonl"
    report = run_generator("forward", pack_dir, params, run_dir=tmp_path / "run", out=out, cache=False)
    # 2 tasks x 3 teachers: the bad teacher fails both tasks
    assert report.planned == 2 and report.done_items == 2
    assert len(report.accepted) == 4
    assert report.rejected == {"failed_checkers": 2}
    models = {r.trajectory.metadata["llm"]["model"] for r in report.accepted}
    assert models == {"openai/good", "openai/good2"}
    for r in report.accepted:
        assert r.passed and all(v.passed for v in r.verdicts)
        assert r.trajectory.metadata["synth"]["decision"] == "kept"
        assert "checkers passed" in r.trajectory.metadata["synth"]["why"]
        assert all(v.checker != "synth_fingerprint" for v in r.verdicts)
    # each teacher rollout is 2 requests (tool call, then the answer)
    assert report.requests == 12
    assert report.requests_per_accepted == pytest.approx(3.0)
    assert len(out.read_text().splitlines()) == 4
    store = RunStore(tmp_path / "run", create=False)
    try:
        assert store.count() == 4
        items = [d for _, kind, d in store.events() if kind == "synth_item"]
        assert {d["item"] for d in items} == {"set-color", "set-size"}
        assert all(d["rejected"][0]["reason"] == "failed_checkers" for d in items)
        assert all(d["rejected"][0]["teacher"] == 1 for d in items)
    finally:
        store.close()


def test_consensus_rejects_a_passing_rollout_with_a_different_end_state(llm, pack_dir):
    # 'extra' passes the checker but also writes an unrelated note: its end state is the odd one out
    params = {"teachers": [policy(llm, "good"), policy(llm, "extra"), policy(llm, "good2")], "only": ["set-color"]}
    report = run_generator("forward", pack_dir, params, cache=False)
    assert report.rejected == {"no_consensus": 1}
    assert len(report.accepted) == 2
    for r in report.accepted:
        assert "end state agrees with 2/3 passing rollouts" in r.trajectory.metadata["synth"]["why"]
    # without consensus, all three are kept
    report = run_generator("forward", pack_dir, {**params, "consensus": False}, cache=False)
    assert len(report.accepted) == 3 and not report.rejected


def test_select_best_keeps_one_rollout_per_task(llm, pack_dir):
    params = {"teachers": [policy(llm, "good"), policy(llm, "good2")], "rollouts": 2, "select": "best"}
    report = run_generator("forward", pack_dir, params, cache=False)
    assert len(report.accepted) == 2
    assert report.rejected == {"not_selected": 6}
    assert sorted(r.task_id for r in report.accepted) == ["set-color", "set-size"]


def test_the_same_seed_and_cache_give_the_same_data_without_requests(llm, pack_dir, tmp_path):
    params = {"teachers": [policy(llm, "good", temperature=0.9), policy(llm, "bad")]}
    cache = tmp_path / "cache"
    first = run_generator("forward", pack_dir, params, seed=7, cache=cache)
    sent = llm.count
    second = run_generator("forward", pack_dir, params, seed=7, cache=cache)
    assert llm.count == sent, "a warm cache answers everything"
    assert second.requests == 0 and first.requests > 0

    def calls(report):
        return [(r.task_id, r.trial, r.seed, [(c.name, c.arguments) for c in r.trajectory.tool_calls])
                for r in report.accepted]

    assert calls(first) == calls(second)
    assert all(isinstance(c, ToolCall) for r in first.accepted for c in r.trajectory.tool_calls)


def test_bad_parameters_are_path_qualified(pack_dir):
    with pytest.raises(SpecError) as exc:
        run_generator("forward", pack_dir, {"teachers": [], "rolouts": 2})
    text = "\n".join(exc.value.messages)
    assert "generator.rolouts: unknown key" in text and "did you mean 'rollouts'" in text
    with pytest.raises(SpecError) as exc:
        run_generator("forward", load_pack(pack_dir), {"teachers": [{"model": "x"}]})
    assert "teachers[0]: expected a policy spec with 'type:'" in "\n".join(exc.value.messages)


def test_judge_threshold_and_best_by_judge_score(llm, pack_dir):
    # 'good' takes 2 steps (score 0.5), 'extra' 3 (score 0.33): both pass the checkers
    params = {"teachers": [policy(llm, "good"), policy(llm, "extra")], "only": ["set-color"], "consensus": False,
              "judge": {"type": "steps"}, "min_judge": 0.4}
    report = run_generator("forward", pack_dir, params, cache=False)
    assert report.rejected == {"judge_below_threshold": 1}
    kept = report.accepted[0]
    assert kept.trajectory.metadata["llm"]["model"] == "openai/good" and kept.scores["judge"] == 0.5
    assert "judge 0.500 >= 0.4" in kept.trajectory.metadata["synth"]["why"]
    report = run_generator("forward", pack_dir, {**params, "min_judge": 0.0, "select": "best"}, cache=False)
    assert report.rejected == {"not_selected": 1}
    assert report.accepted[0].trajectory.metadata["llm"]["model"] == "openai/good"


def test_a_failing_judge_rejects_the_rollout_with_its_reason(llm, pack_dir):
    params = {"teachers": [policy(llm, "good")], "judge": {"type": "steps"}}
    report = run_generator("forward", pack_dir, params, cache=False)
    assert [r.task_id for r in report.accepted] == ["set-color"]
    assert report.rejected == {"judge_error": 1}
    detail = next(e for e in report.per_item if e["rejected"])["rejected"][0]["detail"]
    assert "the judge cannot read this one" in detail
