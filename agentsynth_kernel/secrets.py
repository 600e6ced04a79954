"""Secrets never reach the disk: one redaction for everything the kernel writes (stored specs,
results, cache keys, logs, error messages).

Patterns (``sk-…``, ``Bearer …``) catch key-shaped strings; the secrets the process *knows* are
masked by value wherever they appear, even when a model echoes them back inside an answer:
values of secret environment variables, values under secret-named spec keys (``api_key``),
passwords in URLs (``https://user:pass@host``), and whatever a component hands to
:func:`remember` (an API key it was given, a header marked secret).
"""

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
# every key shape _SECRET_VALUE matches contains one of these: text without them needs no regex
_KEY_MARKERS = ("sk-", "gsk_", "hf_", "xai-", "AIza", "AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "Bearer ")
_SECRET_ENV = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_PASSWORD|_ACCESS_KEY)$|^(API_KEY|TOKEN)$")
_MIN_SECRET = 6  # shorter values are not masked inside text: too many false hits
_URL_USERINFO = re.compile(r"(?<=://)([^/\s:@]+):([^/\s@]+)@")
_URL_USERINFO_BYTES = re.compile(rb'(?<=://)([^/\s:@"]+):([^/\s@"]+)@')
_known: set[str] = set()  # secrets handed to remember(); only grows
_known_bytes: tuple[bytes, ...] = ()  # the same, encoded, longest first: what redact_bytes scans for


def remember(*values: str | None) -> None:
    """Mask these values by value in everything written from now on (e.g. an API key given in a
    spec, a secret header). Values shorter than 6 characters are ignored."""
    global _known_bytes
    new = {v for v in values if isinstance(v, str) and len(v) >= _MIN_SECRET} - _known
    if new:
        _known.update(new)
        _known_bytes = tuple(v.encode() for v in sorted(_known, key=len, reverse=True))


def remember_environment() -> None:
    """Remember the values of secret environment variables (a run does this when it starts, so the
    hot path masks by value without scanning the environment per record)."""
    remember(*env_secrets())


def known_secrets() -> tuple[str, ...]:
    """Every value :func:`redact_text` masks by value right now (remembered secrets and secret
    environment values, 6 characters or more), longest first: what a fast pre-check on encoded output
    (agentsynth-export's scrub screen) must search for to stay exactly as strong as ``redact_text``."""
    return tuple(_by_value())


def _by_value(extra: Iterable[str] = ()) -> list[str]:
    """The values masked by value (``extra``, remembered, from the environment; 6 characters or
    more), longest first: one definition for :func:`redact_text` and :func:`known_secrets`."""
    return sorted((s for s in {*extra, *_known, *env_secrets()} if len(s) >= _MIN_SECRET), key=len, reverse=True)


def redact_bytes(data: bytes) -> bytes:
    """Encoded output (a stored result, a cached response) with every remembered secret masked by
    value: a cheap ``in`` test per secret, so it can run on every record."""
    for raw in _known_bytes:
        if raw in data:
            data = data.replace(raw, REDACTED.encode())
    if b"://" in data and b"@" in data:
        data = _URL_USERINFO_BYTES.sub(rb"\1:" + REDACTED.encode() + rb"@", data)
    return data


def is_secret_key(key: str) -> bool:
    """``api_key``, ``OPENAI_API_KEY``, ``token``, ``access_token``, ``client_secret``, ``password``,
    ``Authorization`` ... but not ``key``, ``max_tokens``, ``tokens`` or ``api_key_env`` (the *name*
    of an environment variable)."""
    lowered = key.lower().replace("-", "_")
    if lowered.endswith(("_env", "_tokens")) or lowered in ("tokens", "token_budget"):
        return False
    return bool(_SECRET_KEY.search(key))


_env_cache: tuple[int, list[str]] = (0, [])


def env_secrets() -> list[str]:
    """Values of ``*_API_KEY``/``*_TOKEN``-like environment variables, longest first (recomputed only
    when the environment changed: this runs for every string an exporter writes)."""
    global _env_cache
    raw = getattr(os.environ, "_data", None)  # CPython's bytes mapping: hashing it costs ~2 us, items() ~80
    fingerprint = hash(tuple(raw.items())) if isinstance(raw, dict) else hash(frozenset(os.environ.items()))
    if _env_cache[0] != fingerprint:
        found = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= _MIN_SECRET}
        _env_cache = (fingerprint, sorted(found, key=len, reverse=True))
    return _env_cache[1]


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the given secrets, secret environment values and key-shaped strings
    (``sk-…``, ``AKIA…``, ``ghp_…``, ``Bearer …``) replaced by ``<redacted>``."""
    for secret in _by_value(secrets):
        text = text.replace(secret, REDACTED)
    if "://" in text and "@" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)
    if not any(marker in text for marker in _KEY_MARKERS):  # a few C-speed scans instead of the regex
        return text
    return _SECRET_VALUE.sub(REDACTED, text)


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of plain data (dicts, lists, strings) with secrets masked: values under secret-named
    keys, and in every string what :func:`redact_text` masks. The input is not changed."""
    known = [s for s in {*secrets, *env_secrets()} if len(s) >= _MIN_SECRET]

    def walk(item: Any) -> Any:
        if isinstance(item, Mapping):
            out = {}
            for k, v in item.items():
                if isinstance(k, str) and is_secret_key(k) and item_is_secret(v):
                    if isinstance(v, str):
                        remember(v)  # masked here, and by value wherever it shows up later
                    out[k] = REDACTED
                else:
                    out[k] = walk(v)
            return out
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        if isinstance(item, str):
            for match in _URL_USERINFO.finditer(item):
                remember(match.group(2))
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
