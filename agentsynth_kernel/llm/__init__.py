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

The package has one module per concept: ``client`` (LLMClient, client_for), ``routing`` (which
transport), ``fast`` (the OpenAI-compatible HTTP path), ``via_litellm`` (every other provider),
``wire`` (the OpenAI wire format), ``records`` (responses, stats), ``cache``, ``budget`` (the
ledger), ``prices``, ``ratelimit``, ``errors``, ``batch`` (provider batch APIs, docs/llm-batch.md)
and ``anthropic_wire`` (Anthropic Messages for the batch path).
"""

from __future__ import annotations

from ..errors import BudgetExceeded
from ..secrets import redact, redact_text
from .batch import BatchSettings
from .budget import PICO, BudgetLedger, Reservation, SpendJournal, to_pico
from .cache import ResponseCache, default_cache_dir
from .client import LEDGER_KEY, SERVICE_KEY, LLMClient, client_for
from .errors import BudgetUnenforceable, LLMError
from .prices import price_for
from .records import LLMResponse, LLMStats, LLMToolCall
from .routing import LITELLM_PROVIDERS, OPENAI_COMPATIBLE, Route, completion_cap_param, resolve_route

# one redaction for the whole kernel (agentsynth_kernel.secrets); these are its names here
redact_secrets = redact

__all__ = [
    "LEDGER_KEY", "LITELLM_PROVIDERS", "OPENAI_COMPATIBLE", "PICO", "SERVICE_KEY", "BatchSettings", "BudgetExceeded",
    "BudgetLedger",
    "BudgetUnenforceable", "LLMClient", "LLMError", "LLMResponse", "LLMStats", "LLMToolCall", "Reservation",
    "ResponseCache", "Route", "SpendJournal", "client_for", "completion_cap_param", "default_cache_dir", "price_for",
    "redact_secrets", "redact_text", "resolve_route", "to_pico",
]
