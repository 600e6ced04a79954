"""The one LLM client of agentsynth: every model call in the project goes through here.

Policies, judges and generators share one interface::

    from agentsynth_kernel.llm import LLMClient

    client = LLMClient(model="openai/gpt-4o-mini", budget_usd=2.0)
    response = await client.complete([{"role": "user", "content": "hi"}], tools=[...])
    response.content, response.tool_calls, response.usage, client.stats

Inside a run, use the run-scoped client (it enforces the run's ``budget:``)::

    def my_factory(..., run=None):
        client = client_for(run)   # run.services["llm"], created on first use

What it does for every request:

- **Two transports, one interface.** OpenAI-compatible endpoints (``openai/...``, a bare model
  name, ``hosted_vllm/``, ``ollama/``, ``openrouter/``, ``groq/``, ... or any model with an
  ``api_base``) take a direct fast path: one pooled aiohttp session (HTTP/1.1 keep-alive; httpx
  as a fallback) and msgspec for JSON. Every other provider (``anthropic/``, ``gemini/``,
  ``bedrock/`` ...) goes through ``litellm.acompletion``, imported lazily on first use only
  (with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it never fetches at import). ``transport=``
  forces one or the other. Nothing here imports aiohttp, httpx or litellm until a request is made.
- **Cache** (content-addressed, on disk, opt-out): sha256 over the request (model, messages,
  tools, sampling parameters, ``cache_salt``) -> the normalized response. API keys and the
  endpoint are never part of the key. A hit costs nothing and sends nothing.
- **Retries** with exponential backoff and jitter on 429, 5xx, timeouts, dropped connections
  and malformed bodies (``Retry-After`` is honoured, capped). Every retry is counted in
  :attr:`LLMClient.stats`. After the last attempt an :class:`LLMError` is raised; it carries
  ``agentsynth_error_kind = "provider"`` so the engine records a provider failure.
- **Limits**: at most ``concurrency`` requests in flight and ``rpm`` requests per minute.
- **Metering**: tokens as the provider reports them; cost from litellm's bundled price table
  (read as a JSON file, without importing litellm) or your ``prices``; an unknown model's cost
  is ``None`` ("unknown"), never a made-up 0.
- **Hard budget** in USD and/or tokens: before a request is sent, an upper bound of what it can
  cost is *reserved* (prompt bytes bound the prompt tokens; ``max_tokens`` bounds the answer and
  is sent to the provider, shrunk to what the budget has left); after it returns, the real usage
  is *settled*. So the cap holds with any number of requests in flight. When the budget cannot
  cover a request, :class:`~agentsynth_kernel.errors.BudgetExceeded` is raised and the engine
  stops the run cleanly (the episode is not stored, so a resume with a larger budget re-runs it).
  A USD budget with a model of unknown price raises :class:`BudgetUnenforceable` (a
  BudgetExceeded) rather than spend money it cannot count.

  In a run, what earlier sessions of a resumed run spent (``run.spent``) counts too. A request
  cancelled after it was sent is charged its whole reservation (it may have been processed).

Secrets: keys come from the environment (``OPENAI_API_KEY``, ``api_key_env=``) or are passed
in; they never reach cache keys, logs or error messages (a replay from the cache needs no key at
all). :func:`redact_secrets` masks them in any data written to disk.

One client may be used from several event loops (``complete_sync`` in a script, a sync component
on a worker thread): connection pools, the concurrency limit and the rate limit are per loop;
cache, budget and stats are shared.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import math
import os
import random
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
import msgspec

from .errors import AgentsynthError, BudgetExceeded
from .records import ToolSpec, Usage
from .secrets import redact, redact_bytes, redact_text, remember

__all__ = [
    "BudgetExceeded", "BudgetLedger", "BudgetUnenforceable", "LLMClient", "LLMError", "LLMResponse", "LLMStats",
    "LLMToolCall", "Route", "client_for", "completion_cap_param", "default_cache_dir", "price_for", "redact_secrets", "redact_text",
    "resolve_route",
]

# --- errors ---------------------------------------------------------------------------------------


class LLMError(AgentsynthError):
    """A request failed for good (after retries, or a non-retryable 4xx).

    ``agentsynth_error_kind = "provider"`` tells the engine who failed; ``status`` is the last HTTP
    status (None for timeouts and connection errors), ``attempts`` how many times it was sent.
    """

    agentsynth_error_kind = "provider"

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 0, reason: str = "",
                 model: str = "") -> None:
        super().__init__(message)
        self.status, self.attempts, self.reason, self.model = status, attempts, reason, model


class BudgetUnenforceable(BudgetExceeded):
    """A USD budget is set but the model's price is unknown, so the cap could not be kept."""


