"""The OpenAI chat-completion wire format, decoded with msgspec into :class:`LLMResponse`."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from ..records import Usage
from .records import LLMResponse, LLMToolCall


class _WFunction(msgspec.Struct):
    name: str = ""
    arguments: Any = ""


class _WToolCall(msgspec.Struct):
    function: _WFunction
    id: str | None = ""


class _WMessage(msgspec.Struct):
    content: Any = None
    tool_calls: list[_WToolCall] | None = None


class _WChoice(msgspec.Struct):
    message: _WMessage
    finish_reason: str | None = None


class _WUsage(msgspec.Struct):
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0


class WireResponse(msgspec.Struct):
    choices: list[_WChoice]
    usage: _WUsage | None = None
    model: str | None = ""


wire_decoder = msgspec.json.Decoder(WireResponse)
json_encoder = msgspec.json.Encoder()


class Malformed(Exception):
    pass


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def normalize(wire: WireResponse) -> tuple[LLMResponse, bool]:
    """(response without cost, usage present?)"""
    if not wire.choices:
        raise Malformed("no choices")
    choice = wire.choices[0]
    calls = []
    for i, call in enumerate(choice.message.tool_calls or []):
        args = call.function.arguments
        raw = args if isinstance(args, str) else json.dumps(args)
        calls.append(LLMToolCall(call.id or f"call_{i}", call.function.name, raw))
    usage = wire.usage
    has_usage = usage is not None
    prompt = (usage.prompt_tokens or 0) if usage else 0
    completion = (usage.completion_tokens or 0) if usage else 0
    response = LLMResponse(
        content=content_text(choice.message.content), tool_calls=calls, finish_reason=choice.finish_reason or "",
        model=wire.model or "", usage=Usage(prompt, completion, None, 1),
    )
    return response, has_usage


def retry_after_seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def snippet(body: bytes | str, limit: int = 300) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
        message = data.get("error", {}).get("message") if isinstance(data, dict) else None
        if isinstance(message, str):
            text = message
    except (ValueError, AttributeError):
        pass
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "")

