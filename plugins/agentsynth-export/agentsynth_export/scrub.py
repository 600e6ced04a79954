"""Secrets never reach a training export.

Every string of every record an exporter writes goes through the kernel's redaction
(:func:`agentsynth_kernel.secrets.redact_text`): the secrets the process knows (provider keys in the
environment, ...) by value, and key-shaped strings (``sk-…``, ``Bearer …``). Values under
secret-named keys (``api_key``, ``password``, ...) of free-form data (tool-call arguments,
observation data, metadata, provenance) are masked whole; tool JSON schemas are not, since a
property named ``password`` there is a name, not a secret.

The strings are redacted before any format renders them, so JSON escaping (``\\n`` before a key)
cannot hide a key from a pattern. They are redacted in batches: joined by NUL, which no key
pattern or secret spans, one ``redact_text`` call per batch over its distinct strings (a call scans
the environment and runs the key patterns; per string it would dominate the export). If a batch
comes back with a different number of parts, it is redone string by string.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

import msgspec

from agentsynth_kernel import REDACTED, EpisodeResult, is_secret_key, item_is_secret, redact_text

SEP = "\x00"
BATCH_CHARS = 1 << 20
BATCH_RECORDS = 256

Ref = tuple[Any, Any]  # (container, key or index) of one string


@lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    return is_secret_key(key)  # the same few keys recur in every record


def _collect(node: Any, refs: list[Ref], strings: list[str], stats: Counter[str], schema: bool = False,
             secret: bool = False) -> None:
    """Gather every string below ``node``; mask values under secret-named keys (not in tool schemas)."""
    if type(node) is dict:
        for key, value in node.items():  # assigning to an existing key while iterating is allowed
            kind = type(value)
            if kind is str:
                if not value:
                    continue
                if secret or (not schema and type(key) is str and _secret_key(key)):
                    node[key] = REDACTED
                    stats["secrets_redacted"] += 1
                else:
                    refs.append((node, key))
                    strings.append(value)
            elif kind is dict or kind is list:
                under = secret or (not schema and type(key) is str and _secret_key(key) and item_is_secret(value))
                _collect(value, refs, strings, stats, schema or key == "tools", under)
        return
    for index, value in enumerate(node):
        kind = type(value)
        if kind is str:
            if not value:
                continue
            if secret:
                node[index] = REDACTED
                stats["secrets_redacted"] += 1
            else:
                refs.append((node, index))
                strings.append(value)
        elif kind is dict or kind is list:
            _collect(value, refs, strings, stats, schema, secret)


def _strings(node: Any, out: list[str], schema: bool = False) -> bool:
    """Read-only: append every non-empty string below ``node`` (records, dicts, lists) to ``out``;
    True if a secret-named key holds a value (the record must then be rebuilt)."""
    if isinstance(node, msgspec.Struct):
        items: Iterable[tuple[Any, Any]] = ((f, getattr(node, f)) for f in node.__struct_fields__)
    elif type(node) is dict:
        items = node.items()
    else:
        items = enumerate(node)
    keyed = False
    for key, value in items:
        kind = type(value)
        if kind is str:
            if value:
                if not schema and type(key) is str and _secret_key(key):
                    keyed = True
                out.append(value)
        elif kind is dict or kind is list or kind is tuple or isinstance(value, msgspec.Struct):
            if not schema and type(key) is str and _secret_key(key) and item_is_secret(value):
                keyed = True
            keyed = _strings(value, out, schema or key == "tools") or keyed
    return keyed


def _redact_all(strings: list[str]) -> list[str]:
    joined = SEP.join(strings)
    if joined.count(SEP) == len(strings) - 1:
        parts = redact_text(joined).split(SEP)
        if len(parts) == len(strings):
            return parts
    return [redact_text(s) for s in strings]


def _rebuilt(result: EpisodeResult, changes: dict[str, str], stats: Counter[str]) -> EpisodeResult:
    """A copy of ``result`` with its strings replaced and values under secret-named keys masked."""
    data = msgspec.to_builtins(result)
    refs: list[Ref] = []
    strings: list[str] = []
    _collect(data, refs, strings, stats)
    for (node, key), old in zip(refs, strings, strict=True):
        new = changes.get(old)
        if new is not None:
            node[key] = new
            stats["secrets_redacted"] += 1
    return msgspec.convert(data, EpisodeResult)


def _flush(batch: list[tuple[EpisodeResult, int, bool]], strings: list[str],
           stats: Counter[str]) -> Iterator[EpisodeResult]:
    """Redact a batch's distinct strings (system prompts and tool schemas recur in every record) once;
    a record is rebuilt only if something in it changes, the others are passed on as they are."""
    unique = list(dict.fromkeys(strings))
    changes = {old: new for old, new in zip(unique, _redact_all(unique) if unique else [], strict=True) if old != new}
    start = 0
    for result, end, keyed in batch:
        if keyed or (changes and any(s in changes for s in strings[start:end])):
            result = _rebuilt(result, changes, stats)
        start = end
        yield result


def scrub_results(results: Iterable[EpisodeResult], stats: Counter[str]) -> Iterator[EpisodeResult]:
    """The records with every secret masked (``stats["secrets_redacted"]`` counts masked strings).
    The input records are never changed: a record with a secret is passed on as a new copy."""
    batch: list[tuple[EpisodeResult, int, bool]] = []
    strings: list[str] = []
    chars = 0
    for result in results:
        n = len(strings)
        keyed = _strings(result, strings)
        chars += sum(map(len, strings[n:]))
        batch.append((result, len(strings), keyed))
        if len(batch) >= BATCH_RECORDS or chars >= BATCH_CHARS:
            yield from _flush(batch, strings, stats)
            batch, strings, chars = [], [], 0
    yield from _flush(batch, strings, stats)
