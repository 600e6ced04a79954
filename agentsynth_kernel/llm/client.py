"""The client: cache, limits, budget and retries around the transports; the run-scoped client."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import AgentsynthError, BudgetExceeded
from ..records import ToolSpec, Usage
from ..secrets import redact_text, remember
from .budget import PICO, BudgetLedger
from .cache import ResponseCache, default_cache_dir, key_encoder
from .errors import Fatal, LLMError, Retryable
from .fast import FastTransport
from .prices import price_for
from .ratelimit import RateLimiter
from .records import LLMResponse, LLMStats
from .routing import OPENAI_COMPATIBLE, Route, completion_cap_param, resolve_route
from .via_litellm import LiteLLMTransport
from .wire import json_encoder


@attrs.define
class _LoopState:
    sem: asyncio.Semaphore
    limiter: RateLimiter | None
    fast: FastTransport | None = None


_OPTIONAL_PARAMS = ("temperature", "top_p", "stop", "seed", "tool_choice", "parallel_tool_calls", "response_format",
                    "presence_penalty", "frequency_penalty", "n", "user", "reasoning_effort")


def _tool_dicts(tools: Sequence[Any] | None) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    return [t.to_openai() if isinstance(t, ToolSpec) else dict(t) for t in tools]


class LLMClient:
    """The LLM client: one per run (``client_for(run)``) or one per script.

    Defaults for requests (``model``, ``api_base``, ``api_key``/``api_key_env``, ``transport``)
    can be overridden per :meth:`complete` call, so one client (and one budget) serves a
    policy, a judge and a generator talking to different models.

    Args:
        model: default model, e.g. ``openai/gpt-4o-mini``, ``anthropic/claude-3-5-haiku-latest``,
            ``hosted_vllm/Qwen/Qwen2.5-7B-Instruct`` (with ``api_base``).
        api_base: endpoint of an OpenAI-compatible server (``http://localhost:8000/v1``).
        api_key: the key itself (prefer ``api_key_env``); never logged or cached.
        api_key_env: name of the environment variable holding the key (default: the provider's,
            e.g. ``OPENAI_API_KEY``).
        cache: ``True`` (default directory, see :func:`default_cache_dir`), ``False``, or a directory.
        max_retries: retries after the first attempt (429, 5xx, timeouts, malformed bodies).
        backoff_base, backoff_max: exponential backoff in seconds (with jitter).
        timeout: seconds to wait for one response.
        concurrency: requests in flight at once (also the connection pool size).
        rpm: requests per minute (None: unlimited).
        budget_usd, budget_tokens: the hard cap (None: none).
        prices: ``{model: (usd_per_prompt_token, usd_per_completion_token)}`` for models litellm's
            table does not know (or to override it).
        max_tokens: completion cap used when a request gives none (sent to the provider only
            when a budget needs it, and always counted in the reservation).
        prompt_bytes_per_token: how many bytes of prompt JSON to count as one token when
            reserving budget; 1.0 (the default) is a safe upper bound for BPE tokenizers.
        http_backend: ``aiohttp`` (default when installed) or ``httpx`` for the fast path
            (also ``$AGENTSYNTH_LLM_HTTP``).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        transport: str = "auto",
        cache: bool | str | Path = True,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        concurrency: int = 64,
        rpm: float | None = None,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
        prices: Mapping[str, Any] | None = None,
        max_tokens: int = 4096,
        prompt_bytes_per_token: float = 1.0,
        http_backend: str | None = None,
    ) -> None:
        self.model, self.api_base, self.transport = model, api_base, transport
        self._api_key, self.api_key_env = api_key, api_key_env
        if cache is True:
            directory = default_cache_dir()
            self.cache = ResponseCache(directory) if directory is not None else None
        elif cache is False or cache is None:
            self.cache = None
        else:
            self.cache = ResponseCache(Path(cache))
        self.max_retries, self.backoff_base, self.backoff_max = max_retries, backoff_base, backoff_max
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.concurrency = max(1, int(concurrency))
        self.rpm = rpm
        self.ledger = BudgetLedger(budget_usd, budget_tokens)
        self.prices = dict(prices or {})
        self.max_tokens = max_tokens
        self.prompt_bytes_per_token = prompt_bytes_per_token
        self.http_backend = http_backend or os.environ.get("AGENTSYNTH_LLM_HTTP", "auto")
        self.stats = LLMStats()
        # connection pools, the concurrency semaphore and the rate limiter belong to one event loop;
        # a client used from several loops (asyncio.run twice, a sync judge on a worker thread) has one
        # set per loop, while the budget, cache and stats stay shared
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self._litellm: LiteLLMTransport | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"LLMClient(model={self.model!r}, api_base={self.api_base!r}, budget={self.ledger.describe()!r})"

    # --- plumbing -------------------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            limiter = RateLimiter(self.rpm) if self.rpm else None
            state = self._loops[loop] = _LoopState(asyncio.Semaphore(self.concurrency), limiter)
        return state

    def _key_for(self, route: Route, api_key: str | None, api_key_env: str | None) -> str | None:
        if api_key or self._api_key:
            key = api_key or self._api_key
        else:
            env = api_key_env or self.api_key_env or route.key_env
            key = os.environ.get(env) if env else None
        remember(key)  # a model that echoes its key back never gets it onto the disk
        return key

    def _estimate_prompt_tokens(self, body: dict[str, Any]) -> int:
        size = len(json_encoder.encode(body.get("messages", []))) + len(json_encoder.encode(body.get("tools") or []))
        overhead = 16 + 8 * len(body.get("messages", [])) + 16 * len(body.get("tools") or [])
        return int(size / self.prompt_bytes_per_token) + overhead

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        ceiling = min(self.backoff_max, self.backoff_base * (2.0 ** attempt))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def cache_key(self, request: Mapping[str, Any], route: Route, cache_salt: str | None = None) -> str:
        """The content address of a request: model, messages, tools, parameters and salt.

        Neither credentials nor the endpoint are part of it (a local server on a new port still
        replays); the model name is the identity, so use ``cache_salt`` to tell apart two
        different models served under one name.
        """
        material = {"v": 1, "model": route.model, "request": request, "salt": cache_salt}
        return hashlib.sha256(key_encoder.encode(material)).hexdigest()

    # --- the API --------------------------------------------------------------------------------

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        tools: Sequence[ToolSpec | Mapping[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        transport: str | None = None,
        cache: bool = True,
        cache_salt: str | None = None,
        headers: Mapping[str, str] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """One chat completion (with tools, OpenAI shapes) through cache, limits, budget and retries.

        ``messages`` are OpenAI chat messages; ``tools`` are ToolSpecs or OpenAI tool dicts.
        ``cache_salt`` separates otherwise identical requests in the cache (e.g. trials of a task
        sampled at temperature > 0). Other ``params`` (``tool_choice``, ``top_p``, ``seed``,
        ``stop``, ``response_format`` ...) are sent as given. ``headers`` are extra HTTP headers
        (e.g. OpenRouter's ``HTTP-Referer``); like keys, they are not part of the cache key.

        Raises LLMError (provider failure after retries), BudgetExceeded (the cap is reached).
        """
        self.stats.requests += 1
        model = model or self.model
        if not model:
            raise AgentsynthError("no model: pass model= to LLMClient(...) or to complete(...)")
        route = resolve_route(model, api_base or self.api_base, transport or self.transport)
        request: dict[str, Any] = {"messages": list(messages)}
        tool_list = _tool_dicts(tools)
        if tool_list:
            request["tools"] = tool_list
        if temperature is not None:
            request["temperature"] = temperature
        if max_tokens is None:  # either name is accepted
            max_tokens = params.pop("max_completion_tokens", None)
        cap_key = completion_cap_param(route)
        if max_tokens is not None:
            request[cap_key] = max_tokens
        request.update({k: v for k, v in params.items() if v is not None})

        key = None
        if cache and self.cache is not None:
            key = self.cache_key(request, route, cache_salt)
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                hit.cached = True
                hit.original_usage, hit.usage = hit.usage, Usage(0, 0, 0.0, 0)
                return hit

        price = price_for(model, self.prices)
        prompt_estimate = self._estimate_prompt_tokens(request)
        completion_cap = max_tokens if max_tokens is not None else self.max_tokens
        try:
            reservation = await self.ledger.reserve(prompt_estimate, completion_cap, price, model=model)
        except BudgetExceeded:
            self.stats.budget_refusals += 1
            raise
        send = request
        if reservation.completion_allowance is not None and reservation.completion_allowance != max_tokens:
            send = {**request, cap_key: reservation.completion_allowance}
        key_value = self._key_for(route, api_key, api_key_env)
        if key_value is None and route.transport == "openai" and route.key_env and \
                route.api_base == (OPENAI_COMPATIBLE.get(route.provider) or (None,))[0]:
            self.ledger.settle(reservation, 0, 0.0)
            self.stats.failures += 1
            env = api_key_env or self.api_key_env or route.key_env
            raise LLMError(f"{model}: no API key: set {env} in the environment (or name another variable with "
                           "api_key_env:)", reason="no_key", model=model)
        settled = False
        sent: list[bool] = []  # gets an entry when an attempt leaves
        try:
            response, has_usage = await self._send(route, send, key_value, headers, sent)
            tokens = response.usage.prompt_tokens + response.usage.completion_tokens
            cost = None
            if price is not None:
                cost = response.usage.prompt_tokens * price[0] + response.usage.completion_tokens * price[1]
            if not has_usage:
                self.stats.usage_missing += 1
                self.ledger.settle(reservation, reservation.tokens, None)
            else:
                self.ledger.settle(reservation, tokens, cost if cost is not None else 0.0)
            settled = True
            response.usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens, cost,
                                   response.attempts)
            self.stats.prompt_tokens += response.usage.prompt_tokens
            self.stats.completion_tokens += response.usage.completion_tokens
            if cost is None:
                self.stats.cost_unknown += 1
            else:
                self.stats.cost_usd += cost
        except asyncio.CancelledError:
            if sent:  # it may have been processed: count the worst case, never less
                self.ledger.settle(reservation, reservation.tokens, None)
                settled = True
            raise
        finally:
            if not settled:  # failed for good: nothing to bill
                self.ledger.settle(reservation, 0, 0.0)
        if key is not None and self.cache is not None:
            self.cache.put(key, response)
        return response

    async def _send(self, route: Route, request: dict[str, Any], api_key: str | None,
                    headers: Mapping[str, str] | None = None, sent: list[bool] | None = None,
                    ) -> tuple[LLMResponse, bool]:
        state = self._state()
        if route.transport == "openai":
            if state.fast is None:
                state.fast = FastTransport(max_connections=self.concurrency, timeout=self.timeout,
                                            connect_timeout=self.connect_timeout, backend=self.http_backend)
            transport: Any = state.fast
            payload: Any = json_encoder.encode({"model": route.wire_model, **request})
        else:
            if self._litellm is None:
                self._litellm = LiteLLMTransport(timeout=self.timeout)
            transport, payload = self._litellm, ({**request, "extra_headers": dict(headers)} if headers else request)
        secrets = [api_key] if api_key else []
        secrets += [v for v in (headers or {}).values() if len(v) >= 6]
        attempt = 0
        started = time.perf_counter()
        while True:
            attempt += 1
            if state.limiter is not None:
                await state.limiter.acquire()
            try:
                async with state.sem:
                    self.stats.http_requests += 1
                    if sent is not None:
                        sent.append(True)
                    if route.transport == "openai":
                        response, has_usage = await transport.send(route, payload, api_key, headers)
                    else:
                        response, has_usage = await transport.send(route, payload, api_key)
                response.attempts = attempt
                response.latency_s = time.perf_counter() - started
                return response, has_usage
            except Fatal as exc:
                self.stats.failures += 1
                raise LLMError(
                    redact_text(f"{route.model}: request rejected: {exc.detail}", secrets),
                    status=exc.status, attempts=attempt, reason="rejected", model=route.model,
                ) from None
            except Retryable as exc:
                if attempt > self.max_retries:
                    self.stats.failures += 1
                    raise LLMError(
                        redact_text(f"{route.model}: gave up after {attempt} attempts; last error: {exc.detail}",
                                    secrets),
                        status=exc.status, attempts=attempt, reason=exc.reason, model=route.model,
                    ) from None
                self.stats.retries += 1
                self.stats.retry_reasons[exc.reason] = self.stats.retry_reasons.get(exc.reason, 0) + 1
                await asyncio.sleep(self._backoff(attempt - 1, exc.retry_after))

    def complete_sync(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> LLMResponse:
        """:meth:`complete` for code without an event loop (scripts, notebooks)."""
        return asyncio.run(self.complete(messages, **kwargs))

    async def aclose(self) -> None:
        """Close this event loop's pooled connections (the client stays usable; pools reopen on demand)."""
        state = self._loops.get(asyncio.get_running_loop())
        fast, state_fast = (state.fast, None) if state is not None else (None, None)
        if state is not None:
            state.fast = state_fast
        if fast is not None:
            await fast.aclose()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# --- run-scoped client ----------------------------------------------------------------------------

SERVICE_KEY = "llm"
# a BudgetLedger-compatible object every LLM client of the run must charge instead of its own: the
# one ledger of a run whose episodes execute on remote workers lives with the driver
LEDGER_KEY = "llm.ledger"
_default_client: LLMClient | None = None


def client_for(run: Any = None, **options: Any) -> LLMClient:
    """The LLM client of a run (``run.services["llm"]``), created on first use with the run's
    ``budget:`` (USD and/or tokens), minus what earlier sessions of a resumed run spent
    (``run.spent``), and the default cache; ``options`` are LLMClient arguments used only when it
    is created. Without a run: one process-wide client with no budget.
    """
    global _default_client
    if run is None:
        if _default_client is None:
            _default_client = LLMClient(**options)
        return _default_client
    services = run.services
    client: LLMClient | None = services.get(SERVICE_KEY)
    if client is None:
        budget = getattr(getattr(run, "spec", None), "budget", None)
        options.setdefault("budget_usd", getattr(budget, "usd", None))
        options.setdefault("budget_tokens", getattr(budget, "tokens", None))
        client = services[SERVICE_KEY] = LLMClient(**options)
        shared = services.get(LEDGER_KEY)
        if shared is not None:  # a remote executor's worker: the run's ledger is the driver's
            client.ledger = shared
            return client
        journal = getattr(run, "journal", None)
        prior = journal.spend_total() if journal is not None else (0, 0, 0)
        if prior[:2] != (0, 0):  # earlier sessions, in-flight requests of a killed one included
            client.ledger.charge(prior[0], prior[1] / PICO)
        else:
            spent = getattr(run, "spent", None)  # earlier sessions of a resumed run count against the budget
            if spent is not None:
                client.ledger.charge(spent.prompt_tokens + spent.completion_tokens, spent.cost_usd or 0.0)
        client.ledger.journal = journal if client.ledger.limited else None
    return client
