"""Staged verification (APIGen-style): format, execution, semantic, and the world's checkers.

Each stage sees only what the previous ones accepted; a rejected item keeps the stage and the reason.

- **format**: every call parsed, names a catalog tool, has arguments valid against the tool's schema,
  and the trajectory ends with an answer (the mode's own problems, e.g. a back-translation that
  returned no query, are format problems too).
- **execution**: no call returned an error, and no loop of empty results or of the same call repeated
  with the same result.
- **semantic**: cheap content checks first (an answer that loops; a back-translated request that is too
  short or names none of the calls' argument values), then a judge decides whether the calls and results satisfy the query: a registered judge
  built by name through the kernel registry (``--judge heuristic``, ``--judge llm``), else a short
  rubric prompt to the generating model.
- **world**: when the scenario is a pack's task, the trajectory is replayed in a fresh world and the
  task's checkers decide on its end state.
- **dedup** (``--dedup``): a record whose request, calls and answer repeat an earlier accepted one is
  rejected (decided in item order, so the result does not depend on ``--concurrency``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from agentsynth_kernel import AgentsynthError, Answer, ToolCall, Trajectory

from .backends import extract_json
from .llm import Caller, json_schema
from .modes import Draft, render_for_review

STAGES = ("format", "execution", "semantic", "world", "dedup")


@attrs.define
class Rejection:
    stage: str
    reason: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"stage": self.stage, "reason": self.reason, "detail": self.detail}


def check_format(draft: Draft) -> Rejection | None:
    if draft.format_problems:
        first = re.sub(r"^turn \d+: ", "", draft.format_problems[0])
        return Rejection("format", first.split(":", 1)[0].strip() or "format", "; ".join(draft.format_problems)[:1000])
    if draft.metadata.get("chain_failed"):
        return None  # a back-translation chain whose call failed: the execution stage says why
    if draft.final_answer is None:
        return Rejection("format", "no_final_answer", "the trajectory ends without an answer")
    if not draft.final_answer.strip():
        return Rejection("format", "empty_answer", "the final answer is empty")
    if not draft.query.strip():
        return Rejection("format", "no_query", "no user query")
    if not any(isinstance(s.action, ToolCall) for s in draft.steps):
        return Rejection("format", "no_tool_call", "the answer uses no tool (this is tool-use data)")

    return None


def _values(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [v for item in value.values() for v in _values(item)]
    if isinstance(value, list):
        return [v for item in value for v in _values(item)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


def check_content(draft: Draft) -> Rejection | None:
    """Cheap checks of what the model wrote, before any judge: a looping answer; for back-translation, a
    request that reads like one and names what the calls use."""
    if draft.mode == "back":
        found = check_back_query(draft)
        if found is not None:
            return found
    if degenerate(draft.final_answer):
        return Rejection("semantic", "degenerate_answer", "the final answer repeats itself (a phrase 3 times or more)")
    return None


def check_back_query(draft: Draft) -> Rejection | None:
    """A back-translated request must read like one and name what the calls use (a small model's
    'get_weather' or a query that ignores the chain's arguments teaches nothing)."""
    words = re.findall(r"\w+", draft.query)
    if len(words) < 4:
        return Rejection("semantic", "query_too_short", f"the written request has {len(words)} words: {draft.query[:100]!r}")
    values = [v for s in draft.steps if isinstance(s.action, ToolCall) for v in _values(s.action.arguments)]
    values = [v for v in values if len(v) >= 2]
    if values and not any(v.lower() in draft.query.lower() for v in values):
        return Rejection("semantic", "query_not_grounded",
                         f"the written request mentions none of the calls' argument values ({', '.join(values[:5])})")
    return None


def degenerate(text: str | None, n: int = 4, times: int = 3) -> bool:
    words = re.findall(r"\w+", (text or "").lower())
    counts: dict[tuple[str, ...], int] = {}
    for i in range(len(words) - n + 1):
        gram = tuple(words[i:i + n])
        counts[gram] = counts.get(gram, 0) + 1
        if counts[gram] >= times:
            return True
    return False


def check_execution(draft: Draft) -> Rejection | None:
    seen: dict[str, int] = {}
    empty_run = 0
    for index, step in enumerate(draft.steps):
        if not isinstance(step.action, ToolCall):
            continue
        obs = step.observation
        content = obs.content if obs else ""
        if obs is not None and obs.error:
            return Rejection("execution", "tool_error", f"step {index}: {step.action.name}: {content[:300]}")
        key = json.dumps([step.action.name, step.action.arguments, content], sort_keys=True, default=str)
        if key in seen:
            return Rejection("execution", "repeated_call",
                             f"step {index}: {step.action.name} repeated with the same arguments and result "
                             f"(first at step {seen[key]})")
        seen[key] = index
        empty_run = empty_run + 1 if not content.strip() or content.strip() in ("[]", "{}", "null") else 0
        if empty_run >= 2:
            return Rejection("execution", "empty_observation_loop",
                             f"step {index}: {empty_run} calls in a row returned nothing")
    return None


SEMANTIC_PROMPT = (
    "You check training data for tool-using assistants. Given a user request, the tool calls with their "
    "results, and the final answer, decide: do the calls fit the request, and does the final answer follow "
    "from the results and answer the request? Reply with only a JSON object: "
    '{"satisfied": true or false, "reason": "<one sentence>"}.'
)


async def semantic_by_llm(draft: Draft, llm: Caller) -> tuple[Rejection | None, dict[str, Any]]:
    transcript = render_for_review(draft)
    response = await llm([{"role": "system", "content": SEMANTIC_PROMPT},
                          {"role": "user", "content": f"Request: {draft.query}\n\n{transcript}"}], purpose="semantic",
                         response_format=json_schema("verdict", {"satisfied": {"type": "boolean"}, "reason": {"type": "string"}}))
    value = extract_json(response.content or "")
    if not isinstance(value, dict) or not isinstance(value.get("satisfied"), bool):
        return Rejection("semantic", "judge_unparseable",
                         f"the judge's answer is not {{\"satisfied\": bool}}: {(response.content or '')[:200]}"), {}
    reason = str(value.get("reason", ""))[:500]
    info = {"judge": "llm-rubric", "satisfied": value["satisfied"], "reason": reason}
    if not value["satisfied"]:
        return Rejection("semantic", "unsatisfied", reason), info
    return None, info


async def semantic_by_judge(judge: Any, trajectory: Trajectory, threshold: float) -> tuple[Rejection | None, dict[str, Any]]:
    from agentsynth_kernel import call

    try:
        result = await call(judge.score, trajectory, [])
    except AgentsynthError as exc:
        return Rejection("semantic", "judge_error", str(exc)[:500]), {}
    passed = result.passed if result.passed is not None else result.score >= threshold
    info = {"judge": getattr(judge, "__agentsynth_info__", {}).get("name", type(judge).__name__),
            "score": round(float(result.score), 4), "dimensions": {k: round(float(v), 4) for k, v in result.dimensions.items()},
            "reason": (result.rationale or "")[:500]}
    if not passed:
        return Rejection("semantic", "judge_failed", f"score {result.score:.2f} < {threshold:g}: {result.rationale[:300]}"), info
    return None, info


def to_trajectory(draft: Draft, task_id: str, tools: list[Any], initial: str = "") -> Trajectory:
    """The draft as a kernel Trajectory (what judges score and worlds replay)."""
    return Trajectory(task_id=task_id, instruction=draft.query, steps=list(draft.steps), tools=list(tools),
                      initial_observation=initial, system_prompt=draft.system,
                      metadata={"mode": draft.mode})


def answer_of(draft: Draft) -> str:
    for step in reversed(draft.steps):
        if isinstance(step.action, Answer):
            return step.action.content
    return ""
