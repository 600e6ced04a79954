"""Secrets never reach the disk: one redaction for everything the kernel writes (stored specs,
results, cache keys, logs, error messages)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"

_SECRET_KEY = re.compile(
    r"api[_-]?key|apikey|secret|password|passwd|authorization|credential|private[_-]?key|access[_-]?key"
    r"|session[_-]?key|bearer|(^|[_-])token$|^token$",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{8,}|\bgsk_[A-Za-z0-9]{8,}|\bhf_[A-Za-z0-9]{8,}|\bxai-[A-Za-z0-9]{8,}"
    r"|\bAIza[0-9A-Za-z_\-]{20,}|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}|(?<=Bearer )[A-Za-z0-9._~+/=\-]{6,}"
)
_SECRET_ENV = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_PASSWORD|_ACCESS_KEY)$|^(API_KEY|TOKEN)$")
_MIN_SECRET = 6  # shorter values are not masked inside text: too many false hits


def is_secret_key(key: str) -> bool:
    """``api_key``, ``OPENAI_API_KEY``, ``token``, ``access_token``, ``client_secret``, ``password``,
    ``Authorization`` ... but not ``key``, ``max_tokens``, ``tokens`` or ``api_key_env`` (the *name*
    of an environment variable)."""
    lowered = key.lower().replace("-", "_")
    if lowered.endswith(("_env", "_tokens")) or lowered in ("tokens", "token_budget"):
        return False
    return bool(_SECRET_KEY.search(key))


def env_secrets() -> list[str]:
    """Values of ``*_API_KEY``/``*_TOKEN``-like environment variables, longest first."""
    found = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= _MIN_SECRET}
    return sorted(found, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the given secrets, secret environment values and key-shaped strings
    (``sk-…``, ``AKIA…``, ``ghp_…``, ``Bearer …``) replaced by ``<redacted>``."""
    for secret in sorted({*secrets, *env_secrets()}, key=len, reverse=True):
        if len(secret) >= _MIN_SECRET:
            text = text.replace(secret, REDACTED)
    return _SECRET_VALUE.sub(REDACTED, text)


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of plain data (dicts, lists, strings) with secrets masked: values under secret-named
    keys, and in every string what :func:`redact_text` masks. The input is not changed."""
    known = [s for s in {*secrets, *env_secrets()} if len(s) >= _MIN_SECRET]

    def walk(item: Any) -> Any:
        if isinstance(item, Mapping):
            return {
                k: REDACTED if isinstance(k, str) and is_secret_key(k) and item_is_secret(v) else walk(v)
                for k, v in item.items()
            }
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        if isinstance(item, str):
            return redact_text(item, known)
        return item

    return walk(value)


def item_is_secret(value: Any) -> bool:
    """A value under a secret-named key is masked unless it is empty or a number/flag."""
    return value not in (None, "") and not isinstance(value, (bool, int, float))


def has_redacted(value: Any) -> bool:
    """Whether plain data carries a ``<redacted>`` placeholder (it cannot be run as is)."""
    if isinstance(value, Mapping):
        return any(has_redacted(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_redacted(v) for v in value)
    return isinstance(value, str) and REDACTED in value
