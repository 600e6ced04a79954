"""The scrub's fast screen: a record it passes holds nothing the exact path would change.

Each attack below is a way to get a secret past the screen (an escape inside it, a marker after an
escape, a key that is only secret ignoring case, a hit hidden inside another hit ...): the screen must
stop the record and the export must not hold the secret. The differential test runs many generated
records, with and without planted secrets, through the scrub and through a plain re-statement of the
exact path (every string redacted alone, values under secret-named keys masked): byte-identical.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Any

import msgspec
import pytest

from agentsynth_export import scrub as scrub_mod
from agentsynth_export.exporters import JsonlExporter, OpenAIExporter
from agentsynth_export.scrub import FOLDED, Screen, Scrubber, known_secrets
from agentsynth_kernel import (
    REDACTED,
    Answer,
    EpisodeResult,
    Observation,
    Step,
    ToolCall,
    ToolSpec,
    Verdict,
    is_secret_key,
    item_is_secret,
    redact_text,
    remember,
)
from conftest import make_result

ENV_KEY = "sk-screen-Q2xL7vN4mR8tK1pZ6w"
ENV_PLAIN = "Zq8W2nXv5Lr7Tb3Kc9Pd"  # no key shape: only its value can catch it
ENV_ODD = 'pa"ss\\wo/rd\n!42'  # JSON escapes three of its characters
ENV_K = "k-Hidden9Q2xL7v"  # starts inside "task-..." (the sk- hit there must not hide it)
ENV_UNICODE = "pässwörd-Überall-9"
ENV_CONTROL = "ctl\x01tab\tsecret-77"  # written \u0001 and \t in JSON
SECRETS = (ENV_KEY, ENV_PLAIN, ENV_ODD, ENV_K, ENV_UNICODE, ENV_CONTROL)
_enc = msgspec.json.Encoder()


@pytest.fixture
def planted(monkeypatch):
    for i, value in enumerate(SECRETS):
        monkeypatch.setenv(f"SCREEN_TEST_{i}_API_KEY", value)


def reference(result: EpisodeResult) -> bytes:
    """The exact path, written out plainly: values under secret-named keys (outside tool schemas)
    masked, every other string through ``redact_text`` alone."""
    data = msgspec.to_builtins(result)

    def walk(node: Any, schema: bool, secret: bool) -> None:
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        for key, value in items:
            if isinstance(value, str):
                if not value:
                    continue
                if secret or (isinstance(node, dict) and not schema and isinstance(key, str) and is_secret_key(key)):
                    node[key] = REDACTED
                else:
                    node[key] = redact_text(value)
            elif isinstance(value, (dict, list)):
                named = isinstance(node, dict) and not schema and isinstance(key, str) and is_secret_key(key)
                walk(value, schema or (isinstance(node, dict) and key == "tools"),
                     secret or (named and item_is_secret(value)))

    walk(data, False, False)
    return _enc.encode(msgspec.convert(data, EpisodeResult))


def scrubbed(results: list[EpisodeResult]) -> tuple[list[bytes], Scrubber]:
    scrubber = Scrubber(Counter())
    return [_enc.encode(r) for r in scrubber.scrub(results)], scrubber


def screen_passes(result: EpisodeResult) -> bool:
    return _screen_now().clean(_enc.encode(result), result)


def _screen_now() -> Screen:
    return scrub_mod._screen(known_secrets())


def with_text(text: str, where: str = "observation") -> EpisodeResult:
    r = make_result("t", 0, True)
    steps = list(r.trajectory.steps)
    if where == "observation":
        steps[0] = Step(steps[0].action, Observation(text), turn=0)
    elif where == "argument":
        steps[0] = Step(ToolCall("get", {"key": text}, "c0"), steps[0].observation, turn=0)
    elif where == "answer":
        steps[-1] = Step(Answer(text), None, turn=2)
    r.trajectory.steps = steps
    return r


def with_data(where: str, value: Any) -> EpisodeResult:
    r = make_result("t", 0, True)
    steps = list(r.trajectory.steps)
    if where == "arguments":
        steps[0] = Step(ToolCall("get", value, "c0"), steps[0].observation, turn=0)
    elif where == "observation_data":
        steps[0] = Step(steps[0].action, Observation("ok", data=value), turn=0)
    elif where == "metadata":
        r.trajectory.metadata = value
    elif where == "provenance":
        r.provenance = value
    elif where == "verdict_data":
        r.verdicts = [Verdict("c", True, 1.0, "d", data=value)]
    r.trajectory.steps = steps
    return r


# --- what the screen rests on: the kernel's patterns and msgspec's escaping -----------------------------


def test_msgspec_escapes_only_quote_backslash_and_control_characters():
    escaped = {}
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        out = _enc.encode(c)[1:-1]
        if out != c.encode():
            escaped[cp] = out
    assert sorted(escaped) == [*range(0x20), 0x22, 0x5C]
    for out in escaped.values():  # none holds a character the URL shape or a marker test looks for
        assert out[:1] == b"\\" and not set(out) & set(b"/:@ \t\n\r")


def test_the_folded_letters_are_every_non_ascii_letter_ignorecase_matches():
    letters = re.compile("[a-z]", re.IGNORECASE)
    found = {chr(cp) for cp in range(0x80, 0x110000) if not 0xD800 <= cp < 0xE000 and letters.fullmatch(chr(cp))}
    assert found == set(FOLDED)
    # ... and a key spelt with one is secret: the screen must stop it
    spelt = {"\u017f": "pa\u017f\u017fword", "\u212a": "api_\u212aey", "\u0131": "ap\u0131key", "\u0130": "ap\u0130key"}
    assert set(spelt) == set(FOLDED)
    for c, key in spelt.items():
        assert is_secret_key(key), c
        assert not screen_passes(with_data("metadata", {key: "hunter2-hunter2"})), key


# --- attacks: each must be stopped by the screen and must not leak ----------------------------------------


TEXT_ATTACKS = {
    "env key": f"the key is {ENV_KEY}.",
    "plain env value": f"token={ENV_PLAIN}",
    "value with quote, backslash, newline": f"pw: {ENV_ODD} end",
    "secret inside a sk- false hit": f"task-{ENV_K[2:]}",  # task-Hidden9... holds k-Hidden9...
    "non-ASCII around a secret": f"é{ENV_PLAIN}—",
    "non-ASCII secret": f"login {ENV_UNICODE}",
    "secret with control characters": f"[{ENV_CONTROL}]",
    "key after an escaped newline": "ok\nsk-unknownkey0123456789",
    "key after a tab": "\tghp_abcdefghijklmnopqrstuvwx",
    "key after a control character": "\x01sk-unknownkey0123456789",
    "key after a quote": '"sk-unknownkey0123456789"',
    "key after a backslash": "C:\\sk-unknownkey0123456789",
    "key at the start": "AKIAABCDEFGHIJKLMNOP",
    "key after a non-ASCII space": "\u00a0hf_abcdefghijk",
    "bearer": "Authorization: Bearer abc.def-123",
    "url userinfo": "clone https://bob:hunter2@example.com/repo",
    "url userinfo with escapes": 'clone https://b"o\\b:hun"ter2@example.com/repo',
    "xai key": "(xai-abcdefghijk)",
    "google key": "AIzaSyA-abcdefghijklmnopqrstu",
}


@pytest.mark.parametrize("name", sorted(TEXT_ATTACKS))
@pytest.mark.parametrize("where", ["observation", "argument", "answer"])
def test_a_secret_in_text_is_stopped_and_masked(name, where, planted):
    r = with_text(TEXT_ATTACKS[name], where)
    before = reference(r)
    assert not screen_passes(r), f"the screen passed {name!r}"
    [out], scrubber = scrubbed([r])
    assert out == before and REDACTED.encode() in out
    assert scrubber.exact_records == 1
    for secret in SECRETS:
        assert json.dumps(secret)[1:-1].encode() not in out


SECRET_KEYS = ["api_key", "API_KEY", "Api-Key", "apikey", "x-auth-token", "ACCESS_TOKEN", "Token", "client_secret",
               "Password", "passwd", "Authorization", "aws_credentials", "PRIVATE-KEY", "session_key", "bearer",
               "access_token\n", "pa\u017f\u017fword", "api_\u212aey", "ap\u0131key", "my \"password\"", 'back\\slash_token']


@pytest.mark.parametrize("key", SECRET_KEYS)
@pytest.mark.parametrize("where", ["arguments", "observation_data", "metadata", "provenance", "verdict_data"])
def test_a_secret_named_key_anywhere_is_stopped_and_masked(key, where):
    assert is_secret_key(key)
    value = {"outer": [{"user": "bob", key: "hunter2-hunter2"}]}
    r = with_data(where, value)
    assert not screen_passes(r), f"the screen passed key {key!r} in {where}"
    [out], _ = scrubbed([r])
    assert out == reference(r)
    assert b"hunter2-hunter2" not in out


@pytest.mark.parametrize("key", ["api_key", "password", "token"])
def test_a_secret_named_key_holding_a_structure_is_masked_whole(key):
    r = with_data("metadata", {key: {"user": "bob", "pin": "123456"}})
    [out], _ = scrubbed([r])
    assert out == reference(r) and b"123456" not in out and b"bob" not in out


HARMLESS = {
    "task ids": "task-12 and desk-3 are done",
    "a key word in a value": "my password is not here, nor the api_key or the secret",
    "AKIA inside a word": "SLOVAKIA",
    "a url without userinfo": "see https://example.com/a?b=c and mail bob@example.com",
    "token in a value": 'he said "token": no',
}


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_harmless_text_passes_the_screen_unchanged(name, planted):
    r = with_text(HARMLESS[name])
    assert screen_passes(r), f"the screen stopped harmless {name!r}"
    [out], scrubber = scrubbed([r])
    assert out == reference(r) == _enc.encode(r)
    assert scrubber.exact_records == 0


@pytest.mark.parametrize("key", ["key", "max_tokens", "tokens", "api_key_env", "keyboard", "mytoken", "secretary_name"])
def test_keys_that_are_not_secret_pass_unless_secret_named(key):
    r = with_data("arguments", {key: "visible-value"})
    assert screen_passes(r) == (not is_secret_key(key)), key
    [out], _ = scrubbed([r])
    assert out == reference(r)
    assert (b"visible-value" in out) == (not is_secret_key(key))


LOGIN = ToolSpec("login", "Log in", {"type": "object", "properties": {"password": {"type": "string"}}})


def test_a_tool_schema_property_named_password_is_kept_and_passes_the_screen():
    r = make_result("t", 0, True)
    r.trajectory.tools = [LOGIN]
    r.trajectory.user = msgspec.structs.replace(r.trajectory, user=None)  # a simulated user with the same tools
    scrub_mod._recent_tools.clear()
    assert not _screen_now().clean(_enc.encode(r))  # with neither the record nor a recent one's tools: no schema known
    assert screen_passes(r)
    assert _screen_now().clean(_enc.encode(r))  # the tools of a recent record are known
    [out], scrubber = scrubbed([r])
    assert out == reference(r) == _enc.encode(r) and scrubber.exact_records == 0


def test_a_key_that_only_ends_in_tools_is_no_schema():
    """metadata {'x"tools': <the same tool list>}: its encoding holds '"tools":' + the list after an escaped
    quote; the exact path masks the password property's value there (the key is not 'tools')."""
    r = make_result("t", 0, True)
    r.trajectory.tools = [LOGIN]
    r.trajectory.metadata = {'x"tools': [LOGIN]}
    assert _enc.encode([LOGIN]) in _enc.encode(r.trajectory.metadata)
    assert not screen_passes(r)
    [out], _ = scrubbed([r])
    assert out == reference(r) != _enc.encode(r)


