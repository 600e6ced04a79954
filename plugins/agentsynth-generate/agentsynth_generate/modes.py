"""The four ways a trajectory is made.

- ``single_agent``: the model reasons (the text before its calls), calls tools, reads their results and
  answers.
- ``back``: back-translation from the catalog alone. A chain of 1-3 calls is built whose arguments fit
  the schemas and whose earlier results feed later arguments; it is executed (in the world, or
  simulated); then the model writes the user request the chain answers, and the final answer.
- ``multi_agent``: a planner writes a plan, an executor carries it out with the tools, a reviewer
  approves or sends it back once with feedback. Each message is tagged with its agent.
- ``code_execution``: the task is solved by writing code that runs, for real, in the Python sandbox
  world (the ``python`` environment, found through the kernel registry).
"""

from __future__ import annotations

import json
import random
from typing import Any

import attrs

from agentsynth_kernel import (
    Answer,
    InvalidToolCall,
    Observation,
    Step,
    ToolCall,
    ToolSpec,
    parse_arguments,
    validate_arguments,
)

from .backends import extract_json
from .llm import Caller, json_schema
from .schema_sampler import absorb, sample_arguments

MODES = ("single_agent", "back", "multi_agent", "code_execution")
FINAL_ANSWER = "final_answer"
MAX_CALLS_PER_TURN = 16  # a model that answers with hundreds of parallel calls does not get them executed
MAX_ARGUMENT_BYTES = 256_000  # nor a call whose arguments are megabytes (the kernel's episode bound)


@attrs.define
class Draft:
    """One generated trajectory before verification."""

    mode: str
    query: str
    system: str
    steps: list[Step] = attrs.field(factory=list)
    agents: list[str] = attrs.field(factory=list)  # per step: the agent that took it
    # messages of agents that do not act on the world (planner, reviewer): (index of the step they precede, agent, text)
    notes: list[tuple[int, str, str]] = attrs.field(factory=list)
    format_problems: list[str] = attrs.field(factory=list)
    metadata: dict[str, Any] = attrs.field(factory=dict)

    @property
    def final_answer(self) -> str | None:
        for step in reversed(self.steps):
            if isinstance(step.action, Answer):
                return step.action.content
        return None


SINGLE_AGENT_PROMPT = (
    "You are a helpful assistant with tools. Before calling tools, think briefly and say what you will do. "
    "Call tools with arguments that fit their schemas, read the results, and when you have what the user asked "
    "for, reply with the final answer without calling a tool."
)
CODE_PROMPT = (
    "You are a helpful assistant that solves tasks by writing Python. Say briefly what you will do, run code "
    "with the python_exec tool (its working directory holds the task's files), read the output, and when you "
    "have the result reply with the final answer without calling a tool."
)
PLANNER_PROMPT = (
    "You are the planner of a team. Write a short numbered plan (at most 5 steps) for the executor, naming "
    "the tools to use. Do not call tools and do not answer the user yourself."
)
EXECUTOR_PROMPT = (
    "You are the executor of a team. Carry out the planner's plan with the tools, read the results, then "
    "reply with the final answer for the user without calling a tool."
)
REVIEWER_PROMPT = (
    "You are the reviewer of a team. Check that the executor's tool calls and final answer satisfy the user's "
    "request. Reply 'APPROVE: <one sentence why>' or 'REVISE: <what to fix>'."
)
BACK_PROMPT = (
    "You write training data for tool-using assistants. You are shown a sequence of tool calls and their "
    "results. Write the user request that this sequence of calls answers (natural, specific: it must mention "
    "the values the calls use) and the assistant's final answer from the results. Reply with only a JSON "
    'object: {"query": "...", "answer": "..."}.'
)


def _small(model: str) -> bool:
    return model == "local" or model.startswith("local/")


def _final_tool() -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": FINAL_ANSWER, "description": "Finish: call this once you have the answer, with the final answer.",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}


