"""What an RL loop hands us, turned into the kernel's actions.

Trainers and agents speak several dialects: OpenAI tool calls (``{"type": "function", "function":
{"name", "arguments": "<json>"}}``), whole assistant messages with ``tool_calls``, plain dicts
(``{"tool": ..., "arguments": {...}}`` / ``{"answer": ...}``, the shapes a callable policy may
return), the kernel's records, or text with ``<tool_call>{json}</tool_call>`` blocks (the Hermes /
Qwen chat-template format TRL parses). One parser for all of them, so the gym env, the reward
function and the OpenEnv server agree on what an action means.

A call whose arguments are not a JSON object is the agent's mistake, not ours: it becomes an
invalid step with an error observation (as the kernel's LLM policy records it). Anything that is
not an action at all is the caller's mistake: :class:`ActionError`, naming what was expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from agentsynth_kernel import Action, Answer, Observation, Step, ToolCall

EXPECTED = ("an action: a ToolCall or Answer, a str (the final answer), an OpenAI tool call "
            "{'type': 'function', 'function': {'name': ..., 'arguments': ...}}, an assistant message with "
            "'tool_calls', {'tool': NAME, 'arguments': {...}}, {'answer': TEXT}, or a list of these")


class ActionError(ValueError):
    """The value handed to ``step`` (or found in a completion) is not an action."""


# (action, the error the agent sees instead of running it) — the second is None for a good call
Parsed = tuple[Action, Observation | None]


def parse_actions(action: Any) -> list[Parsed]:
    """Every action in ``action``, in order (several = parallel tool calls of one turn)."""
    if isinstance(action, (ToolCall, Answer)):
        return [(action, None)]
    if isinstance(action, str):
        return [(Answer(action), None)]
    if isinstance(action, (list, tuple)):
        if not action:
            raise ActionError(f"got an empty list; expected {EXPECTED}")
        return [p for item in action for p in parse_actions(item)]
    if not isinstance(action, dict):
        raise ActionError(f"got {type(action).__name__}; expected {EXPECTED}")
    if "tool_calls" in action or action.get("role") == "assistant":
        calls = action.get("tool_calls") or []
        if not isinstance(calls, list):
            raise ActionError(f"'tool_calls' must be a list, got {type(calls).__name__}")
        if calls:
            return [_tool_call(c) for c in calls]
        return [(Answer(_text(action.get("content"))), None)]
    if "answer" in action:
        return [(Answer(_text(action["answer"])), None)]
    return [_tool_call(action)]


def _tool_call(call: Any) -> Parsed:
    if isinstance(call, ToolCall):
        return call, None
    if not isinstance(call, dict):
        raise ActionError(f"a tool call must be a mapping, got {type(call).__name__}; expected {EXPECTED}")
    call_id = str(call.get("id") or "")
    body = call.get("function", call)
    if not isinstance(body, dict):
        raise ActionError(f"'function' must be a mapping, got {type(body).__name__}")
    name = body.get("name", body.get("tool"))
    if not isinstance(name, str) or not name:
        raise ActionError(f"a tool call needs a tool name ('name' or 'tool'), got {call!r:.200}; expected {EXPECTED}")
    raw = body.get("arguments", body.get("args", {}))
    if raw is None:
        raw = {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolCall(name, {}, call_id), Observation(
                f"error: the arguments of {name!r} are not valid JSON ({exc.msg} at position {exc.pos})", error=True)
    if not isinstance(raw, dict):
        return ToolCall(name, {}, call_id), Observation(
            f"error: the arguments of {name!r} must be a JSON object, got {type(raw).__name__}", error=True)
    return ToolCall(name, raw, call_id), None


def _text(content: Any) -> str:
    """Message content as text (OpenAI content parts are joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


# --- completions (TRL reward functions) -------------------------------------------------------------

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)


def text_actions(text: str) -> list[Parsed]:
    """Tool calls written in a completion's text as ``<tool_call>{"name", "arguments"}</tool_call>``
    (Hermes / Qwen format), then the text outside them (reasoning removed) as the final answer."""
    parsed: list[Parsed] = []
    for match in _TOOL_CALL.finditer(text):
        try:
            call = json.loads(match.group(1))
        except json.JSONDecodeError as exc:
            parsed.append((ToolCall("", {}), Observation(f"error: a <tool_call> is not valid JSON ({exc.msg})",
                                                        error=True)))
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            parsed.append((ToolCall("", {}), Observation("error: a <tool_call> needs a JSON object with a 'name'",
                                                        error=True)))
            continue
        parsed.append(_tool_call(call))
    answer = _THINK.sub("", _TOOL_CALL.sub("", text)).strip()
    parsed.append((Answer(answer), None))
    return parsed