def test_a_secret_in_a_tool_description_is_masked():
    r = make_result("t", 0, True)
    r.trajectory.tools = [ToolSpec("login", "default key sk-unknownkey0123456789", LOGIN.parameters)]
    assert not screen_passes(r)
    [out], _ = scrubbed([r])
    assert out == reference(r) and b"sk-unknownkey" not in out


def test_a_remembered_secret_with_a_nul_or_a_quote_is_masked():
    nul, quote = "remembered\x00nul-secret-1", 'remembered"quote-secret-2'
    remember(nul, quote)  # (remembered for the rest of this process: values no other test uses)
    for secret in (nul, quote):
        r = with_text(f"[{secret}]")
        assert not screen_passes(r)
        [out], _ = scrubbed([r])
        assert out == reference(r) and _enc.encode(secret)[1:-1] not in out
    # a NUL secret must not join two strings of the batch into a match
    a, b = with_text("remembered"), with_text("nul-secret-1")
    outs, _ = scrubbed([a, b])
    assert outs == [reference(a), reference(b)]


def test_a_url_split_over_two_strings_is_not_joined(planted):
    """Redacted alone, neither string holds URL userinfo (the exact path joins strings by NUL)."""
    r = with_data("arguments", {"a": "open http://bob", "b": "name:pw@host"})  # one after the other in the walk
    assert not screen_passes(r)  # the URL shape spans the two strings in the encoding: the exact path decides
    [out], _ = scrubbed([r])
    assert out == reference(r) == _enc.encode(r)


