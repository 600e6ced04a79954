"""One item's view of the kernel's LLM client: the model settings, a seed per item, and request counts
(so the report can say how many requests each accepted item cost)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentsynth_kernel import ToolSpec


def json_schema(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """``response_format`` asking for one JSON object with these properties (all required): providers and the
    embedded model's server constrain decoding to it, so even a small model answers in the shape asked."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": {
        "type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}}}


JSON_OBJECT = {"type": "json_object"}
# providers reached through litellm that refuse a `seed` parameter (OpenAI-compatible servers, the embedded
# model among them, take it and are then deterministic)
_NO_SEED = ("anthropic/", "gemini/", "vertex_ai/", "bedrock/", "cohere/", "azure_ai/")


class Caller:
    """``await llm(messages, tools=...)`` through the kernel's client (cache, retries, budget).

    ``seed`` is sent with every request (providers that honour it, the embedded model among them,
    are then deterministic) and salts the cache, so two samples of one query are two requests.
    """

    def __init__(self, client: Any, model: str, *, api_base: str | None = None, api_key_env: str | None = None,
                 temperature: float | None = 0.7, max_tokens: int | None = None, seed: int = 0) -> None:
        self.client, self.model, self.api_base, self.api_key_env = client, model, api_base, api_key_env
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.requests = 0
        self.by_purpose: dict[str, int] = {}

    def for_item(self, seed: int) -> Caller:
        return Caller(self.client, self.model, api_base=self.api_base, api_key_env=self.api_key_env,
                      temperature=self.temperature, max_tokens=self.max_tokens, seed=seed)

    async def __call__(self, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[ToolSpec | Mapping[str, Any]] | None = None,
                       purpose: str = "generate", **params: Any) -> Any:
        self.requests += 1
        self.by_purpose[purpose] = self.by_purpose.get(purpose, 0) + 1
        return await self.client.complete(
            list(messages), model=self.model, tools=list(tools) if tools else None, temperature=self.temperature,
            max_tokens=self.max_tokens, api_base=self.api_base, api_key_env=self.api_key_env,
            cache_salt=f"agentsynth-generate:{self.seed}",
            seed=None if self.model.startswith(_NO_SEED) else self.seed % (2**31), **params)