async def tool_loop(draft: Draft, llm: Caller, backend: Any, messages: list[dict[str, Any]], *, agent: str,
                    max_turns: int, turn0: int = 0) -> int:
    """The model calls tools until it answers; every call is validated, then executed by ``backend``.
    Returns the next turn number. Invalid calls are recorded (``invalid``) and not executed."""
    specs: list[ToolSpec] = backend.specs
    by_name = {t.name: t for t in specs}
    small = _small(llm.model)
    tools: list[Any] = list(specs) + ([_final_tool()] if small else [])
    extra = {"tool_choice": "required"} if small else {}
    turn = turn0
    for _ in range(max_turns):
        response = await llm(messages, tools=tools, purpose=agent, **extra)
        calls = list(response.tool_calls)
        if small and calls and calls[0].name == FINAL_ANSWER:
            try:
                answer = str(parse_arguments(calls[0].arguments).get("answer", ""))
            except InvalidToolCall:
                answer = ""
            calls = []
            response_content = answer
        else:
            response_content = response.content or ""
        if not calls:
            draft.steps.append(Step(Answer(response_content), turn=turn))
            draft.agents.append(agent)
            messages.append({"role": "assistant", "content": response_content})
            return turn + 1
        if len(calls) > MAX_CALLS_PER_TURN:
            draft.format_problems.append(f"too_many_calls: {len(calls)} calls in one turn (at most {MAX_CALLS_PER_TURN})")
            return turn + 1
        messages.append({"role": "assistant", "content": response.content or "", "tool_calls": [
            {"id": f"call_{turn}_{i}", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for i, c in enumerate(calls)]})
        for i, c in enumerate(calls):
            call_id = f"call_{turn}_{i}"  # ours, not the provider's (llama.cpp's are random): same inputs, same bytes
            problem = ""
            arguments: dict[str, Any]
            try:
                arguments = parse_arguments(c.arguments, call_id=call_id, name=c.name)
            except InvalidToolCall as exc:
                arguments, problem = {"_raw": str(c.arguments)[:2000]}, f"bad_json: {exc}"
            if not problem and len(c.arguments or "") > MAX_ARGUMENT_BYTES:
                arguments, problem = {"_raw": str(c.arguments)[:200]}, \
                    f"arguments_too_large: {len(c.arguments):,} bytes of arguments (at most {MAX_ARGUMENT_BYTES:,})"
            if not problem and c.name not in by_name:
                problem = f"unknown_tool: {c.name!r} (catalog: {', '.join(sorted(by_name))})"
            if not problem:
                schema_problems = validate_arguments(by_name[c.name].parameters, arguments)
                if schema_problems:
                    problem = f"schema: {c.name}: " + "; ".join(schema_problems)
            action = ToolCall(c.name, arguments, id=call_id)
            if problem:
                obs = Observation(f"error: {problem}", error=True)
                draft.format_problems.append(f"turn {turn}: {problem}")
            else:
                obs = await backend.call(action, messages)
            draft.steps.append(Step(action, obs, turn=turn, thought=(response.content or "") if i == 0 else "",
                                    invalid=bool(problem)))
            draft.agents.append(agent)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": obs.content})
        turn += 1
    draft.format_problems.append(f"no_final_answer: no answer after {max_turns} turns")
    return turn


def with_rules(prompt: str, backend: Any) -> str:
    """The mode's prompt, then the world's own rules (a pack's system prompt), if any."""
    rules = getattr(backend, "system", "")
    return f"{prompt}\n\n{rules.strip()}" if rules and rules.strip() else prompt


def _user(query: str, initial: str) -> str:
    return f"{query}\n\n{initial}" if initial and initial != query else query


async def single_agent(query: str, llm: Caller, backend: Any, *, max_turns: int, rng: random.Random,
                       system: str = SINGLE_AGENT_PROMPT) -> Draft:
    system = with_rules(system, backend)
    draft = Draft("single_agent", query, system)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": _user(query, backend.initial)}]
    await tool_loop(draft, llm, backend, messages, agent="assistant", max_turns=max_turns)
    return draft


async def code_execution(query: str, llm: Caller, backend: Any, *, max_turns: int, rng: random.Random) -> Draft:
    draft = await single_agent(query, llm, backend, max_turns=max_turns, rng=rng, system=CODE_PROMPT)
    draft.mode = "code_execution"
    if not any(isinstance(s.action, ToolCall) and not s.invalid for s in draft.steps):
        draft.format_problems.append("no_code: the model answered without running any code")
    return draft


async def multi_agent(query: str, llm: Caller, backend: Any, *, max_turns: int, rng: random.Random,
                      revisions: int = 1) -> Draft:
    draft = Draft("multi_agent", query, with_rules(EXECUTOR_PROMPT, backend))
    catalog = "\n".join(f"- {t.name}: {t.description}" for t in backend.specs)
    user = _user(query, backend.initial)
    plan = await llm([{"role": "system", "content": PLANNER_PROMPT},
                      {"role": "user", "content": f"Request: {user}\n\nTools:\n{catalog}"}], purpose="planner")
    plan_text = (plan.content or "").strip()
    if not plan_text:
        draft.format_problems.append("empty_plan: the planner wrote nothing")
        return draft
    draft.notes.append((0, "planner", plan_text))
    messages = [{"role": "system", "content": draft.system}, {"role": "user", "content": user},
                {"role": "user", "content": f"Plan from the planner:\n{plan_text}"}]
    turn = 0
    for attempt in range(revisions + 1):
        turn = await tool_loop(draft, llm, backend, messages, agent="executor", max_turns=max_turns, turn0=turn)
        if draft.format_problems:
            return draft
        transcript = render_for_review(draft)
        review = await llm([{"role": "system", "content": REVIEWER_PROMPT},
                            {"role": "user", "content": f"Request: {user}\n\nWhat the executor did:\n{transcript}"}],
                           purpose="reviewer")
        text = (review.content or "").strip()
        draft.notes.append((len(draft.steps), "reviewer", text))
        if not text.upper().startswith("REVISE") or attempt == revisions:
            draft.metadata["review"] = "approved" if not text.upper().startswith("REVISE") else "not_approved"
            if draft.metadata["review"] == "not_approved":
                draft.format_problems.append(f"not_approved: the reviewer still asks for changes: {text[:200]}")
            return draft
        messages.append({"role": "user", "content": f"Reviewer feedback: {text}"})
    return draft


def render_for_review(draft: Draft, limit: int = 6000) -> str:
    lines = []
    for step in draft.steps:
        if isinstance(step.action, ToolCall):
            obs = step.observation.content if step.observation else ""
            lines.append(f"call {step.action.name}({json.dumps(step.action.arguments, sort_keys=True)}) -> {obs[:800]}")
        else:
            lines.append(f"final answer: {step.action.content}")
    return "\n".join(lines)[-limit:]


async def back(query: str, llm: Caller, backend: Any, *, max_turns: int, rng: random.Random,
               max_chain: int = 3) -> Draft:
    """Back-translation; ``query`` (a seed, if any) is only a hint of the domain, never the target."""
    draft = Draft("back", "", with_rules(SINGLE_AGENT_PROMPT, backend))
    specs: list[ToolSpec] = backend.specs
    if not specs:
        draft.format_problems.append("no_tools: the catalog is empty")
        return draft
    length = rng.randint(1, max(1, min(max_chain, len(specs))))
    pool: dict[str, list[Any]] = {}
    used: list[str] = []
    for j in range(length):
        chaining = [t for t in specs if t.name not in used and set(t.parameters.get("properties") or {}) & set(pool)]
        fresh = [t for t in specs if t.name not in used] or specs
        spec = rng.choice(chaining) if chaining and j > 0 else rng.choice(fresh)
        used.append(spec.name)
        arguments = sample_arguments(spec.parameters, rng, pool)
        problems = validate_arguments(spec.parameters, arguments)
        action = ToolCall(spec.name, arguments, id=f"call_{j}")
        if problems:
            draft.format_problems.append(f"schema: {spec.name}: could not build valid arguments: " + "; ".join(problems))
            obs = Observation("error: " + "; ".join(problems), error=True)
        else:
            obs = await backend.call(action, [])
        draft.steps.append(Step(action, obs, turn=j, invalid=bool(problems)))
        draft.agents.append("assistant")
        absorb(pool, arguments)
        if not obs.error:
            absorb(pool, obs.content)
    if any(s.observation is not None and s.observation.error for s in draft.steps):
        draft.metadata["chain_failed"] = True  # nothing to translate: the execution stage rejects it, no request spent
        return draft
    chain = [{"tool": s.action.name, "arguments": s.action.arguments,
              "result": (s.observation.content if s.observation else "")[:1500]}
             for s in draft.steps if isinstance(s.action, ToolCall)]
    hint = f"\nThe request should fit this kind of task: {query}" if query else ""
    response = await llm([{"role": "system", "content": BACK_PROMPT},
                          {"role": "user", "content": json.dumps(chain, sort_keys=True) + hint}], purpose="back_translate",
                         response_format=json_schema("back_translation", {"query": {"type": "string"},
                                                                          "answer": {"type": "string"}}))
    value = extract_json(response.content or "")
    if not isinstance(value, dict) or not isinstance(value.get("query"), str) or not value["query"].strip():
        draft.format_problems.append("bad_back_translation: the model did not return {\"query\": ..., \"answer\": ...}")
        return draft
    draft.query = value["query"].strip()
    answer = value.get("answer")
    draft.steps.append(Step(Answer(answer.strip() if isinstance(answer, str) else ""), turn=length))
    draft.agents.append("assistant")
    if isinstance(answer, str) and not answer.strip() or not isinstance(answer, str):
        draft.format_problems.append("bad_back_translation: no final answer")
    draft.metadata["seed_query"] = query
    return draft


RUNNERS: dict[str, Any] = {"single_agent": single_agent, "back": back, "multi_agent": multi_agent, "code_execution": code_execution}