def test_a_secret_set_in_the_environment_mid_batch_masks_the_whole_batch(monkeypatch):
    """Each batch is redacted with the secrets known when it is flushed, as the exact path always was."""
    value = "Late9Secret4Value7"

    def records():
        for i in range(10):
            if i == 5:
                monkeypatch.setenv("SCREEN_LATE_TOKEN", value)
            yield with_text(f"{i}: {value}")

    outs, _ = scrubbed(list(records()))  # one batch, flushed after the variable is set
    assert all(value.encode() not in o for o in outs)


# --- the differential test ---------------------------------------------------------------------------------

FRAGMENTS = [
    "hello", "SELECT * FROM t", "task-7", "desk-", "sk-", "sk-abcdefgh1234", "gsk_ABCDEFGH12", "hf_abcdefgh9",
    "xai-Zz12345678", "AIzaSyA-abcdefghijklmnopqrstu", "AKIAABCDEFGHIJKLMNOP", "SLOVAKIA", "ghp_abcdefghijklmnopqrstuv",
    "ghs_short", "Bearer tok.en-123456", "bearer x", "https://bob:pw@host/x", "http://host/y", "a@b.c", "://", "@",
    "\n", "\t", "\x00", "\x01", "\x1f", '"', "\\", "é", "—", "\u00a0", "\u017f", "\u212a", "\u0131", "\u0130", "日本",
    "api_key", "password", "token", "Token", "secret", ENV_KEY, ENV_PLAIN, ENV_ODD, ENV_K, ENV_UNICODE, ENV_CONTROL,
    ENV_KEY[:8],
    ENV_PLAIN[3:], "<redacted>", "AGENTSYNTH CANARY GUID 1234",
]
SEPARATORS = ["", "", " ", "\n", "-", "_", ":", "/", "\\", '"', "é"]
KEYS = ["sql", "note", "id", "path", "key", "value", "tokens", "max_tokens", "api_key_env", "tools", "user",
        "api_key", "API_KEY", "x-auth-token", "access_token\n", "pa\u017f\u017fword", "ap\u0131key", "Token",
        'my "password"', "secretive", "keyboard", "é_token", "SECRET"]


