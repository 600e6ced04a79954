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

from agentsynth_kernel.records import EpisodeResult
from agentsynth_kernel.secrets import REDACTED, is_secret_key, item_is_secret, redact_text

SEP = "\x00"
BATCH_CHARS = 1 << 20
BATCH_RECORDS = 256

Ref = tuple[Any, Any]  # (container, key or index) of one string


@lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    return is_secret_key(key)  # the same few keys recur in every record


def _collect(node: Any, refs: list[Ref], strings: list[str], stats: Counter[str], *, schema: bool = False,
             secret: bool = False) -> None:
    """Gather every string below ``node``; mask values under secret-named keys (not in tool schemas)."""
    if isinstance(node, dict):
        for key, value in node.items():  # assigning to an existing key while iterating is allowed
            if isinstance(value, str):
                if not value:
                    continue
                if secret or (not schema and _secret_key(key)):
                    node[key] = REDACTED
                    stats["secrets_redacted"] += 1
                else:
                    refs.append((node, key))
                    strings.append(value)
            elif isinstance(value, (dict, list)):
                under = secret or (not schema and _secret_key(key) and item_is_secret(value))
                _collect(value, refs, strings, stats, schema=schema or key == "tools", secret=under)
        return
    for index, value in enumerate(node):
        if isinstance(value, str):
            if not value:
                continue
            if secret:
                node[index] = REDACTED
                stats["secrets_redacted"] += 1
            else:
                refs.append((node, index))
                strings.append(value)
        elif isinstance(value, (dict, list)):
            _collect(value, refs, strings, stats, schema=schema, secret=secret)


def _redact_all(strings: list[str]) -> list[str]:
    joined = SEP.join(strings)
    if joined.count(SEP) == len(strings) - 1:
        parts = redact_text(joined).split(SEP)
        if len(parts) == len(strings):
            return parts
    return [redact_text(s) for s in strings]


def _flush(batch: list[tuple[Any, EpisodeResult, int, bool]], refs: list[Ref], strings: list[str],
           stats: Counter[str]) -> Iterator[EpisodeResult]:
    """Redact a batch's distinct strings (system prompts and tool schemas recur in every record) once;
    a record is rebuilt from its plain data only if something in it changed."""
    unique = list(dict.fromkeys(strings))
    changes = {old: new for old, new in zip(unique, _redact_all(unique) if unique else [], strict=True) if old != new}
    start = 0
    for data, original, end, masked in batch:
        changed = masked
        if changes:
            for i in range(start, end):
                new = changes.get(strings[i])
                if new is not None:
                    node, key = refs[i]
                    node[key] = new
                    stats["secrets_redacted"] += 1
                    changed = True
        start = end
        yield msgspec.convert(data, EpisodeResult) if changed else original


def scrub_results(results: Iterable[EpisodeResult], stats: Counter[str]) -> Iterator[EpisodeResult]:
    """The records with every secret masked (``stats["secrets_redacted"]`` counts masked strings)."""
    batch: list[tuple[Any, EpisodeResult, int, bool]] = []
    refs: list[Ref] = []
    strings: list[str] = []
    chars = 0
    for result in results:
        data = msgspec.to_builtins(result)
        n = len(strings)
        before = stats["secrets_redacted"]
        _collect(data, refs, strings, stats)
        chars += sum(map(len, strings[n:]))
        batch.append((data, result, len(strings), stats["secrets_redacted"] != before))
        if len(batch) >= BATCH_RECORDS or chars >= BATCH_CHARS:
            yield from _flush(batch, refs, strings, stats)
            batch, refs, strings, chars = [], [], [], 0
    yield from _flush(batch, refs, strings, stats)
