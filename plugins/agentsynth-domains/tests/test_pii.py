import pytest

from agentsynth_domains.pii import scrub, scrub_text


@pytest.mark.parametrize("text, kinds", [
    ("write to ann.lee+tag@mail.example.org today", ["email"]),
    ("call +1 415 555 0100", ["phone"]),
    ("call (415) 555-0100", ["phone"]),
    ("UK: +44 20 7946 0958", ["phone"]),
    ("token sk-proj-abcdefghijklmnop", ["secret"]),
    ("AKIAABCDEFGHIJKLMNOP is the key id", ["secret"]),
])
def test_pii_is_found_and_masked(text, kinds):
    masked, found = scrub_text(text)
    assert sorted(set(found)) == kinds and masked != text


@pytest.mark.parametrize("text", [
    "answer: 1 1/2", "It costs $1,250,000 in 2026.", "logged at 2026-12-01 12:16:49", "ratio 3:4:5",
    "x = 12.5 - 3.25", "version 1.2.3", "page 12-14",
])
def test_ordinary_numbers_are_left_alone(text):
    assert scrub_text(text) == (text, [])


def test_scrub_walks_records_without_changing_them():
    record = {"messages": [{"role": "user", "content": "mail bob@example.com"}], "n": 3}
    cleaned, kinds = scrub(record)
    assert cleaned == {"messages": [{"role": "user", "content": "mail <email>"}], "n": 3} and kinds == ["email"]
    assert record["messages"][0]["content"] == "mail bob@example.com"