def gen_text(rng: random.Random) -> str:
    parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 4))]
    return "".join(p + rng.choice(SEPARATORS) for p in parts)


def gen_value(rng: random.Random, dirty: bool, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 2 and roll < 0.2:
        return gen_dict(rng, dirty, depth + 1)
    if depth < 2 and roll < 0.3:
        return [gen_value(rng, dirty, depth + 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.35:
        return rng.choice([None, 0, 1.5, True, ""])
    return gen_text(rng) if dirty and rng.random() < 0.5 else rng.choice(["plain", "orders", "42", "task-9"])


def gen_dict(rng: random.Random, dirty: bool, depth: int = 0) -> dict[str, Any]:
    keys = KEYS if dirty and rng.random() < 0.5 else KEYS[:11]
    return {rng.choice(keys): gen_value(rng, dirty, depth) for _ in range(rng.randint(0, 3))}


def gen_record(rng: random.Random, i: int) -> EpisodeResult:
    """Half the records draw only from harmless fragments and keys: the screen must pass most of them."""
    dirty = rng.random() < 0.5
    r = make_result(f"task-{i % 50}", i % 3, rng.random() < 0.5, split=rng.choice(["train", "test"]))

    def text() -> str:
        return gen_text(rng) if dirty else rng.choice(["plain text", "task-3 done", "SELECT 1", "a@b.c", ""])

    steps = []
    for turn in range(rng.randint(1, 3)):
        steps.append(Step(ToolCall("get", gen_dict(rng, dirty), f"c{turn}"),
                          Observation(text(), data=gen_value(rng, dirty) if dirty else None), turn=turn, thought=text()))
    steps.append(Step(Answer(text()), None, turn=3))
    r.trajectory.steps = steps
    r.trajectory.instruction = text() or "do it"
    r.trajectory.metadata = gen_dict(rng, dirty)
    r.provenance = {**r.provenance, **gen_dict(rng, dirty)}
    r.verdicts = [Verdict("c", True, 1.0, text(), data=gen_value(rng, dirty) if dirty else None)]
    r.error = text()
    if dirty and rng.random() < 0.2:
        r.trajectory.tools = [LOGIN]
        if rng.random() < 0.3:
            r.trajectory.metadata["tools"] = [LOGIN, {"password": text() or "x"}]
    return r


def test_differential_screen_and_exact_path_write_the_same_bytes(planted):
    rng = random.Random(20261201)
    records = [gen_record(rng, i) for i in range(1500)]
    expected = [reference(r) for r in records]
    originals = [_enc.encode(r) for r in records]
    outs, scrubber = scrubbed(records)
    assert [_enc.encode(r) for r in records] == originals  # the input records are not changed
    mismatches = [i for i, (o, e) in enumerate(zip(outs, expected, strict=True)) if o != e]
    assert not mismatches, f"{len(mismatches)} records differ, first {records[mismatches[0]]!r}"
    changed = sum(o != e for o, e in zip(outs, originals, strict=True))
    # the test means something: both paths ran, and secrets were masked
    assert scrubber.screened == 1500
    assert 300 < scrubber.exact_records < 1200, scrubber.exact_records
    assert changed > 200
    joined = b"".join(outs)
    for secret in SECRETS:
        assert _enc.encode(secret)[1:-1] not in joined


@pytest.mark.parametrize("cls", [JsonlExporter, OpenAIExporter])
def test_differential_whole_export_with_and_without_the_screen(cls, planted, tmp_path, monkeypatch):
    rng = random.Random(7)
    records = [gen_record(rng, i) for i in range(400)]
    fast = tmp_path / "fast.jsonl"
    exporter = cls(filter="all", include_test=True, canary="auto")
    n = exporter.export(records, fast)
    assert exporter.scrubber.exact_records < n
    monkeypatch.setattr(Screen, "clean", lambda self, data, result=None: False)  # every record through the exact path
    slow = tmp_path / "slow.jsonl"
    assert cls(filter="all", include_test=True, canary="auto").export(records, slow) == n
    assert fast.read_bytes() == slow.read_bytes()
    assert b"AGENTSYNTH CANARY GUID" in fast.read_bytes()


def test_the_jsonl_exporter_writes_the_screens_encoding_of_a_clean_record(tmp_path):
    records = [make_result(f"t{i}", 0, True) for i in range(300)]
    exporter = JsonlExporter(include_test=True, canary="never")
    out = tmp_path / "x.jsonl"
    assert exporter.export(records, out) == 300
    assert exporter.scrubber.screened == 300 and exporter.scrubber.exact_records == 0
    assert out.read_bytes() == b"".join(_enc.encode(r) + b"\n" for r in records)


def test_the_overlap_table_finds_hits_a_leftmost_search_would_skip():
    screen = Screen(("k-Hidden9Q2xL7v",))
    sk = screen.patterns.index(b"sk-")
    assert screen.overlaps[sk]  # the secret can start inside an sk- hit
    assert not Screen(()).overlaps[Screen(()).patterns.index(b"sk-")]


# --- the screen's own cost stays linear, whatever a record holds -------------------------------------------


def test_a_record_with_too_many_hits_or_too_big_goes_to_the_exact_path(planted):
    many = with_text("task-1 " * (scrub_mod.SCREEN_MAX_HITS + 1))
    big = with_text("x" * scrub_mod.SCREEN_MAX_BYTES)
    for r in (many, big):
        assert not screen_passes(r)
        [out], scrubber = scrubbed([r])
        assert out == reference(r) == _enc.encode(r) and scrubber.exact_records == 1


def test_key_words_in_one_long_value_are_read_once(monkeypatch):
    """999 key words in one 500 kB value: the string is scanned once, not once a word (quadratic)."""
    calls = []

    class Counting:
        def match(self, data: bytes, pos: int) -> Any:
            calls.append(pos)
            return scrub_mod.re.compile(rb'(?:[^"\\]|\\.)*"', re.DOTALL).match(data, pos)

    monkeypatch.setattr(scrub_mod, "_STRING_REST", Counting())
    text = ("a secret " + "x" * 500) * 999
    r = with_text(text)
    assert screen_passes(r)
    assert len(calls) == 1


PIECES = ["sk-", "gsk_", "hf_", "xai-", "AIza", "AKIA", "ghp_", "Bearer ", "://", "@", ":", "/", "api", "_key", "KEY",
          "token", "TOKEN", "pass", "word", "secret", "cred", "ential", "\u017f", "\u212a", "\u0131", "tools", '"',
          "\\", "\n", "\x00", "\x01", "\t", "é", " ", "-", "_", "a", "Z", "9", "x" * 8, "A" * 16, ENV_PLAIN[:10],
          ENV_PLAIN[10:], ENV_K, ENV_ODD[:4], ENV_ODD[4:]]


# glued together, these make near misses: "api" "_" "word", "a" "sk-"... (and sometimes a real hit)
NEAR_MISSES = ["api", "_key", "KEY", "word", "cred", "ential", "tools", "sk", "-", "_", "a", "Z", "9", "x" * 8, " ",
               "é", '"', "\\", "\n", "AKI", "tok", "en"]


def random_string(rng: random.Random, pieces: list[str]) -> str:
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 7)))


