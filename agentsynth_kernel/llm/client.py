"""The client: cache, limits, budget and retries around the transports; the run-scoped client."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..errors import AgentsynthError, BudgetExceeded
from ..records import ToolSpec, Usage
from ..secrets import redact_text, remember
from .batch import ANTHROPIC_BASE as _ANTHROPIC_BASE
from .batch import Batcher, BatchItem, BatchJournal, BatchSettings, Protocol, Resumed, protocol_for
from .budget import PICO, BudgetLedger, Reservation, to_pico
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
    batchers: dict[BatchSettings, Batcher] = attrs.field(factory=dict)


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
        batch: send requests through the providers' batch APIs (see :mod:`agentsynth_kernel.llm.batch`
            and docs/llm-batch.md): ``True``, ``"openai"``/``"anthropic"``, or a mapping of
            :class:`BatchSettings` fields; default ``$AGENTSYNTH_LLM_BATCH``, else off.
        batch_journal: where batch ids are kept for resume (default: ``batch.journal``, else
            ``batches.sqlite`` beside the cache; :func:`client_for` uses the run directory).
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
        batch: BatchSettings | Mapping[str, Any] | bool | str | None = None,
        batch_journal: str | Path | None = None,
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
        self.batch = BatchSettings.parse(batch, "batch") if batch is not None else BatchSettings.from_env()
        self.batch_journal_path = Path(batch_journal) if batch_journal is not None else None
        self._batch_journals: dict[Path | None, BatchJournal] = {}
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
        batch: BatchSettings | Mapping[str, Any] | bool | str | None = None,
        **params: Any,
    ) -> LLMResponse:
        """One chat completion (with tools, OpenAI shapes) through cache, limits, budget and retries.

        ``messages`` are OpenAI chat messages; ``tools`` are ToolSpecs or OpenAI tool dicts.
        ``cache_salt`` separates otherwise identical requests in the cache (e.g. trials of a task
        sampled at temperature > 0). Other ``params`` (``tool_choice``, ``top_p``, ``seed``,
        ``stop``, ``response_format`` ...) are sent as given. ``headers`` are extra HTTP headers
        (e.g. OpenRouter's ``HTTP-Referer``); like keys, they are not part of the cache key.
        ``batch`` overrides the client's batch setting for this call (``False``: send it directly).

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

        settings = self.batch if batch is None else BatchSettings.parse(batch, "complete(batch=...)")
        protocol_name = protocol_for(route, settings) if settings is not None else None

        key = None
        if cache and self.cache is not None:
            key = self.cache_key(request, route, cache_salt)
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                hit.cached = True
                hit.original_usage, hit.usage = hit.usage, Usage(0, 0, 0.0, 0)
                return hit

        price = price_for(model, self.prices, batch=protocol_name is not None)
        protocol: Protocol | None = None
        batch_key = ""
        if settings is not None and protocol_name is not None:
            batch_key = key or self.cache_key(request, route, cache_salt)
            key_value = self._batch_key_for(route, protocol_name, api_key, api_key_env)
            protocol = self._batcher(settings).protocol(protocol_name, self._batch_base(route, protocol_name, settings),
                                                        key_value, headers)
            found = self._batcher(settings).claim(batch_key)
            if found is not None:  # an earlier session's batch has (or will have) the answer
                response = await self._complete_resumed(settings, found, protocol, price)
                if key is not None and self.cache is not None:
                    self.cache.put(key, response)
                return response
        # the prompt bound only matters to a budget: without one, no request is encoded twice
        prompt_estimate = self._estimate_prompt_tokens(request) if getattr(self.ledger, "limited", True) else 0
        completion_cap = max_tokens if max_tokens is not None else self.max_tokens
        try:
            reservation = await self.ledger.reserve(prompt_estimate, completion_cap, price, model=model)
        except BudgetExceeded:
            self.stats.budget_refusals += 1
            raise
        send = request
        if reservation.completion_allowance is not None and reservation.completion_allowance != max_tokens:
            send = {**request, cap_key: reservation.completion_allowance}
        if protocol is not None:
            key_value = protocol.api_key
        else:
            key_value = self._key_for(route, api_key, api_key_env)
        if protocol is not None and key_value is None and protocol.base in (_ANTHROPIC_BASE,
                                                                             OPENAI_COMPATIBLE["openai"][0]):
            self.ledger.settle(reservation, 0, 0.0)
            self.stats.failures += 1
            env = api_key_env or self.api_key_env or route.key_env or "ANTHROPIC_API_KEY"
            raise LLMError(f"{model}: no API key for the batch API: set {env} in the environment",
                           reason="no_key", model=model)
        if key_value is None and route.transport == "openai" and route.key_env and \
                route.api_base == (OPENAI_COMPATIBLE.get(route.provider) or (None,))[0]:
            self.ledger.settle(reservation, 0, 0.0)
            self.stats.failures += 1
            env = api_key_env or self.api_key_env or route.key_env
            raise LLMError(f"{model}: no API key: set {env} in the environment (or name another variable with "
                           "api_key_env:)", reason="no_key", model=model)
        settled = False
        sent: list[bool] = []  # gets an entry when an attempt leaves
        after_settle: list[Callable[[], None]] = []
        try:
            if protocol is not None and settings is not None:
                response, has_usage = await self._batch_send(settings, protocol, route, send, batch_key,
                                                             reservation, sent, after_settle)
            else:
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
            for mark in after_settle:
                mark()
            response.usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens, cost,
                                   response.attempts)
            self._count(response.usage, cost)
        except asyncio.CancelledError:
            if sent:  # it may have been processed: count the worst case, never less
                self.ledger.settle(reservation, reservation.tokens, None)
                settled = True
            raise
        except LLMError as exc:
            if exc.billed_unknown:  # no answer, but it may have been processed: the worst case
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
        await transport.prepare()  # a first-use import: not inside the rate limiter's turn
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

    # --- provider batches ------------------------------------------------------------------------

    def _journal(self, settings: BatchSettings) -> BatchJournal:
        path = Path(settings.journal).expanduser() if settings.journal else self.batch_journal_path
        if path is None and self.cache is not None:
            path = self.cache.directory / "batches.sqlite"
        journal = self._batch_journals.get(path)
        if journal is None:
            journal = self._batch_journals[path] = BatchJournal.open(path)
        return journal

    def _batcher(self, settings: BatchSettings) -> Batcher:
        """This loop's batcher for ``settings`` (one per distinct setting)."""
        state = self._state()
        batcher = state.batchers.get(settings)
        if batcher is None:
            batcher = state.batchers[settings] = Batcher(
                settings, self._journal(settings), max_retries=self.max_retries, backoff=self._backoff,
                timeout=self.timeout, connect_timeout=self.connect_timeout, default_max_tokens=self.max_tokens,
                on_submit=self._count_batch)
        return batcher

    def _count_batch(self, n: int) -> None:
        self.stats.batches += 1
        self.stats.batch_requests += n

    def _batch_base(self, route: Route, protocol: str, settings: BatchSettings) -> str:
        if settings.api_base:
            return settings.api_base.rstrip("/")
        if protocol == "anthropic":
            return (route.api_base or _ANTHROPIC_BASE).rstrip("/")
        if route.api_base is None:
            raise AgentsynthError(f"model {route.model!r}: the batch API needs an api_base")
        return route.api_base

    def _batch_key_for(self, route: Route, protocol: str, api_key: str | None, api_key_env: str | None) -> str | None:
        if protocol == "anthropic" and not (api_key or self._api_key or api_key_env or self.api_key_env):
            key = os.environ.get("ANTHROPIC_API_KEY")
            remember(key)
            return key
        return self._key_for(route, api_key, api_key_env)

    async def _batch_send(self, settings: BatchSettings, protocol: Protocol, route: Route, request: dict[str, Any],
                          key: str, reservation: Reservation, sent: list[bool],
                          after_settle: list[Callable[[], None]]) -> tuple[LLMResponse, bool]:
        """Queue one request for its provider batch and wait for its answer."""
        batcher = self._batcher(settings)
        journal = self.ledger.journal
        future: asyncio.Future[tuple[LLMResponse, bool]] = asyncio.get_running_loop().create_future()
        item = BatchItem(key[:64], key, request, future, spend_store=_store_id(journal),
                         spend_entry=reservation.journal_entry, tokens=reservation.tokens, pico=reservation.pico)
        started = time.perf_counter()
        model = route.wire_model
        if protocol.name == "anthropic" and route.transport == "litellm" and model.startswith("anthropic/"):
            model = model.removeprefix("anthropic/")  # litellm's name for it; the API wants the bare one
        batcher.add(protocol, model, item)
        sent.append(True)
        try:
            response, has_usage = await future
        except LLMError:
            self.stats.failures += 1
            raise
        response.latency_s = time.perf_counter() - started
        after_settle.append(lambda: batcher.journal.settled(item.batch_id, item.custom_id))
        return response, has_usage

    async def _complete_resumed(self, settings: BatchSettings, found: Resumed, protocol: Protocol,
                                price: tuple[float, float] | None) -> LLMResponse:
        """Answer a request from an earlier session's batch; its spend was reserved (and journaled)
        then: settle that entry now instead of reserving again."""
        batcher = self._batcher(settings)
        self.stats.batch_resumed += 1
        started = time.perf_counter()
        try:
            response, has_usage = await batcher.resume(found, protocol.api_key, protocol.extra_headers)
        except LLMError:
            self.stats.failures += 1
            self._settle_earlier(batcher, found, 0, 0)  # a failed batch request is not billed
            raise
        cost = None
        if price is not None:
            cost = response.usage.prompt_tokens * price[0] + response.usage.completion_tokens * price[1]
        tokens = response.usage.prompt_tokens + response.usage.completion_tokens
        if has_usage:
            self._settle_earlier(batcher, found, tokens, to_pico(cost) if cost is not None else 0)
        else:
            self.stats.usage_missing += 1
            self._settle_earlier(batcher, found, found.tokens, found.pico)
        response.usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens, cost, 1)
        response.latency_s = time.perf_counter() - started
        self._count(response.usage, cost)
        return response

    def _count(self, usage: Usage, cost: float | None) -> None:
        """Add a settled response's tokens and cost (or its unknown price) to the client's stats."""
        self.stats.prompt_tokens += usage.prompt_tokens
        self.stats.completion_tokens += usage.completion_tokens
        if cost is None:
            self.stats.cost_unknown += 1
        else:
            self.stats.cost_usd += cost

    def _settle_earlier(self, batcher: Batcher, found: Resumed, tokens: int, pico: int) -> None:
        if found.settled:  # an earlier session settled it already: it is in the run's spend as it is
            return
        journal = self.ledger.journal
        same = journal is not None and found.spend_entry is not None and found.spend_store is not None \
            and found.spend_store == _store_id(journal)
        if same:  # counted at its worst case when this session started: settle, give back the rest
            assert journal is not None and found.spend_entry is not None
            journal.settle_spend(found.spend_entry, tokens, pico)
            refund = getattr(self.ledger, "refund", None)
            if refund is not None:
                refund(found.tokens - tokens, found.pico - pico)
        else:  # this session never counted it
            self.ledger.charge(tokens, pico / PICO)
        batcher.journal.settled(found.batch_id, found.custom_id)

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
        if state is not None:
            batchers, state.batchers = state.batchers, {}
            for batcher in batchers.values():
                await batcher.aclose()

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


def _store_id(journal: Any) -> str | None:
    """Which spend journal an entry id belongs to (the run store's file)."""
    path = getattr(journal, "path", None)
    return str(path) if path is not None else None


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
        llm_settings = getattr(getattr(run, "spec", None), "llm", None)  # a spec's `llm: {batch: ...}`
        if options.get("batch") is None and getattr(llm_settings, "batch", None) is not None:
            options["batch"] = llm_settings.batch  # type: ignore[union-attr]
        run_dir = getattr(run, "run_dir", None)
        if run_dir is not None:  # batch ids live with the run, so a resume finds them
            options.setdefault("batch_journal", Path(run_dir) / "llm-batches.sqlite")
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
