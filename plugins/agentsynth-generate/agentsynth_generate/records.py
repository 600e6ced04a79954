"""Output records: OpenAI chat ``messages`` with ``tool_calls`` (TRL's SFT conversational format, with
a ``tools`` column), plus what the record is (mode, domain, grounding) and how it was verified."""

from __future__ import annotations

import json
from typing import Any

from agentsynth_kernel import Answer, ToolCall

from .modes import EXECUTOR_PROMPT, PLANNER_PROMPT, REVIEWER_PROMPT, Draft


def render_messages(draft: Draft, initial: str = "") -> tuple[list[dict[str, Any]], list[str]]:
    """The conversation and, aligned with it, the agent that wrote each message."""
    user = f"{draft.query}\n\n{initial}" if initial and initial != draft.query else draft.query
    messages: list[dict[str, Any]] = [{"role": "system", "content": draft.system}, {"role": "user", "content": user}]
    agents = ["system", "user"]
    tag = draft.mode == "multi_agent"
    notes: dict[int, list[tuple[str, str]]] = {}
    for index, agent, text in draft.notes:
        notes.setdefault(index, []).append((agent, text))

    def note(index: int) -> None:
        for agent, text in notes.pop(index, []):
            messages.append({"role": "assistant", "content": text, **({"name": agent} if tag else {})})
            agents.append(agent)

    steps = draft.steps
    i = 0
    while i < len(steps):
        note(i)
        step, agent = steps[i], draft.agents[i] if i < len(draft.agents) else "assistant"
        if isinstance(step.action, Answer):
            messages.append({"role": "assistant", "content": step.action.content, **({"name": agent} if tag else {})})
            agents.append(agent)
            i += 1
            continue
        group = [i]
        while group[-1] + 1 < len(steps) and isinstance(steps[group[-1] + 1].action, ToolCall) \
                and steps[group[-1] + 1].turn == step.turn and group[-1] + 1 not in notes:
            group.append(group[-1] + 1)
        calls = []
        results = []
        for j in group:
            action = steps[j].action
            assert isinstance(action, ToolCall)
            call_id = action.id or f"call_{j}"
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": action.name, "arguments": json.dumps(action.arguments, sort_keys=True)}})
            obs = steps[j].observation
            results.append({"role": "tool", "tool_call_id": call_id, "name": action.name,
                            "content": obs.content if obs else ""})
        messages.append({"role": "assistant", "content": step.thought or "", "tool_calls": calls,
                         **({"name": agent} if tag else {})})
        agents.append(agent)
        messages.extend(results)
        agents.extend(["tool"] * len(results))
        i = group[-1] + 1
    for index in sorted(notes):
        note(index)
    return messages, agents


ROLE_PROMPTS = {"planner": PLANNER_PROMPT, "executor": EXECUTOR_PROMPT, "reviewer": REVIEWER_PROMPT}


def per_role(record: dict[str, Any]) -> list[dict[str, Any]]:
    """A multi_agent record as one record per agent: that agent's messages are the assistant turns, the
    others' are shown to it as user messages (``[planner] ...``), as a per-role SFT set needs."""
    if record.get("mode") != "multi_agent":
        return [record]
    out = []
    messages, agents = record["messages"], record["agents"]
    for role in ("planner", "executor", "reviewer"):
        if role not in agents:
            continue
        conv: list[dict[str, Any]] = [{"role": "system", "content": ROLE_PROMPTS[role]}, messages[1]]
        last = max(i for i, a in enumerate(agents) if a == role)
        for i in range(2, last + 1):
            msg, agent = messages[i], agents[i]
            if agent == role:
                conv.append({k: v for k, v in msg.items() if k != "name"})
            elif agent == "tool":
                if role == "executor":
                    conv.append(msg)
            else:
                text = msg.get("content") or ""
                if msg.get("tool_calls"):
                    text += "\n" + "\n".join(f"call {c['function']['name']}({c['function']['arguments']})"
                                             for c in msg["tool_calls"])
                conv.append({"role": "user", "content": f"[{agent}] {text.strip()}"})
        out.append({**{k: v for k, v in record.items() if k not in ("messages", "agents")},
                    "id": f"{record['id']}-{role}", "role": role, "messages": conv,
                    **({} if role == "executor" else {"tools": []})})
    return out