def test_differential_random_pieces_in_keys_and_values(planted):
    """Keys and values glued from marker, key-word, escape and secret pieces: the screen may stop any of
    them, but what it passes must come out as the exact path writes it."""
    rng = random.Random(42)
    records = []
    for i in range(1500):
        pieces = PIECES if rng.random() < 0.5 else NEAR_MISSES

        def text() -> str:
            return random_string(rng, pieces)  # noqa: B023 - used at once

        r = make_result(f"task-{i}", 0, True)
        r.trajectory.metadata = {text(): text() for _ in range(3)}
        r.trajectory.metadata[text()] = {text(): [text()]}
        r.trajectory.steps[0] = Step(ToolCall("get", {text(): text()}, "c"), Observation(text()), turn=0)
        records.append(r)
    outs, scrubber = scrubbed(records)
    assert outs == [reference(r) for r in records]
    assert 200 < scrubber.exact_records < 1300, scrubber.exact_records  # both paths ran


def test_records_with_other_tools_than_recent_ones_still_pass():
    records = []
    for i in range(12):  # more distinct tool lists than the screen keeps
        r = make_result("t", i, True)
        r.trajectory.tools = [ToolSpec(f"login{i}", "Log in", {"type": "object", "properties": {
            "password": {"type": "string"}, f"p{i}": {"type": "string"}}})]
        records.append(r)
    for r in records + records[:3]:
        assert screen_passes(r)
    outs, scrubber = scrubbed(records)
    assert outs == [reference(r) for r in records] and scrubber.exact_records == 0
