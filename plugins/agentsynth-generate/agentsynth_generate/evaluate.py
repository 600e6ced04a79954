"""``agentsynth eval FILE``: score a trajectory file on a six-dimension rubric.

Dimensions (each in [0, 1]):

- ``task_completion``: the final answer accomplishes the request (model rubric).
- ``tool_selection``: the right tools were called, none missing or needless (model rubric).
- ``argument_validity``: the share of calls that name a listed tool with arguments valid against its
  schema (computed, no model).
- ``grounding``: the answer follows from the tool results, nothing invented (model rubric).
- ``efficiency``: one minus the share of calls that errored or repeated an earlier identical call
  (computed).
- ``communication``: the final answer is clear, direct and concise (model rubric).

The four rubric dimensions come from one request to ``--model`` (or, with ``--judge NAME``, from a
registered judge's dimensions). Input lines may be this plugin's records or any OpenAI/TRL chat record
(``messages`` [+ ``tools``]), kernel EpisodeResults (``trajectory``) or Trajectories (``steps``).
A line that cannot be read is reported with its line number; a failing request fails that line only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import SpecError, validate_arguments

from .backends import extract_json
from .llm import Caller, json_schema

DIMENSIONS = ("task_completion", "tool_selection", "argument_validity", "grounding", "efficiency", "communication")
RUBRIC_DIMENSIONS = ("task_completion", "tool_selection", "grounding", "communication")

RUBRIC_PROMPT = (
    "You grade a tool-using assistant's conversation. Score each dimension from 0.0 (bad) to 1.0 (perfect): "
    "task_completion (the final answer accomplishes the user's request), tool_selection (the right tools were "
    "called, none missing or needless), grounding (the answer follows from the tool results, nothing invented), "
    "communication (the answer is clear, direct and concise). Reply with only a JSON object: "
    '{"task_completion": x, "tool_selection": x, "grounding": x, "communication": x, "rationale": "<one sentence>"}.'
)


@attrs.define
class Conversation:
    id: str
    query: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    row: dict[str, Any]


def _from_trajectory(data: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str, str]:
    import msgspec

    from agentsynth_kernel import Trajectory, to_openai_messages

    trajectory = msgspec.convert(data, Trajectory)
    return (to_openai_messages(trajectory), [t.to_openai() for t in trajectory.tools], trajectory.instruction,
            trajectory.task_id)


def read_conversations(path: Path) -> Iterator[Conversation]:
    """The conversations of a JSONL (or JSON array) file; SpecError naming the line for a bad one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(path), [f"cannot read the trajectory file: {exc}"]) from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = list(enumerate(json.loads(text), 1))
        except ValueError as exc:
            raise SpecError(str(path), [f"not valid JSON ({exc})"]) from None
        label = "[{}]"
    else:
        rows = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append((lineno, json.loads(line)))
                except ValueError as exc:
                    raise SpecError(str(path), [f"line {lineno}: not valid JSON ({exc})"]) from None
        label = "line {}"
    if not rows:
        raise SpecError(str(path), ["no trajectories in the file"])
    for lineno, row in rows:
        where = label.format(lineno)
        if not isinstance(row, dict):
            raise SpecError(str(path), [f"{where}: expected an object, got {type(row).__name__}"])
        try:
            if isinstance(row.get("messages"), list):
                messages, tools = row["messages"], row.get("tools") or []
                query = row.get("query") or next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
                cid = str(row.get("id", f"row{lineno}"))
            elif isinstance(row.get("trajectory"), dict):
                messages, tools, query, cid = _from_trajectory(row["trajectory"])
                cid = f"{cid}-{row.get('trial', 0)}"
            elif isinstance(row.get("steps"), list):
                messages, tools, query, cid = _from_trajectory(row)
            else:
                raise ValueError("expected 'messages' (a chat record), 'trajectory' (an EpisodeResult) or 'steps'")
        except Exception as exc:  # noqa: BLE001 - any shape problem is the file's, named by line
            raise SpecError(str(path), [f"{where}: {exc}"]) from None
        yield Conversation(cid, str(query), list(messages), list(tools), row)


def computed_scores(conv: Conversation) -> dict[str, float]:
    """argument_validity and efficiency, from the calls and results alone."""
    schemas = {t.get("function", t).get("name"): t.get("function", t).get("parameters", {}) for t in conv.tools}
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in conv.messages if m.get("role") == "tool"}
    calls = [c for m in conv.messages if m.get("role") == "assistant" for c in (m.get("tool_calls") or [])]
    if not calls:
        return {"argument_validity": 1.0, "efficiency": 1.0}
    valid = wasted = 0
    seen: set[str] = set()
    for c in calls:
        fn = c.get("function", {})
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = None
        ok = isinstance(args, dict) and (not schemas or (fn.get("name") in schemas
                                                           and not validate_arguments(schemas[fn["name"]], args)))
        valid += ok
        result = results.get(c.get("id"), "")
        key = json.dumps([fn.get("name"), fn.get("arguments"), result])
        if result.lower().startswith("error") or key in seen:
            wasted += 1
        seen.add(key)
    return {"argument_validity": round(valid / len(calls), 4), "efficiency": round(1 - wasted / len(calls), 4)}


