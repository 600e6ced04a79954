"""The fast path: OpenAI-compatible ``/chat/completions`` over one pooled HTTP session."""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import msgspec

from .errors import Fatal, Retryable
from .records import LLMResponse
from .routing import Route
from .wire import Malformed, normalize, retry_after_seconds, snippet, wire_decoder


class FastTransport:
    """OpenAI-compatible chat completions over one pooled aiohttp session (HTTP/1.1 keep-alive).

    aiohttp, not httpx: measured on this project's benchmark (benchmarks/bench_llm.py),
    httpcore's pool costs O(connections x waiting requests) per request (10-25 ms of CPU per
    request at 64 in flight), while aiohttp's connector stays near 0.15 ms. httpx is the
    fallback when aiohttp is not installed (sharded into small pools to keep that cost down).
    """

    def __init__(self, *, max_connections: int, timeout: float, connect_timeout: float, backend: str = "auto") -> None:
        self.max_connections, self.timeout, self.connect_timeout = max_connections, timeout, connect_timeout
        self._session: Any = None
        self._shards: list[Any] = []
        self._next = 0
        self._guard: AsyncGenerator[None, None] | None = None
        if backend not in ("auto", "aiohttp", "httpx"):
            raise ValueError(f"http backend must be 'auto', 'aiohttp' or 'httpx', got {backend!r}")
        self.backend = backend  # resolved to aiohttp or httpx on first use
        self._aiohttp: Any = None
        # proxies from the environment only when some are set (looking them up costs a thread hop per request)
        self.trust_env = any(k.lower() in ("http_proxy", "https_proxy", "all_proxy") for k in os.environ)

    async def _resolve_backend(self) -> None:
        if self.backend in ("auto", "aiohttp"):
            try:
                self._aiohttp = await import_off_loop("aiohttp")
                self.backend = "aiohttp"
                return
            except ImportError:
                if self.backend == "aiohttp":
                    raise
        await import_off_loop("httpx")
        self.backend = "httpx"

    async def prepare(self) -> None:
        """Import the HTTP backend on first use (off the loop). The client calls it before a
        request takes its rate-limit turn, so no turn is spent waiting for the import."""
        if self.backend == "auto" or (self.backend == "aiohttp" and self._aiohttp is None):
            await self._resolve_backend()

    async def _closer(self) -> AsyncGenerator[None, None]:
        """An async generator parked in the loop: ``asyncio.run`` closes it at shutdown, which
        closes the pool, so no "unclosed session" warning even if nobody calls aclose()."""
        try:
            yield
        finally:
            await self.aclose()

    async def _guard_pool(self) -> None:
        if self._guard is None:
            self._guard = self._closer()
            await self._guard.__anext__()

    async def send(self, route: Route, body: bytes, api_key: str | None,
                   extra_headers: Mapping[str, str] | None = None) -> tuple[LLMResponse, bool]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if extra_headers:
            headers.update(extra_headers)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        assert route.api_base is not None
        url = route.api_base + "/chat/completions"
        await self.prepare()
        if self.backend == "aiohttp":
            code, content, retry_after = await self._post_aiohttp(url, body, headers)
        else:
            code, content, retry_after = await self._post_httpx(url, body, headers)
        if code == 200:
            try:
                return normalize(wire_decoder.decode(content))
            except (msgspec.DecodeError, msgspec.ValidationError, Malformed) as exc:
                raise Retryable("malformed", f"malformed response body ({exc}): {snippet(content, 120)}",
                                 200) from None
        detail = f"HTTP {code}: {snippet(content)}"
        if code == 429 or code >= 500 or code == 408:
            raise Retryable(str(code), detail, code, retry_after_seconds(retry_after))
        raise Fatal(detail, code)

    async def _post_aiohttp(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str | None]:
        aiohttp = self._aiohttp
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0, keepalive_timeout=60,
                                             ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector, trust_env=self.trust_env,
                timeout=aiohttp.ClientTimeout(total=self.timeout, sock_connect=self.connect_timeout),
            )
            await self._guard_pool()
        try:
            async with self._session.post(url, data=body, headers=headers) as response:
                content = await response.read()
                return response.status, content, response.headers.get("retry-after")
        except TimeoutError:
            raise Retryable("timeout", f"no response within {self.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise Retryable("connection", f"connection error ({type(exc).__name__}: {exc})") from None

    async def _post_httpx(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str | None]:
        import httpx

        if not self._shards:
            per_shard = 4
            limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard, keepalive_expiry=60)
            timeout = httpx.Timeout(self.timeout, connect=self.connect_timeout, pool=None)
            self._shards = [httpx.AsyncClient(limits=limits, timeout=timeout)
                            for _ in range(max(1, self.max_connections // per_shard))]
            await self._guard_pool()
        self._next = (self._next + 1) % len(self._shards)
        try:
            response = await self._shards[self._next].post(url, content=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise Retryable("timeout", f"timed out ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise Retryable("connection", f"connection error ({type(exc).__name__}: {exc})") from None
        return response.status_code, response.content, response.headers.get("retry-after")

    async def aclose(self) -> None:
        session, self._session = self._session, None
        shards, self._shards = self._shards, []
        self._guard = None
        try:
            if session is not None:
                await session.close()
            for shard in shards:
                await shard.aclose()
        except Exception:
            pass


_IMPORTED: dict[str, Any] = {}


async def import_off_loop(name: str) -> Any:
    """Import a heavy module on a worker thread the first time (aiohttp takes 1-2 s to import on a
    busy machine; litellm several), so other episodes keep running meanwhile."""
    module = _IMPORTED.get(name)
    if module is None:
        module = _IMPORTED[name] = await asyncio.to_thread(importlib.import_module, name)
    return module

