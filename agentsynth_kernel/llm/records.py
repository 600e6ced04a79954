"""What a request returns: the normalized response, its tool calls, and a client's counters."""

from __future__ import annotations

from typing import Any

import attrs
import msgspec

from ..records import Usage


class LLMToolCall(msgspec.Struct, frozen=True):
    """A tool call as the model wrote it; ``arguments`` is the raw JSON text (it may be invalid)."""

    id: str
    name: str
    arguments: str = ""


class LLMResponse(msgspec.Struct):
    """A normalized chat completion, the same for every transport.

    ``usage`` is what this call spent: ``cost_usd`` is None when the price is unknown. A cache
    hit spent nothing: ``cached=True``, ``usage`` all zero, and ``original_usage`` holds what
    the request cost when it was first made.
    """

    content: str = ""
    tool_calls: list[LLMToolCall] = msgspec.field(default_factory=list)
    finish_reason: str = ""
    model: str = ""
    usage: Usage = msgspec.field(default_factory=Usage)
    cached: bool = False
    attempts: int = 1
    latency_s: float = 0.0
    original_usage: Usage | None = None

    def message(self) -> dict[str, Any]:
        """This answer as an assistant message for the next request (OpenAI shape)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            msg["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        elif msg["content"] is None:
            msg["content"] = ""
        return msg


@attrs.define
class LLMStats:
    """Counters of one client (all requests through it, whoever made them)."""

    requests: int = 0  # complete() calls
    http_requests: int = 0  # attempts actually sent (fast path or litellm)
    cache_hits: int = 0
    retries: int = 0
    retry_reasons: dict[str, int] = attrs.field(factory=dict)
    failures: int = 0
    budget_refusals: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0  # known costs only
    cost_unknown: int = 0  # responses whose cost is unknown
    usage_missing: int = 0  # responses without a usage block (charged at their reservation)
    batches: int = 0  # provider batches submitted
    batch_requests: int = 0  # requests sent in them
    batch_resumed: int = 0  # requests answered by a batch an earlier session submitted

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

