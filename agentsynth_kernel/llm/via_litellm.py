"""Every provider that is not OpenAI-compatible, through ``litellm.acompletion`` (imported lazily)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import msgspec

from ..errors import AgentsynthError
from .errors import Fatal, Retryable
from .records import LLMResponse
from .routing import Route
from .wire import Malformed, WireResponse, normalize

_LITELLM: Any = None


def _import_litellm() -> Any:
    """Import litellm on first use (never at start-up), with its bundled cost map."""
    global _LITELLM
    if _LITELLM is None:
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        try:
            import litellm
        except ImportError:
            raise AgentsynthError(
                "this model needs litellm (a non-OpenAI-compatible provider): pip install 'agentsynth[litellm]'"
            ) from None
        litellm.suppress_debug_info = True
        litellm.telemetry = False
        _LITELLM = litellm
    return _LITELLM


class LiteLLMTransport:
    def __init__(self, *, timeout: float) -> None:
        self.timeout = timeout

    async def prepare(self) -> None:
        """Import litellm on first use (off the loop), before a request takes its rate-limit turn."""
        if _LITELLM is None:
            await asyncio.to_thread(_import_litellm)

    async def send(self, route: Route, request: dict[str, Any], api_key: str | None) -> tuple[LLMResponse, bool]:
        await self.prepare()
        litellm = _LITELLM
        kwargs = dict(request)
        kwargs["model"] = route.model
        if route.api_base:
            kwargs["api_base"] = route.api_base
        if api_key:
            kwargs["api_key"] = api_key
        try:
            result = await litellm.acompletion(num_retries=0, timeout=self.timeout, **kwargs)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            name = type(exc).__name__
            detail = f"{name}: {exc}"
            if "Timeout" in name:
                raise Retryable("timeout", detail) from None
            if status == 429 or "RateLimit" in name:
                raise Retryable("429", detail, 429) from None
            if isinstance(status, int) and status >= 500 or "ServiceUnavailable" in name or "InternalServer" in name:
                raise Retryable(str(status or 500), detail, status) from None
            if "APIConnection" in name or "Connection" in name:
                raise Retryable("connection", detail) from None
            if "JSONDecode" in name or "APIResponseValidation" in name:
                raise Retryable("malformed", detail) from None
            if isinstance(status, int):
                raise Fatal(detail, status) from None
            raise Retryable("error", detail) from None
        try:
            data = result.model_dump() if hasattr(result, "model_dump") else dict(result)
            return normalize(msgspec.convert(data, WireResponse, strict=False))
        except (msgspec.ValidationError, Malformed, TypeError) as exc:
            raise Retryable("malformed", f"malformed response ({exc})") from None

    async def aclose(self) -> None:
        return None

