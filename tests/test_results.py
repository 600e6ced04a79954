"""A run's results are counted as they arrive and streamed back from the store: never all in memory."""

from __future__ import annotations

import asyncio
import gc
import json

import attrs

from agentsynth_kernel.engine import Plan, execute
from agentsynth_kernel.records import EpisodeResult, Usage
from agentsynth_kernel.report import EpisodeRows, iter_json, summarize, write_json
from agentsynth_kernel.results import ResultSet, Tally
from agentsynth_kernel.spec import load_run_spec
from agentsynth_kernel.store import RunStore


def _result(task: str, trial: int, status: str = "passed", **kw) -> EpisodeResult:
    return EpisodeResult(task_id=task, trial=trial, seed=trial, status=status, **kw)


def test_a_set_without_a_store_spills_to_a_temporary_one_and_removes_it():
    results = ResultSet(spill_after=3)
    order = [("b", 1), ("a", 0), ("b", 0), ("c", 2), ("a", 1)]
    for task, trial in order:
        results.add(_result(task, trial, usage=Usage(prompt_tokens=1)), stored=False)
    spill = results._spill
    assert spill is not None and results._memory is None
    directory = spill.run_dir
    assert [(r.task_id, r.trial) for r in results] == sorted(order)
    assert len(results) == 5 and results[0].task_id == "a" and results[-1].key == ("c", 2, 2)
    assert results.tally.usage.prompt_tokens == 5
    del results, spill
    gc.collect()
    assert not directory.exists()


def test_small_sets_stay_in_memory_and_sort_by_task_and_trial():
    results = ResultSet()
    for task, trial in [("z", 0), ("a", 3), ("a", 1)]:
        results.add(_result(task, trial, status="failed"), stored=False)
    assert results._spill is None
    assert [r.key[:2] for r in results] == [("a", 1), ("a", 3), ("z", 0)]
    assert results == list(results) and results != [results[0]]


def test_the_tally_gives_the_numbers_a_full_pass_gives():
    results = [_result("a", 0), _result("a", 1, "failed"), _result("b", 0, "error", error_kind="timeout"),
               _result("b", 1, "error", error_kind="", judge_error="x")]
    tally = Tally.of(results)
    assert tally.counts == {"passed": 1, "failed": 1, "error": 2}
    assert dict(tally.errors_by_kind) == {"timeout": 1, "unknown": 1}
    assert tally.judge_errors == 1 and tally.episodes == 4
    assert [(t, r.trials, r.passed, r.errors) for t, r in tally.tasks.items()] == [("a", 2, 1, 0), ("b", 2, 0, 2)]


def test_the_plan_is_lazy_and_knows_its_keys(kv_spec, host):
    spec, pack = load_run_spec(kv_spec, host=host, overrides={"trials": 1000})
    plan = Plan(spec, list(pack.tasks))
    assert len(plan) == 2000
    first = next(iter(plan))
    assert (first[0].id, first[1], first[2]) in plan
    assert (first[0].id, 1000, first[2]) not in plan and ("nope", 0, first[2]) not in plan
    assert (first[0].id, 0, first[2] + 1) not in plan  # a seed from another spec seed
    assert plan.digest() == Plan(spec, list(reversed(pack.tasks))).digest()


def test_a_stored_run_keeps_nothing_in_memory_and_a_forced_resume_reports_only_its_plan(kv_spec, host, tmp_path):
    spec, pack = load_run_spec(kv_spec, host=host, overrides={"trials": 3})
    first = asyncio.run(execute(spec, pack, host=host, run_dir=tmp_path / "run"))
    assert isinstance(first.results, ResultSet) and first.results._memory is None
    assert len(first.results) == 6 and [r.trial for r in first.results] == [0, 1, 2] * 2
    # fewer trials, forced: the store keeps trial 2, the report of this session leaves it out
    fewer = attrs.evolve(spec, trials=2)
    again = asyncio.run(execute(fewer, pack, host=host, run_dir=tmp_path / "run", force=True))
    assert len(again.results) == 4 and {r.trial for r in again.results} == {0, 1}
    assert summarize(again)["episodes"] == 4 and summarize(again)["complete"]
    store = RunStore(tmp_path / "run")
    try:
        assert store.count() == 6
    finally:
        store.close()


def test_the_json_report_streams_the_same_document_json_dumps_would_write(kv_spec, host, tmp_path):
    spec, pack = load_run_spec(kv_spec, host=host, overrides={"trials": 2})
    report = asyncio.run(execute(spec, pack, host=host, run_dir=tmp_path / "run"))
    summary = summarize(report)
    assert isinstance(summary["results"], EpisodeRows) and len(summary["results"]) == 4
    nested = {"mode": "compare", "a": summary, "b": {**summary, "results": EpisodeRows([])}}
    for data in (summary, nested):
        text = "".join(iter_json(data))
        plain = json.loads(json.dumps(data, default=lambda v: list(v) if isinstance(v, EpisodeRows) else str(v)))
        assert json.loads(text) == plain
    write_json(summary, str(tmp_path / "out" / "report.json"))
    loaded = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [r["task_id"] for r in loaded["results"]] == ["del-a", "del-a", "set-b", "set-b"]
    assert all(r["status"] == "passed" for r in loaded["results"])