def _transcript(conv: Conversation, limit: int = 8000) -> str:
    lines = []
    for m in conv.messages:
        if m.get("role") == "system":
            continue
        text = str(m.get("content") or "")
        for c in m.get("tool_calls") or []:
            text += f" [call {c['function']['name']}({c['function'].get('arguments', '')})]"
        lines.append(f"{m.get('role')}{'/' + m['name'] if m.get('name') else ''}: {text[:1500]}")
    return "\n".join(lines)[-limit:]


async def rubric_scores(conv: Conversation, llm: Caller) -> tuple[dict[str, float], str]:
    response = await llm([{"role": "system", "content": RUBRIC_PROMPT},
                          {"role": "user", "content": _transcript(conv)}], purpose="eval",
                         response_format=json_schema("grades", {**{d: {"type": "number"} for d in RUBRIC_DIMENSIONS},
                                                                "rationale": {"type": "string"}}))
    value = extract_json(response.content or "")
    if not isinstance(value, dict):
        raise ValueError(f"the grader's answer is not a JSON object: {(response.content or '')[:200]}")
    scores = {}
    for dim in RUBRIC_DIMENSIONS:
        v = value.get(dim)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"the grader gave no number for {dim}")
        scores[dim] = round(min(1.0, max(0.0, float(v))), 4)
    return scores, str(value.get("rationale", ""))[:500]


async def evaluate(path: Path, *, llm: Caller | None, judge: Any = None, threshold: float = 0.5,
                   out: Path | None = None, on_progress: Any = None) -> dict[str, Any]:
    """Score every conversation of ``path``; write scored rows to ``out``; return the report."""
    from agentsynth_kernel import LLMError

    conversations = list(read_conversations(path))
    totals: dict[str, list[float]] = {}
    failing: dict[str, int] = {}
    errors: list[str] = []
    passed = 0
    fp = open(out, "w", encoding="utf-8") if out is not None else None  # noqa: SIM115 - closed below
    try:
        for i, conv in enumerate(conversations):
            try:
                scores = computed_scores(conv)
                if judge is not None:
                    rubric, rationale = await _judge_scores(judge, conv)
                else:
                    assert llm is not None
                    rubric, rationale = await rubric_scores(conv,
                                                            llm.for_item(i))
                scores.update(rubric)
            except (LLMError, ValueError) as exc:
                errors.append(f"{conv.id}: {exc}")
                if on_progress:
                    on_progress(f"[{i + 1}/{len(conversations)}] {conv.id}: failed: {str(exc)[:200]}")
                continue
            overall = round(sum(scores.values()) / len(scores), 4)
            weak = sorted(d for d, v in scores.items() if v < threshold)
            ok = not weak
            passed += ok
            for d, v in scores.items():
                totals.setdefault(d, []).append(v)
            for d in weak:
                failing[d] = failing.get(d, 0) + 1
            if fp is not None:
                fp.write(json.dumps({**conv.row, "eval": {"scores": scores, "overall": overall, "passed": ok,
                                                          "weak": weak, "rationale": rationale}}, sort_keys=True) + "\n")
                fp.flush()
            if on_progress:
                on_progress(f"[{i + 1}/{len(conversations)}] {conv.id}: overall {overall:.2f}"
                            + (f", weak: {', '.join(weak)}" if weak else ""))
    finally:
        if fp is not None:
            fp.close()
    scored = len(conversations) - len(errors)
    return {"file": str(path), "trajectories": len(conversations), "scored": scored, "failed": len(errors),
            "passed": passed, "pass_rate": round(passed / scored, 4) if scored else None, "threshold": threshold,
            "dimensions": {d: round(sum(v) / len(v), 4) for d, v in sorted(totals.items())},
            "failing_by_dimension": dict(sorted(failing.items())), "errors": errors[:20],
            "llm_requests": llm.requests if llm is not None else 0, "output": str(out) if out else None}


async def _judge_scores(judge: Any, conv: Conversation) -> tuple[dict[str, float], str]:
    """A registered judge scores the conversation (rebuilt as a kernel Trajectory)."""
    from agentsynth_kernel import Answer, Observation, Step, ToolCall, ToolSpec, Trajectory, call

    steps: list[Step] = []
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in conv.messages if m.get("role") == "tool"}
    for turn, m in enumerate(conv.messages):
        if m.get("role") != "assistant":
            continue
        for c in m.get("tool_calls") or []:
            try:
                args = json.loads(c["function"].get("arguments") or "{}")
            except ValueError:
                args = {}
            steps.append(Step(ToolCall(c["function"]["name"], args if isinstance(args, dict) else {}, id=c.get("id", "")),
                              Observation(results.get(c.get("id"), "")), turn=turn))
        if not m.get("tool_calls"):
            steps.append(Step(Answer(str(m.get("content") or "")), turn=turn))
    tools = [ToolSpec(t["function"]["name"], t["function"].get("description", ""), t["function"].get("parameters", {}))
             for t in conv.tools if "function" in t]
    trajectory = Trajectory(task_id=conv.id, instruction=conv.query, steps=steps, tools=tools)
    result = await call(judge.score, trajectory, [])
    dims = {k: round(min(1.0, max(0.0, float(v))), 4) for k, v in result.dimensions.items()}
    if not dims:
        dims = {"judge": round(float(result.score), 4)}
    return dims, (result.rationale or "")[:500]
