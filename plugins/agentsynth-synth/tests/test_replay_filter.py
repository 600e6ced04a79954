"""``replay_filter``: drop trajectories that cannot be trusted, with a count per reason."""

from __future__ import annotations

import asyncio

import pytest

from agentsynth_kernel import (
    Answer,
    ComponentSpec,
    EpisodeResult,
    Observation,
    RunSpec,
    Step,
    ToolCall,
    Trajectory,
    execute,
    load_pack,
    write_jsonl,
)
from agentsynth_synth import run_generator
from conftest import NotesWorld  # noqa: I001


def traj(task_id, *pairs, answer="done"):
    steps = [Step(call, obs, i) for i, (call, obs) in enumerate(pairs)]
    steps.append(Step(Answer(answer), None, len(steps)))
    return Trajectory(task_id, "x", steps=steps, tools=NotesWorld().tools())


def w(key, value, obs="ok", error=False):
    return ToolCall("write", {"key": key, "value": value}), Observation(obs, error=error)


def r(key, obs, error=False):
    return ToolCall("read", {"key": key}), Observation(obs, error=error)


CASES = {
    "good": traj("set-color", r("color", "red"), w("color", "blue")),
    "unknown_tool": traj("set-color", (ToolCall("paint", {"color": "blue"}), Observation("?", error=True))),
    "invalid_arguments": traj("set-color", (ToolCall("write", {"key": "color"}), Observation("ok"))),
    "syntax_error": traj("set-color", w("col or", "blue", "syntax error near 'col or'", True), w("color", "blue")),
    "empty_loop": traj("set-color", r("shade", "", True), r("shade", "", True), r("shade", "", True),
                       w("color", "blue")),
    "replay_mismatch": traj("set-color", r("color", "purple"), w("color", "blue")),
    "replay_failed": traj("set-color", w("color", "teal")),
    "unknown_task": traj("paint-house", w("color", "blue")),
}


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "in.jsonl"
    with open(path, "wb") as fp:
        write_jsonl([EpisodeResult(t.task_id, i, 5, "passed", trajectory=t) for i, t in enumerate(CASES.values())], fp)
    return path


def test_counts_every_reason_and_keeps_the_good_one(pack_dir, jsonl, tmp_path):
    out = tmp_path / "kept.jsonl"
    report = run_generator("replay_filter", pack_dir, {"input": str(jsonl)}, out=out, cache=False)
    expected = {k: 1 for k in CASES if k != "good"}
    assert dict(report.rejected) == expected
    assert [r.trial for r in report.accepted] == [0]
    assert report.requests == 0 and report.requests_per_accepted == 0.0
    kept = out.read_text().splitlines()
    assert len(kept) == 1 and '"decision":"kept"' in kept[0]


def test_static_checks_only(pack_dir, jsonl):
    report = run_generator("replay_filter", pack_dir, {"input": str(jsonl), "check_replay": False}, cache=False)
    assert "replay_mismatch" not in report.rejected and "replay_failed" not in report.rejected
    assert len(report.accepted) == 3


def test_filters_a_run_directory(pack_dir, tmp_path):
    pack = load_pack(pack_dir)
    for policy in ("oracle", "noop"):
        asyncio.run(execute(RunSpec(policy=ComponentSpec(policy), trials=2), pack, run_dir=tmp_path / policy))
    report = run_generator("replay_filter", pack_dir, {"input": str(tmp_path / "oracle")}, cache=False)
    assert len(report.accepted) == 4 and not report.rejected
    report = run_generator("replay_filter", pack_dir, {"input": str(tmp_path / "noop")}, cache=False)
    assert not report.accepted and report.rejected == {"replay_failed": 4}


def test_missing_input_is_a_clear_error(pack_dir, tmp_path):
    from agentsynth_kernel import AgentsynthError

    with pytest.raises(AgentsynthError, match="no such run directory or JSONL file"):
        run_generator("replay_filter", pack_dir, {"input": str(tmp_path / "nope.jsonl")})
