"""Records: JSON/JSONL round trips, typed decoding errors, OpenAI-messages rendering."""

from __future__ import annotations

import ast
import io
import json
import typing
from pathlib import Path

import msgspec
import pytest

from agentsynth_kernel.records import (
    ERROR_KINDS,
    SCHEMA_VERSION,
    Answer,
    EpisodeResult,
    ErrorKind,
    Observation,
    Step,
    ToolCall,
    ToolSpec,
    Trajectory,
    Usage,
    Verdict,
    from_json,
    read_jsonl,
    to_json,
    to_openai_messages,
    write_jsonl,
)


def sample() -> EpisodeResult:
    traj = Trajectory(
        "t1", "Refund order 7",
        steps=[
            Step(ToolCall("lookup", {"id": 7}, id="c1"), Observation("order 7: paid"), turn=0),
            Step(ToolCall("refund", {"id": 7}, id="c2"), Observation("ok", data={"rows": 1}), turn=1),
            Step(ToolCall("restock", {"sku": "A"}, id="c3"), Observation("ok"), turn=1),
            Step(Answer("Refunded and restocked."), turn=2),
        ],
        tools=[ToolSpec("lookup", "Find an order", {"type": "object", "properties": {"id": {"type": "integer"}}})],
        system_prompt="You are a support agent.",
    )
    return EpisodeResult("t1", 0, 42, "passed", traj, [Verdict("sql", True, 1.0, "ok")], usage=Usage(10, 5, 0.01, 1))


def test_json_round_trip_keeps_everything():
    result = sample()
    again = from_json(to_json(result), EpisodeResult)
    assert again == result
    assert again.schema_version == SCHEMA_VERSION
    assert again.trajectory.final_answer == "Refunded and restocked."
    assert [c.name for c in again.trajectory.tool_calls] == ["lookup", "refund", "restock"]


def test_actions_are_tagged_in_json():
    data = json.loads(to_json(sample()))
    kinds = [s["action"]["type"] for s in data["trajectory"]["steps"]]
    assert kinds == ["tool_call", "tool_call", "tool_call", "answer"]


def test_jsonl_streams_and_names_the_bad_line(tmp_path):
    path = tmp_path / "out.jsonl"
    with open(path, "wb") as fp:
        assert write_jsonl([sample(), sample()], fp) == 2
    with open(path, "ab") as fp:
        fp.write(b'{"task_id": 3}\n')
    reader = read_jsonl(path, EpisodeResult)
    assert next(reader).task_id == "t1"
    assert next(reader).seed == 42
    with pytest.raises(ValueError, match=r"out.jsonl:3: Expected `str`, got `int` - at `\$.task_id`"):
        next(reader)


def test_validation_error_has_a_path():
    with pytest.raises(msgspec.ValidationError, match=r"\$.trial"):
        from_json(b'{"task_id": "a", "trial": "x", "seed": 1, "status": "passed"}', EpisodeResult)


@pytest.mark.parametrize("field, value", [("status", "maybe"), ("error_kind", "database")])
def test_decoding_refuses_a_kind_outside_the_closed_set(field, value):
    data = json.loads(to_json(EpisodeResult("a", 0, 1, "error", error_kind="provider")))
    data[field] = value
    with pytest.raises(msgspec.ValidationError, match=rf"Invalid enum value '{value}' - at `\$.{field}`"):
        from_json(json.dumps(data), EpisodeResult)


def test_every_kind_decodes_and_the_set_is_the_literal():
    assert ERROR_KINDS == set(typing.get_args(ErrorKind)) and "" in ERROR_KINDS
    for kind in ERROR_KINDS:
        result = EpisodeResult("a", 0, 1, "error" if kind else "passed", error_kind=kind)
        assert from_json(to_json(result), EpisodeResult).error_kind == kind


def _declared_error_kinds() -> dict[str, str]:
    """``agentsynth_error_kind = "..."`` in the classes of the kernel, the plugins and the packs."""
    root = Path(__file__).resolve().parents[1]
    found = {}
    for folder in ("agentsynth_kernel", "plugins", "packs"):
        for path in sorted((root / folder).rglob("*.py")):
            if ".nox" in path.parts or "_template" in path.parts or "tests" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                        and any(isinstance(t, ast.Name) and t.id == "agentsynth_error_kind" for t in node.targets)):
                    found[f"{path.relative_to(root)}:{node.lineno}"] = node.value.value
    return found


def test_every_error_kind_an_exception_declares_is_one_the_records_accept():
    """A plugin's exception that declares a kind the records do not know would store an episode
    that no longer decodes (a lost result): each declared kind must be in ErrorKind."""
    declared = _declared_error_kinds()
    assert "provider" in declared.values() and "environment" in declared.values()
    unknown = {where: kind for where, kind in declared.items() if kind not in ERROR_KINDS}
    assert not unknown, f"add these to records.ErrorKind (or declare one it has): {unknown}"


def test_openai_messages_group_parallel_calls_by_turn():
    messages = to_openai_messages(sample().trajectory)
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    parallel = messages[4]
    assert [c["id"] for c in parallel["tool_calls"]] == ["c2", "c3"]
    assert json.loads(parallel["tool_calls"][0]["function"]["arguments"]) == {"id": 7}
    assert messages[5] == {"role": "tool", "tool_call_id": "c2", "content": "ok"}
    assert messages[-1] == {"role": "assistant", "content": "Refunded and restocked."}


def test_toolspec_renders_for_openai_and_anthropic():
    spec = sample().trajectory.tools[0]
    assert spec.to_openai()["function"]["parameters"]["properties"]["id"] == {"type": "integer"}
    assert spec.to_anthropic()["input_schema"]["type"] == "object"


def test_usage_adds_and_unknown_cost_stays_unknown():
    total = Usage(1, 2, 0.5, 1) + Usage(3, 4, 0.25, 1)
    assert (total.prompt_tokens, total.completion_tokens, total.cost_usd, total.requests) == (4, 6, 0.75, 2)
    assert (total + Usage(1, 1, None, 1)).cost_usd is None


def test_jsonl_writer_accepts_a_binary_stream():
    buf = io.BytesIO()
    write_jsonl([Verdict("x", False)], buf)
    assert buf.getvalue() == b'{"checker":"x","passed":false}\n'
