"""Secrets never reach a training export.

Every string of every record an exporter writes goes through the kernel's redaction
(:func:`agentsynth_kernel.secrets.redact_text`): the secrets the process knows (provider keys in the
environment, ...) by value, and key-shaped strings (``sk-…``, ``Bearer …``). Values under
secret-named keys (``api_key``, ``password``, ...) of free-form data (tool-call arguments,
observation data, metadata, provenance) are masked whole; tool JSON schemas are not, since a
property named ``password`` there is a name, not a secret.

Two paths give the same output:

- **The screen** (every record): the record's JSON encoding (which the ``jsonl`` exporter writes as
  is) is searched once, at C speed, for everything the exact path could act on: each known secret in
  its JSON-escaped form, the key markers (``sk-``, ``AKIA``, ``Bearer `` ...), ``://`` of URL userinfo,
  the words secret-named keys are made of, and the non-ASCII letters that match an ASCII one when
  ``is_secret_key`` ignores case (``ſ``, ``K``, ``İ``, ``ı``). A hit that context proves harmless
  (``task-1``: no word boundary before ``sk-``; ``secret`` in a value, not a key; ``password`` as a
  property of a trajectory's tool schemas) is dismissed; any
  other hit sends the record to the exact path. A record the screen passes holds nothing the exact
  path would change, so it goes on untouched (see :class:`Screen` for why each test is a superset).
- **The exact path** (the records the screen stops): a Python walk over every string of a plain copy
  of the record, masking values under secret-named keys, then ``redact_text`` over the batch's
  distinct strings joined by NUL (one call per batch: a call scans the environment). No key pattern
  or secret spans a NUL; the URL-userinfo pattern could (``http://a`` NUL ``b:c@d``), so strings
  holding ``://`` are redacted one by one (and those holding a key marker, so that the key-shape
  regex, slow per character, reads only them), and so is everything when a remembered secret holds a
  NUL: the result is that of ``redact_text`` on each string alone.

The strings are redacted before any format renders them, so JSON escaping (``\\n`` before a key)
cannot hide a key from a pattern.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

import ahocorasick_rs
import msgspec

from agentsynth_kernel import (
    REDACTED,
    EpisodeResult,
    is_secret_key,
    item_is_secret,
    known_secrets,
    redact_text,
)

SEP = "\x00"
BATCH_CHARS = 1 << 20
# a record's encoding longer than this, or with more hits, goes to the exact path without a screen (its
# cost stays linear in the record, whatever the record holds)
SCREEN_MAX_BYTES = 1 << 20
SCREEN_MAX_HITS = 1000
BATCH_RECORDS = 256

Ref = tuple[Any, Any]  # (container, key or index) of one string


@lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    return is_secret_key(key)  # the same few keys recur in every record


# --- the exact path ------------------------------------------------------------------------------------


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


# the case-sensitive markers redact_text gates its key-shape regex on, and the URL one
_TEXT_MARKERS = ahocorasick_rs.AhoCorasick(
    ["sk-", "gsk_", "hf_", "xai-", "AIza", "AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "Bearer ", "://"])


def _redact_all(strings: list[str], secrets: tuple[str, ...]) -> list[str]:
    """``[redact_text(s) for s in strings]``, with one ``redact_text`` call for the strings that hold no
    key marker and no ``://``: the URL pattern could join two strings across the NUL, and the key-shape
    regex, slow per character, then runs only on the strings that may hold a key."""
    joined = SEP.join(strings)
    if joined.count(SEP) != len(strings) - 1 or any(SEP in s for s in secrets):
        return [redact_text(s) for s in strings]
    hits = _TEXT_MARKERS.find_matches_as_indexes(joined)  # a marker holds no NUL: it is inside one string
    if not hits:
        parts = redact_text(joined).split(SEP)
        return parts if len(parts) == len(strings) else [redact_text(s) for s in strings]
    starts = list(itertools.accumulate((len(s) + 1 for s in strings[:-1]), initial=0))
    alone = {bisect.bisect_right(starts, start) - 1 for _, start, _ in hits}
    out = list(strings)
    rest = [i for i in range(len(strings)) if i not in alone]
    for i in alone:
        out[i] = redact_text(strings[i])
    if rest:
        for i, new in zip(rest, _redact_all([strings[i] for i in rest], secrets), strict=True):
            out[i] = new
    return out


def exact(results: list[EpisodeResult], stats: Counter[str]) -> list[EpisodeResult]:
    """The exact path for a batch: a record is rebuilt only if something in it changes, the others are
    returned as they are. Distinct strings (system prompts, tool schemas recur) are redacted once."""
    strings: list[str] = []
    walked: list[tuple[Any, list[Ref], int, int]] = []
    for result in results:
        data = msgspec.to_builtins(result)  # a plain copy, walked at dict speed; masked in place
        refs: list[Ref] = []
        start, masked = len(strings), stats["secrets_redacted"]
        _collect(data, refs, strings, stats)
        walked.append((data, refs, start, stats["secrets_redacted"] - masked))
    unique = list(dict.fromkeys(strings))
    new = _redact_all(unique, known_secrets()) if unique else []
    changes = {old: n for old, n in zip(unique, new, strict=True) if old != n}
    out = []
    for result, (data, refs, start, masked) in zip(results, walked, strict=True):
        changed = masked
        if changes:
            for (node, key), old in zip(refs, strings[start : start + len(refs)], strict=True):
                n = changes.get(old)
                if n is not None:
                    node[key] = n
                    changed += 1
            stats["secrets_redacted"] += changed - masked
        out.append(msgspec.convert(data, EpisodeResult) if changed else result)
    return out


# --- the screen ----------------------------------------------------------------------------------------


# The kernel patterns this screen is a superset of (tests/test_scrub_screen.py fails when one changes,
# so the screen is reviewed with it).
SCREENED_PATTERNS = {
    "_SECRET_KEY": (
        r"api[_-]?key|apikey|secret|password|passwd|authorization|credential|private[_-]?key|access[_-]?key"
        r"|session[_-]?key|bearer|(^|[_-])token$|^token$"
    ),
    "_SECRET_VALUE": (
        r"\bsk-[A-Za-z0-9_\-]{8,}|\bgsk_[A-Za-z0-9]{8,}|\bhf_[A-Za-z0-9]{8,}|\bxai-[A-Za-z0-9]{8,}"
        r"|\bAIza[0-9A-Za-z_\-]{20,}|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}|(?<=Bearer )[A-Za-z0-9._~+/=\-]{6,}"
    ),
    "_URL_USERINFO": r"(?<=://)([^/\s:@]+):([^/\s@]+)@",
}

# (searched in the lower-cased encoding)
# every _SECRET_VALUE alternative but Bearer's starts with one of these, after a word boundary
_MARKERS = (b"sk-", b"gsk_", b"hf_", b"xai-", b"aiza", b"akia", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_")
# every _SECRET_KEY alternative contains one of these (token$: the key's closing quote follows; $ also
# matches before a final newline, which JSON writes as \n)
_KEY_WORDS = (b"apikey", b"api_key", b"api-key", b"secret", b"password", b"passwd", b"authorization", b"credential",
              b"privatekey", b"private_key", b"private-key", b"accesskey", b"access_key", b"access-key",
              b"sessionkey", b"session_key", b"session-key", b"bearer", b'token":', b'token\\n":')
# the non-ASCII letters re.IGNORECASE matches to an ASCII one (U+0130, U+0131, U+017F, U+212A), UTF-8
FOLDED = ("\u0130", "\u0131", "\u017f", "\u212a")
_FOLDED = tuple(c.encode() for c in FOLDED)
_FLAG, _MARKER, _URL, _KEY = range(4)
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_")
_ESCAPED_LETTERS = frozenset(b"bfnrt")  # \b \f \n \r \t
_HEX = frozenset(b"0123456789abcdef")
# a superset of _URL_USERINFO in an encoding: an escape or a non-ASCII letter is none of / : @ or
# ASCII space, so "://u:p@" of a string keeps that shape in its JSON
_URL_SHAPE = re.compile(rb"://[^/\s:@]+:[^/\s@]+@")
_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*"', re.DOTALL)  # up to and with the closing quote
_decode_key = msgspec.json.Decoder(str).decode


def _overlaps(patterns: list[bytes], i: int) -> bool:
    """Whether an occurrence of another pattern (or another occurrence of this one) can start inside
    an occurrence of ``patterns[i]`` and so be skipped by a leftmost, non-overlapping search (at the
    same start only a pattern after it can: the search prefers the first pattern listed)."""
    p = patterns[i]
    for j, q in enumerate(patterns):
        for d in range(0 if j > i else 1, len(p)):
            if p[d : d + len(q)] == q[: len(p) - d]:
                return True
    return False


class Screen:
    """A fast, conservative negative test on a record's JSON encoding for one set of known secrets:
    :meth:`clean` is True only if the exact path would change nothing in the record.

    Why each hit is a superset of what the exact path acts on (msgspec escapes only ``"``, ``\\`` and
    U+0000-U+001F, each character on its own, and writes other characters as UTF-8; the search runs on
    the ASCII-lower-cased encoding, so a case-sensitive pattern is searched for more widely):

    - a known secret inside a string: the string's encoding holds the secret's encoding;
    - a key shape: its marker is ASCII no escape touches; ``\\b`` before it holds unless the byte
      before is an ASCII letter, digit or ``_`` that is not the end of an escape (``\\n``, ``\\u001f``);
    - URL userinfo: see ``_URL_SHAPE``;
    - a secret-named key: the key holds one of ``_KEY_WORDS`` in ASCII, or one of ``FOLDED``; a word
      hit is dismissed only if the string it is in is not followed by ``:`` (a value), or is a key
      that ``is_secret_key`` refuses, or is inside the value of a trajectory's ``tools`` (a schema).

    The search is leftmost-first and non-overlapping (the fast kind); a dismissed hit is followed by
    an overlapping search of its span when another pattern could start inside it.
    """

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = secrets
        flags = list(dict.fromkeys(msgspec.json.encode(s)[1:-1].lower() for s in secrets))
        flags.append(b"bearer ")
        kinds = [_FLAG] * len(flags)
        patterns = flags + list(_MARKERS) + [b"://"] + list(_KEY_WORDS)
        kinds += [_MARKER] * len(_MARKERS) + [_URL] + [_KEY] * len(_KEY_WORDS)
        self.kinds = kinds
        self.patterns = patterns
        self.longest = max(map(len, patterns))
        self.overlaps = [kind != _FLAG and _overlaps(patterns, i) for i, kind in enumerate(kinds)]
        self._first = ahocorasick_rs.BytesAhoCorasick(patterns, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST)
        self._all = ahocorasick_rs.BytesAhoCorasick(patterns, matchkind=ahocorasick_rs.MATCHKIND_STANDARD)
        # searched apart, only in a record with non-ASCII bytes: among the others they slow the search 2x
        self._folded = ahocorasick_rs.BytesAhoCorasick(list(_FOLDED))

    def clean(self, data: bytes, result: EpisodeResult | None = None) -> bool:
        """True if the exact path would change nothing in the record ``result`` encoded as ``data``
        (without ``result``, a secret-named property of a tool schema stops the record unless the same
        tools were in a recent record)."""
        if len(data) > SCREEN_MAX_BYTES:
            return False  # the exact path: linear in the record, where a hit list need not be
        low = data.lower()
        if not low.isascii() and self._folded.find_matches_as_indexes(low):
            return False
        hits = self._first.find_matches_as_indexes(low)
        if len(hits) > SCREEN_MAX_HITS:
            return False
        kinds = self.kinds
        memo: list[Any] = [0, 0, True, None]  # a span inside the string a key word was last seen in, its verdict
        for i, start, end in hits:
            kind = kinds[i]
            if kind == _MARKER:  # inline: "task-1" has one of these in most records
                before = low[start - 1] if start else 0x22  # (a record's encoding starts with "{")
                if (before not in _WORD or (before in _ESCAPED_LETTERS and start >= 2 and low[start - 2] == 0x5C)
                        or (before in _HEX and low[start - 6 : start - 4] == b"\\u")):
                    return False  # a word boundary, a non-ASCII character, the end of an escape (\n, \u001f)
            elif kind == _FLAG or not _harmless(kind, low, data, start, end, result, memo):
                return False
            if self.overlaps[i] and not self._window(i, low, data, start, end, result, memo):
                return False
        return True

    def _window(self, i: int, low: bytes, data: bytes, start: int, end: int, result: EpisodeResult | None,
                memo: list[Any]) -> bool:
        """No hit the leftmost search skipped inside the harmless hit ``i`` at ``start:end`` matters."""
        kinds = self.kinds
        window = low[start : end - 1 + self.longest]
        for j, s, e in self._all.find_matches_as_indexes(window, overlapping=True):
            s += start
            if s >= end or (j == i and s == start):
                continue  # the leftmost search sees what starts after this hit
            if kinds[j] == _FLAG or not _harmless(kinds[j], low, data, s, e + start, result, memo):
                return False
        return True


def _harmless(kind: int, low: bytes, data: bytes, start: int, end: int, result: EpisodeResult | None,
              memo: list[Any]) -> bool:
    """Whether a dismissable hit at ``start:end`` is harmless in context (see :class:`Screen`)."""
    if kind == _MARKER:
        before = low[start - 1] if start else 0x22
        return before in _WORD and not (
            (before in _ESCAPED_LETTERS and start >= 2 and low[start - 2] == 0x5C)
            or (before in _HEX and low[start - 6 : start - 4] == b"\\u"))
    if kind == _URL:
        return _URL_SHAPE.match(low, start) is None
    # a key word: find the string it is in; harmless if that is a value or a key that is not secret
    if memo[0] <= start < memo[1]:
        return bool(memo[2])  # the same string as the last key word (each string is read once)
    if low[end - 1] == 0x3A:  # token": (the closing quote is the pattern's)
        close = end - 1
    else:
        rest = _STRING_REST.match(low, end)
        if rest is None:
            return False
        close = rest.end()
    verdict = low[close : close + 1] != b":" or _harmless_key(low, data, start, close, result, memo)
    memo[0], memo[1], memo[2] = start, close, verdict
    return verdict


def _harmless_key(low: bytes, data: bytes, start: int, close: int, result: EpisodeResult | None,
                  memo: list[Any]) -> bool:
    """The key ending at ``close`` (after its quote) that holds ``start`` is not secret-named, or is
    inside a tool schema."""
    open_ = start
    while True:
        open_ = low.rfind(b'"', 0, open_)
        if open_ < 0:
            return False
        k = open_
        while k > 0 and low[k - 1] == 0x5C:
            k -= 1
        if (open_ - k) % 2 == 0:
            break  # not escaped
    try:
        key = _decode_key(data[open_:close])
    except msgspec.DecodeError:
        return False
    if not _secret_key(key):
        return True
    if memo[3] is None:
        memo[3] = _tool_schema_spans(data, result)
    return any(lo <= open_ < hi for lo, hi in memo[3])


_recent_tools: collections.deque[bytes] = collections.deque(maxlen=8)  # encodings of recent records' tools


def _tool_schema_spans(data: bytes, result: EpisodeResult | None) -> list[tuple[int, int]]:
    """Where ``data`` (the encoding of ``result``) holds the value of a key named ``tools`` (tool JSON
    schemas: the exact path masks no key there). An unescaped ``"tools":`` can only be such a key; its
    value is known when an encoding of tools (this record's, or a recent record's: the same tools recur
    in every record of a run) follows it, since that is one whole JSON array."""
    known = list(_recent_tools)
    traj = result.trajectory if result is not None else None
    spans: list[tuple[int, int]] = []
    for attempt in range(2):
        pos = data.find(b'"tools":')
        while pos >= 0:
            k = pos
            while k > 0 and data[k - 1] == 0x5C:
                k -= 1
            if (pos - k) % 2 == 0:
                for value in known:
                    if data.startswith(value, pos + 8):
                        spans.append((pos + 8, pos + 8 + len(value)))
                        break
            pos = data.find(b'"tools":', pos + 8)
        if spans or attempt or traj is None:
            return spans
        known = []  # none of the recent ones: this record's own
        while traj is not None:
            if traj.tools:
                known.append(_encode(traj.tools))
                _recent_tools.append(known[-1])
            traj = traj.user
    return spans


@lru_cache(maxsize=8)
def _screen(secrets: tuple[str, ...]) -> Screen:
    return Screen(secrets)


_encode = msgspec.json.Encoder().encode


class Scrubber:
    """Scrubs a stream of records (``stats["secrets_redacted"]`` counts masked strings); the input
    records are never changed: a record with a secret is passed on as a new copy.

    Records are handled in batches (256 records or 1 MiB of JSON), each with the secrets known when
    it is flushed, as the exact path always was. :meth:`encoded` hands the ``jsonl`` exporter the
    encoding of the record just passed on, when the screen passed it unchanged (so it is encoded once).
    """

    def __init__(self, stats: Counter[str]) -> None:
        self.stats = stats
        self._last: tuple[EpisodeResult, bytes | None] | None = None
        self.screened = 0  # records the screen looked at
        self.exact_records = 0  # of which the exact path handled (a hit, or no encoding)

    def encoded(self, result: EpisodeResult) -> bytes | None:
        """The JSON encoding of ``result`` if it is the record just passed on, unchanged."""
        last = self._last
        return last[1] if last is not None and last[0] is result else None

    def scrub(self, results: Iterable[EpisodeResult]) -> Iterator[EpisodeResult]:
        batch: list[tuple[EpisodeResult, bytes | None]] = []
        size = 0
        try:
            for result in results:
                try:
                    data: bytes | None = _encode(result)
                except (TypeError, ValueError, msgspec.EncodeError):  # a lone surrogate, ...: the exact path
                    data = None
                batch.append((result, data))
                size += len(data) if data is not None else BATCH_CHARS // BATCH_RECORDS
                if len(batch) >= BATCH_RECORDS or size >= BATCH_CHARS:
                    yield from self._flush(batch)
                    batch, size = [], 0
            yield from self._flush(batch)
        finally:
            self._last = None

    def _flush(self, batch: list[tuple[EpisodeResult, bytes | None]]) -> Iterator[EpisodeResult]:
        if not batch:
            return
        screen = _screen(known_secrets())
        self.screened += len(batch)
        stopped = [k for k, (result, data) in enumerate(batch) if data is None or not screen.clean(data, result)]
        if stopped:
            self.exact_records += len(stopped)
            for k, result in zip(stopped, exact([batch[k][0] for k in stopped], self.stats), strict=True):
                batch[k] = (result, None)
        for item in batch:
            self._last = item
            yield item[0]


def scrub_results(results: Iterable[EpisodeResult], stats: Counter[str]) -> Iterator[EpisodeResult]:
    """The records with every secret masked (``stats["secrets_redacted"]`` counts masked strings).
    The input records are never changed: a record with a secret is passed on as a new copy."""
    return Scrubber(stats).scrub(results)