def completion_steps(completion: Any) -> list[Step]:
    """A completion as trajectory steps to replay: text (``str``) or messages (``list[dict]``).

    In messages, each assistant message is one turn; its tool calls are steps whose stored
    observation is the matching ``tool`` message (by ``tool_call_id``, else by order); the last
    assistant message without tool calls is the final answer. Other roles are skipped.
    """
    if isinstance(completion, str):
        return _steps([text_actions(completion)])
    if not isinstance(completion, list):
        raise ActionError(f"a completion must be a str or a list of messages, got {type(completion).__name__}")
    turns: list[list[Parsed]] = []
    results: dict[str, str] = {}
    ordered: list[str] = []
    for i, message in enumerate(completion):
        if not isinstance(message, dict) or "role" not in message:
            raise ActionError(f"completion[{i}]: expected a chat message with a 'role', got {message!r:.120}")
        if message["role"] == "assistant":
            if message.get("tool_calls"):
                turns.append(parse_actions({"tool_calls": message["tool_calls"]}))
            else:
                content = _text(message.get("content"))
                turns.append(text_actions(content) if "<tool_call>" in content else [(Answer(content), None)])
        elif message["role"] == "tool":
            content = _text(message.get("content"))
            ordered.append(content)
            if message.get("tool_call_id"):
                results[str(message["tool_call_id"])] = content
    steps = _steps(turns)
    calls = [s for s in steps if isinstance(s.action, ToolCall) and not s.invalid]
    for index, step in enumerate(calls):
        action = step.action
        assert isinstance(action, ToolCall)
        seen = results.get(action.id) if action.id else (ordered[index] if index < len(ordered) else None)
        if seen is not None:
            step.observation = Observation(seen)
    return steps


def _steps(turns: Iterable[list[Parsed]]) -> list[Step]:
    steps: list[Step] = []
    for turn, parsed in enumerate(turns):
        for action, rejected in parsed:
            steps.append(Step(action, rejected, turn, invalid=rejected is not None))
    # only the last answer counts (an answer in the middle of messages is just text between calls)
    answers = [i for i, s in enumerate(steps) if isinstance(s.action, Answer)]
    keep = answers[-1] if answers and answers[-1] == len(steps) - 1 else None
    return [s for i, s in enumerate(steps) if not isinstance(s.action, Answer) or i == keep]


# --- multi-turn completions (a task with a simulated user) --------------------------------------------


class Turn:
    """One assistant message of a multi-turn completion: its actions, the tool results recorded
    after it (by call id, and in order) and the user message recorded after it (if any)."""

    def __init__(self, actions: list[Parsed]) -> None:
        self.actions = actions
        self.results: dict[str, str] = {}
        self.ordered: list[str] = []
        self.user: str | None = None

    def recorded(self, index: int, call_id: str) -> str | None:
        """The tool result the completion holds for the ``index``-th call of this turn."""
        if call_id and call_id in self.results:
            return self.results[call_id]
        return self.ordered[index] if index < len(self.ordered) else None


def completion_turns(completion: Any) -> list[Turn]:
    """A completion of a conversation, turn by turn: every assistant message is one turn (its tool
    calls, or its text: a message to the user); the ``tool`` and ``user`` messages after it are what
    the world and the user answered in the rollout. Text (``str``) is one turn."""
    if isinstance(completion, str):
        return [Turn(_turn_actions(completion))]
    if not isinstance(completion, list):
        raise ActionError(f"a completion must be a str or a list of messages, got {type(completion).__name__}")
    turns: list[Turn] = []
    for i, message in enumerate(completion):
        if not isinstance(message, dict) or "role" not in message:
            raise ActionError(f"completion[{i}]: expected a chat message with a 'role', got {message!r:.120}")
        role = message["role"]
        if role == "assistant":
            if message.get("tool_calls"):
                turns.append(Turn(parse_actions({"tool_calls": message["tool_calls"]})))
            else:
                turns.append(Turn(_turn_actions(_text(message.get("content")))))
        elif turns and role == "tool":
            content = _text(message.get("content"))
            turns[-1].ordered.append(content)
            if message.get("tool_call_id"):
                turns[-1].results[str(message["tool_call_id"])] = content
        elif turns and role == "user":
            turns[-1].user = _text(message.get("content"))
    return turns


def _turn_actions(text: str) -> list[Parsed]:
    """An assistant text: its ``<tool_call>`` blocks, then the rest as a message (when not empty,
    or when there is nothing else)."""
    if "<tool_call>" not in text:
        return [(Answer(_THINK.sub("", text).strip()), None)]
    parsed = text_actions(text)
    answer = parsed[-1][0]
    if isinstance(answer, Answer) and not answer.content and len(parsed) > 1:
        parsed = parsed[:-1]
    return parsed
