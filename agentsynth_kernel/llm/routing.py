"""Which transport and endpoint a model string goes to."""

from __future__ import annotations

import attrs

from ..errors import AgentsynthError

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
    from ..plugins import get_host

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