# --- records --------------------------------------------------------------------------------------


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

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


# --- secrets --------------------------------------------------------------------------------------

# one redaction for the whole kernel (agentsynth_kernel.secrets); these are its names here
redact_secrets = redact


# --- routing --------------------------------------------------------------------------------------

# provider prefix -> (default api_base or None = must be given, environment variable with the key)
OPENAI_COMPATIBLE: dict[str, tuple[str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "hosted_vllm": (None, "HOSTED_VLLM_API_KEY"),
    "vllm": (None, "VLLM_API_KEY"),
    "openai_like": (None, None),
    "custom_openai": (None, None),
    "ollama": ("http://localhost:11434/v1", None),
    "ollama_chat": ("http://localhost:11434/v1", None),
    "lm_studio": ("http://localhost:1234/v1", "LM_STUDIO_API_KEY"),
    "llamacpp": ("http://localhost:8080/v1", None),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "together_ai": ("https://api.together.xyz/v1", "TOGETHERAI_API_KEY"),
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "fireworks_ai": ("https://api.fireworks.ai/inference/v1", "FIREWORKS_AI_API_KEY"),
    "mistral": ("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    "xai": ("https://api.x.ai/v1", "XAI_API_KEY"),
}


@attrs.frozen
class Route:
    """Where a model string goes: ``transport`` is ``openai`` (fast path) or ``litellm``."""

    model: str  # as given (cache key, price lookup)
    transport: str
    provider: str
    wire_model: str  # what the fast path sends as "model"
    api_base: str | None
    key_env: str | None


def resolve_route(model: str, api_base: str | None = None, transport: str = "auto") -> Route:
    """Decide how ``model`` is reached.

    ``provider/name`` with an OpenAI-compatible provider, a bare ``name`` (OpenAI), or any model
    with an ``api_base`` whose prefix is not one litellm must translate -> the fast path. Known
    non-OpenAI providers (``anthropic/``, ``gemini/``, ...) -> litellm. ``transport="openai"`` or
    ``"litellm"`` overrides the choice.

    ``local`` and ``local/NAME`` are asked of the plugins (hook ``local_model_endpoint``;
    agentsynth-local starts an embedded model on first use) and go the fast path. Their
    ``Route.model`` is ``local/<served model>``, so the cache never replays one local model's
    answers for another.
    """
    if transport not in ("auto", "openai", "litellm"):
        raise ValueError(f"transport must be 'auto', 'openai' or 'litellm', got {transport!r}")
    provider, sep, rest = model.partition("/")
    if provider == "local":
        return _local_route(model, api_base)
    if not sep:
        provider, rest = "openai", model
    known = OPENAI_COMPATIBLE.get(provider)
    if transport == "litellm" or (transport == "auto" and known is None and not (api_base and sep and provider not in
                                                                                  LITELLM_PROVIDERS)):
        return Route(model, "litellm", provider, model, api_base, None)
    if known is not None:
        base, key_env = api_base or known[0], known[1]
        wire = rest
    else:  # an api_base serving e.g. "meta-llama/Llama-3.1-8B": send the name as is
        base, key_env, wire = api_base, None, model
    if not base:
        raise AgentsynthError(f"model {model!r}: provider {provider!r} needs an api_base (e.g. http://localhost:8000/v1)")
    return Route(model, "openai", provider, wire, base.rstrip("/"), key_env)


def _local_route(model: str, api_base: str | None) -> Route:
    """``local[/NAME]``: an explicit ``api_base`` wins; otherwise the plugin that serves local models."""
    if api_base:
        wire = model.partition("/")[2] or "local"
        return Route(f"local/{wire}", "openai", "local", wire, api_base.rstrip("/"), None)
    from .plugins import get_host

    answer = get_host().pm.hook.local_model_endpoint(model=model)
    if answer is None:
        raise AgentsynthError(f"model {model!r}: no plugin serves local models; install agentsynth-local "
                              "(pip install agentsynth-local) or give an api_base")
    base, wire = answer
    return Route(f"local/{wire}", "openai", "local", wire, base.rstrip("/"), None)


def completion_cap_param(route: Route) -> str:
    """The request field that caps the answer: OpenAI's own API wants ``max_completion_tokens`` (its
    o-series reject ``max_tokens``); other OpenAI-compatible servers and litellm take ``max_tokens``."""
    if route.transport == "openai" and "api.openai.com" in (route.api_base or ""):
        return "max_completion_tokens"
    return "max_tokens"


# Providers litellm translates to their own APIs (never the fast path in "auto" mode).
LITELLM_PROVIDERS = frozenset({
    "anthropic", "gemini", "vertex_ai", "vertex_ai_beta", "bedrock", "bedrock_converse", "sagemaker", "azure",
    "azure_ai", "cohere", "cohere_chat", "huggingface", "replicate", "databricks", "watsonx", "cloudflare",
    "ai21", "nlp_cloud", "aleph_alpha", "baseten", "predibase", "clarifai", "triton", "palm", "text-completion-openai",
    "perplexity", "anyscale", "voyage", "snowflake", "github", "nvidia_nim", "cerebras", "sambanova",
})


# --- prices ---------------------------------------------------------------------------------------

_PRICE_TABLE: dict[str, Any] | None = None


def _price_table() -> dict[str, Any]:
    """litellm's bundled price map, read as JSON from its package directory (litellm not imported)."""
    global _PRICE_TABLE
    if _PRICE_TABLE is None:
        table: dict[str, Any] = {}
        try:
            spec = importlib.util.find_spec("litellm")
            locations = list(spec.submodule_search_locations or []) if spec else []
            for location in locations:
                path = Path(location) / "model_prices_and_context_window_backup.json"
                if path.is_file():
                    table = msgspec.json.decode(path.read_bytes())
                    break
        except (ImportError, ValueError, OSError, msgspec.DecodeError):
            table = {}
        _PRICE_TABLE = table
    return _PRICE_TABLE


def price_for(model: str, prices: Mapping[str, Any] | None = None) -> tuple[float, float] | None:
    """USD per (prompt token, completion token) for ``model``, or None if unknown.

    ``prices`` (``{model: (input_per_token, output_per_token)}`` or ``{model: {"input": ...,
    "output": ...}}``) wins over litellm's table, which is looked up as ``provider/name``, then
    ``name``. A ``local`` model (served on this machine) costs nothing.
    """
    provider, sep, rest = model.partition("/")
    if provider == "local" and not (prices and model in prices):
        return 0.0, 0.0
    candidates = [model] + ([rest] if sep else [])
    for name in candidates:
        if prices and name in prices:
            entry = prices[name]
            if isinstance(entry, Mapping):
                return float(entry.get("input", 0.0)), float(entry.get("output", 0.0))
            return float(entry[0]), float(entry[1])
    table = _price_table()
    for name in candidates:
        entry = table.get(name)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
    return None


# --- budget ---------------------------------------------------------------------------------------


PICO = 10**12  # the ledger counts money in integer pico-dollars: sums of floats drift (1.9e-17 left
# "reserved" once deadlocked a run), integers do not


def to_pico(usd: float) -> int:
    return round(usd * PICO)


@attrs.define
class Reservation:
    tokens: int = 0
    pico: int = 0  # the worst-case cost reserved, in pico-dollars
    completion_allowance: int | None = None
    journal_entry: int | None = None  # its row in the run's spend journal


class SpendJournal(Protocol):
    """Where a ledger writes each reservation before the request leaves (the run store)."""

    def reserve_spend(self, tokens: int, pico: int) -> int: ...

    def settle_spend(self, entry: int, tokens: int, pico: int) -> None: ...


class BudgetLedger:
    """A hard cap in USD and/or tokens, safe with many requests in flight.

    ``reserve`` waits while the worst case of a request does not fit next to what is spent and
    reserved *and* something is in flight that may free room; it raises BudgetExceeded when the
    request could never fit, or when nothing in flight could make it fit (never waits forever).
    ``settle`` replaces the reservation with what the request really cost. Money is kept in
    integer pico-dollars, so ``spent + reserved <= cap`` holds exactly, and as long as a request
    costs no more than its reservation the cap is never exceeded.
    """

    def __init__(self, usd: float | None = None, tokens: int | None = None) -> None:
        if usd is not None and not (usd >= 0 and math.isfinite(usd)) or tokens is not None and tokens < 0:
            raise ValueError("budget must be a finite, non-negative amount")
        self.usd_cap, self.token_cap = usd, tokens
        self.cap_pico = to_pico(usd) if usd is not None else None
        self.spent_pico, self.spent_tokens = 0, 0
        self.reserved_pico, self.reserved_tokens = 0, 0
        self.in_flight = 0
        self.overruns = 0  # settlements that cost more than reserved (should stay 0)
        self._lock = threading.Lock()  # a client may serve several event loops (threads)
        self._changed: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = weakref.WeakKeyDictionary()
        self.journal: SpendJournal | None = None  # set by the run: reservations survive a kill -9

    @property
    def spent_usd(self) -> float:
        return self.spent_pico / PICO

    @property
    def reserved_usd(self) -> float:
        return self.reserved_pico / PICO

    @property
    def limited(self) -> bool:
        return self.usd_cap is not None or self.token_cap is not None

    def _fit(self, prompt: int, price: tuple[int, int] | None, spent_pico: int, spent_tokens: int) -> int | None:
        """The most completion tokens that fit after what is spent; None when uncapped, < 0 when
        not even the prompt fits. ``price`` is pico-dollars per (prompt, completion) token."""
        best: int | None = None
        if self.token_cap is not None:
            best = self.token_cap - spent_tokens - prompt
        if self.cap_pico is not None and price is not None:
            pin, pout = price
            left = self.cap_pico - spent_pico - prompt * pin
            by_money = (left // pout if pout > 0 else (10**18 if left >= 0 else -1))
            best = by_money if best is None else min(best, by_money)
        return best

    def describe(self) -> str:
        parts = []
        if self.usd_cap is not None:
            parts.append(f"${self.spent_usd:.4f} of ${self.usd_cap:g} spent")
        if self.token_cap is not None:
            parts.append(f"{self.spent_tokens} of {self.token_cap} tokens spent")
        return ", ".join(parts) or "no budget"

    async def reserve(self, prompt_tokens: int, max_completion: int, price: tuple[float, float] | None,
                      min_completion: int = 32, model: str = "") -> Reservation:
        """Reserve the worst case of one request; returns how many completion tokens it may use."""
        if not self.limited:
            self.in_flight += 1
            return Reservation(completion_allowance=None)
        if self.usd_cap is not None and price is None:
            raise BudgetUnenforceable(
                f"budget.usd is set but the price of model {model!r} is unknown; give prices= (USD per token) "
                "or use a token budget"
            )
        exact = (to_pico(price[0]), to_pico(price[1])) if price is not None else None
        need = min(max_completion, min_completion)
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                alone = self._fit(prompt_tokens, exact, self.spent_pico, self.spent_tokens)
                assert alone is not None  # limited
                now = self._fit(prompt_tokens, exact, self.spent_pico + self.reserved_pico,
                                self.spent_tokens + self.reserved_tokens)
                assert now is not None
                if alone < need or (now < need and self.in_flight == 0):
                    raise BudgetExceeded(
                        f"budget reached: {self.describe()}; a request to {model or 'the model'} needs up to "
                        f"{prompt_tokens} prompt + {need} completion tokens"
                    )
                want = min(max_completion, alone)
                if now >= want or (now >= need and self.in_flight == 0):
                    allowance = min(want, now)
                    pico = prompt_tokens * exact[0] + allowance * exact[1] if exact is not None else 0
                    res = Reservation(prompt_tokens + allowance, pico, allowance)
                    self.reserved_tokens += res.tokens
                    self.reserved_pico += res.pico
                    self.in_flight += 1
                    if self.journal is not None:
                        res.journal_entry = self.journal.reserve_spend(res.tokens, res.pico)
                    return res
                changed = self._changed.get(loop)
                if changed is None:
                    changed = self._changed[loop] = asyncio.Event()
                changed.clear()
            await changed.wait()

    def settle(self, res: Reservation, tokens: int, usd: float | None) -> None:
        """Replace a reservation by the real spend (``usd=None``: unknown, charge the reservation)."""
        with self._lock:
            self.in_flight -= 1
            self.reserved_tokens -= res.tokens
            self.reserved_pico -= res.pico
            cost = res.pico if usd is None else to_pico(usd)
            self.spent_tokens += tokens
            self.spent_pico += cost
            if self.journal is not None and res.journal_entry is not None:
                self.journal.settle_spend(res.journal_entry, tokens, cost)
            if self.limited and res.completion_allowance is not None and (tokens > res.tokens or cost > res.pico):
                self.overruns += 1
            waiting = list(self._changed.items())
        if not waiting:
            return
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, event in waiting:
            if loop is current:
                event.set()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    def charge(self, tokens: int = 0, usd: float = 0.0) -> None:
        """Count spend made elsewhere (e.g. by an earlier, resumed part of the run)."""
        with self._lock:
            self.spent_tokens += tokens
            self.spent_pico += to_pico(usd)


# --- cache ----------------------------------------------------------------------------------------

_response_encoder = msgspec.json.Encoder()
_response_decoder = msgspec.json.Decoder(LLMResponse)
_key_encoder = msgspec.json.Encoder(order="sorted")


def default_cache_dir() -> Path | None:
    """``$AGENTSYNTH_LLM_CACHE`` (``off`` disables), else ``~/.cache/agentsynth/llm``."""
    value = os.environ.get("AGENTSYNTH_LLM_CACHE")
    if value is not None:
        return None if value.strip().lower() in ("", "0", "off", "false", "no") else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentsynth" / "llm"


class ResponseCache:
    """request hash -> normalized response, one JSON file per entry (written atomically)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> LLMResponse | None:
        try:
            return _response_decoder.decode(self._path(key).read_bytes())
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def put(self, key: str, response: LLMResponse) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{random.getrandbits(32):08x}.tmp")
            tmp.write_bytes(redact_bytes(_response_encoder.encode(response)))
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot write is only a slower cache


# --- wire format (fast path) ----------------------------------------------------------------------


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


class _WResponse(msgspec.Struct):
    choices: list[_WChoice]
    usage: _WUsage | None = None
    model: str | None = ""


_wire_decoder = msgspec.json.Decoder(_WResponse)
_json_encoder = msgspec.json.Encoder()


class _Malformed(Exception):
    pass


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _normalize(wire: _WResponse) -> tuple[LLMResponse, bool]:
    """(response without cost, usage present?)"""
    if not wire.choices:
        raise _Malformed("no choices")
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
        content=_text(choice.message.content), tool_calls=calls, finish_reason=choice.finish_reason or "",
        model=wire.model or "", usage=Usage(prompt, completion, None, 1),
    )
    return response, has_usage


# --- transports -----------------------------------------------------------------------------------


class _Retryable(Exception):
    def __init__(self, reason: str, detail: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(detail)
        self.reason, self.detail, self.status, self.retry_after = reason, detail, status, retry_after


class _Fatal(Exception):
    def __init__(self, detail: str, status: int | None = None):
        super().__init__(detail)
        self.detail, self.status = detail, status


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _snippet(body: bytes | str, limit: int = 300) -> str:
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


class _FastTransport:
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
        self._guard: Any = None
        if backend not in ("auto", "aiohttp", "httpx"):
            raise ValueError(f"http backend must be 'auto', 'aiohttp' or 'httpx', got {backend!r}")
        self.backend = backend  # resolved to aiohttp or httpx on first use
        self._aiohttp: Any = None
        # proxies from the environment only when some are set (looking them up costs a thread hop per request)
        self.trust_env = any(k.lower() in ("http_proxy", "https_proxy", "all_proxy") for k in os.environ)

    async def _resolve_backend(self) -> None:
        if self.backend in ("auto", "aiohttp"):
            try:
                self._aiohttp = await _import_off_loop("aiohttp")
                self.backend = "aiohttp"
                return
            except ImportError:
                if self.backend == "aiohttp":
                    raise
        await _import_off_loop("httpx")
        self.backend = "httpx"

    async def _closer(self) -> Any:
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
        if self.backend == "auto" or (self.backend == "aiohttp" and self._aiohttp is None):
            await self._resolve_backend()
        if self.backend == "aiohttp":
            code, content, retry_after = await self._post_aiohttp(url, body, headers)
        else:
            code, content, retry_after = await self._post_httpx(url, body, headers)
        if code == 200:
            try:
                return _normalize(_wire_decoder.decode(content))
            except (msgspec.DecodeError, msgspec.ValidationError, _Malformed) as exc:
                raise _Retryable("malformed", f"malformed response body ({exc}): {_snippet(content, 120)}",
                                 200) from None
        detail = f"HTTP {code}: {_snippet(content)}"
        if code == 429 or code >= 500 or code == 408:
            raise _Retryable(str(code), detail, code, _retry_after(retry_after))
        raise _Fatal(detail, code)

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
            raise _Retryable("timeout", f"no response within {self.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise _Retryable("connection", f"connection error ({type(exc).__name__}: {exc})") from None

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
            raise _Retryable("timeout", f"timed out ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise _Retryable("connection", f"connection error ({type(exc).__name__}: {exc})") from None
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


_LITELLM: Any = None
_IMPORTED: dict[str, Any] = {}


async def _import_off_loop(name: str) -> Any:
    """Import a heavy module on a worker thread the first time (aiohttp takes 1-2 s to import on a
    busy machine; litellm several), so other episodes keep running meanwhile."""
    module = _IMPORTED.get(name)
    if module is None:
        module = _IMPORTED[name] = await asyncio.to_thread(importlib.import_module, name)
    return module


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


class _LiteLLMTransport:
    def __init__(self, *, timeout: float) -> None:
        self.timeout = timeout

    async def send(self, route: Route, request: dict[str, Any], api_key: str | None) -> tuple[LLMResponse, bool]:
        litellm = _LITELLM if _LITELLM is not None else await asyncio.to_thread(_import_litellm)
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
                raise _Retryable("timeout", detail) from None
            if status == 429 or "RateLimit" in name:
                raise _Retryable("429", detail, 429) from None
            if isinstance(status, int) and status >= 500 or "ServiceUnavailable" in name or "InternalServer" in name:
                raise _Retryable(str(status or 500), detail, status) from None
            if "APIConnection" in name or "Connection" in name:
                raise _Retryable("connection", detail) from None
            if "JSONDecode" in name or "APIResponseValidation" in name:
                raise _Retryable("malformed", detail) from None
            if isinstance(status, int):
                raise _Fatal(detail, status) from None
            raise _Retryable("error", detail) from None
        try:
            data = result.model_dump() if hasattr(result, "model_dump") else dict(result)
            return _normalize(msgspec.convert(data, _WResponse, strict=False))
        except (msgspec.ValidationError, _Malformed, TypeError) as exc:
            raise _Retryable("malformed", f"malformed response ({exc})") from None

    async def aclose(self) -> None:
        return None


# --- rate limit -----------------------------------------------------------------------------------


class _RateLimiter:
    """Spaces request starts ``60/rpm`` seconds apart."""

    def __init__(self, rpm: float) -> None:
        self.interval = 60.0 / rpm
        self.next = 0.0

    async def acquire(self) -> None:
        now = time.monotonic()
        at = max(now, self.next)
        self.next = at + self.interval
        if at > now:
            await asyncio.sleep(at - now)


# --- the client -----------------------------------------------------------------------------------

@attrs.define
class _LoopState:
    sem: asyncio.Semaphore
    limiter: _RateLimiter | None
    fast: _FastTransport | None = None


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
        self._litellm: _LiteLLMTransport | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"LLMClient(model={self.model!r}, api_base={self.api_base!r}, budget={self.ledger.describe()!r})"

    # --- plumbing -------------------------------------------------------------------------------

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            limiter = _RateLimiter(self.rpm) if self.rpm else None
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
        size = len(_json_encoder.encode(body.get("messages", []))) + len(_json_encoder.encode(body.get("tools") or []))
        overhead = 16 + 8 * len(body.get("messages", [])) + 16 * len(body.get("tools") or [])
        return int(size / self.prompt_bytes_per_token) + overhead

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        ceiling = min(self.backoff_max, self.backoff_base * (2 ** attempt))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def cache_key(self, request: Mapping[str, Any], route: Route, cache_salt: str | None = None) -> str:
        """The content address of a request: model, messages, tools, parameters and salt.

        Neither credentials nor the endpoint are part of it (a local server on a new port still
        replays); the model name is the identity, so use ``cache_salt`` to tell apart two
        different models served under one name.
        """
        material = {"v": 1, "model": route.model, "request": request, "salt": cache_salt}
        return hashlib.sha256(_key_encoder.encode(material)).hexdigest()

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
                state.fast = _FastTransport(max_connections=self.concurrency, timeout=self.timeout,
                                            connect_timeout=self.connect_timeout, backend=self.http_backend)
            transport: Any = state.fast
            payload: Any = _json_encoder.encode({"model": route.wire_model, **request})
        else:
            if self._litellm is None:
                self._litellm = _LiteLLMTransport(timeout=self.timeout)
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
            except _Fatal as exc:
                self.stats.failures += 1
                raise LLMError(
                    redact_text(f"{route.model}: request rejected: {exc.detail}", secrets),
                    status=exc.status, attempts=attempt, reason="rejected", model=route.model,
                ) from None
            except _Retryable as exc:
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
    client = services.get(SERVICE_KEY)
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
