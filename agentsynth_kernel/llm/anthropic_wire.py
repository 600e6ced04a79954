"""OpenAI-shaped chat requests as Anthropic Messages ``params``, and Anthropic messages back as
:class:`LLMResponse` (the batch path speaks Anthropic's API without litellm)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..records import Usage
from .records import LLMResponse, LLMToolCall
from .wire import Malformed, content_text

# OpenAI request fields with no Anthropic equivalent: left out of the params (Anthropic rejects
# unknown fields), so a request that uses them still runs
_DROPPED = frozenset({"seed", "n", "presence_penalty", "frequency_penalty", "response_format", "logprobs",
                      "top_logprobs", "user", "reasoning_effort", "logit_bias", "store", "stream_options"})
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                 "pause_turn": "stop", "refusal": "content_filter"}


def _blocks(content: Any) -> list[dict[str, Any]]:
    """OpenAI content (a string or text parts) as Anthropic content blocks."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        out: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                out.append({"type": "text", "text": str(part.get("text", ""))})
            elif isinstance(part, Mapping) and part.get("type") == "image_url":
                url = str((part.get("image_url") or {}).get("url", ""))
                out.append({"type": "image", "source": {"type": "url", "url": url}})
            elif isinstance(part, str):
                out.append({"type": "text", "text": part})
        return out
    return [{"type": "text", "text": str(content)}]


def _tool_input(arguments: Any) -> Any:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except ValueError:
        value = {"_raw": arguments}  # the model wrote broken JSON once; it is history, send it as is
    return value if isinstance(value, dict) else {"_value": value}


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    out: dict[str, Any] | None
    if choice is None:
        out = {"type": "auto"} if parallel is False else None
    elif choice == "auto":
        out = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        out = {"type": "none"}
    elif isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        out = {"type": "tool", "name": str(choice["function"].get("name", ""))}
    else:
        out = {"type": "auto"}
    if out is not None and parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def to_anthropic_params(model: str, request: Mapping[str, Any], default_max_tokens: int) -> dict[str, Any]:
    """The ``params`` of one Anthropic batch request for an OpenAI-shaped chat ``request``.

    System messages become ``system``; assistant tool calls become ``tool_use`` blocks; ``tool``
    messages become ``tool_result`` blocks of a user turn; consecutive turns of one role are merged
    (Anthropic wants them alternating). ``max_tokens`` is required there: the request's, else the
    client's default.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in request.get("messages", []):
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(content_text(message.get("content")))
        elif role == "assistant":
            blocks = _blocks(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append({"type": "tool_use", "id": str(call.get("id") or ""),
                               "name": str(function.get("name", "")), "input": _tool_input(function.get("arguments"))})
            add("assistant", blocks)
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": str(message.get("tool_call_id") or ""),
                          "content": content_text(message.get("content"))}])
        else:
            add("user", _blocks(message.get("content")))
    params: dict[str, Any] = {"model": model, "messages": turns}
    cap = request.get("max_tokens", request.get("max_completion_tokens"))
    params["max_tokens"] = int(cap) if cap is not None else default_max_tokens
    if system:
        params["system"] = "\n\n".join(s for s in system if s)
    tools = request.get("tools") or []
    if tools:
        params["tools"] = [
            {"name": f.get("name", ""), "description": f.get("description", ""),
             "input_schema": f.get("parameters") or {"type": "object", "properties": {}}}
            for f in (t.get("function", t) for t in tools)
        ]
    choice = _tool_choice(request.get("tool_choice"), request.get("parallel_tool_calls"))
    if choice is not None and tools:
        params["tool_choice"] = choice
    for name in ("temperature", "top_p", "top_k", "metadata"):
        if request.get(name) is not None:
            params[name] = request[name]
    stop = request.get("stop")
    if stop:
        params["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    for name, value in request.items():  # anything else Anthropic-specific the caller passed on purpose
        if name not in params and name not in _DROPPED and name not in (
                "messages", "tools", "tool_choice", "parallel_tool_calls", "stop", "max_tokens",
                "max_completion_tokens"):
            params[name] = value
    return params


def from_anthropic_message(message: Any) -> tuple[LLMResponse, bool]:
    """(response without cost, usage present?) for an Anthropic ``message`` object."""
    if not isinstance(message, Mapping) or not isinstance(message.get("content"), list):
        raise Malformed("not an Anthropic message (no content list)")
    texts: list[str] = []
    calls: list[LLMToolCall] = []
    for i, block in enumerate(message["content"]):
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(LLMToolCall(str(block.get("id") or f"call_{i}"), str(block.get("name", "")),
                                     json.dumps(block.get("input", {}))))
    usage = message.get("usage")
    has_usage = isinstance(usage, Mapping)
    prompt = completion = 0
    if isinstance(usage, Mapping):
        prompt = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                      "cache_read_input_tokens"))
        completion = int(usage.get("output_tokens") or 0)
    stop = str(message.get("stop_reason") or "")
    response = LLMResponse(content="".join(texts), tool_calls=calls, finish_reason=_STOP_REASONS.get(stop, stop),
                           model=str(message.get("model") or ""), usage=Usage(prompt, completion, None, 1))
    return response, has_usage
