"""fit_messages keeps the prompt prefix stable across turns (a server's prompt cache keeps hitting)
while every prompt stays within the room and every tool result follows its call."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentsynth_kernel import fit_messages


def conversation(sizes: list[int]) -> list[dict]:
    messages = [{"role": "system", "content": "s" * 50}, {"role": "user", "content": "task " * 10}]
    for i, size in enumerate(sizes):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "get", "arguments": json.dumps({"i": i})}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "r" * size})
    return messages


def size(messages: list[dict]) -> int:
    return sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or "")) for m in messages)


def check(sizes: list[int], limit: int) -> int:
    """Fit every prefix of a growing conversation; returns how many times the prefix changed."""
    previous: list[dict] | None = None
    changes = 0
    for n in range(1, len(sizes) + 1):
        history = conversation(sizes[:n])
        fitted = fit_messages(history, limit)
        assert fitted[:2] == history[:2]  # system and task always go
        body = [m for m in fitted[2:] if not str(m.get("content", "")).startswith("[... ")]
        assert body == history[len(history) - len(body):]  # the latest turns, whole and in order
        for i, m in enumerate(fitted):
            if m["role"] == "tool":
                assert fitted[i - 1]["role"] in ("assistant", "tool")
        if len(body) > 2:  # more than the last turn is kept only when it fits
            assert size(fitted) - len(fitted[2]["content"]) <= limit or fitted is history
        if previous is not None and fitted[:len(previous)] != previous:
            changes += 1
        previous = fitted
    return changes


def test_consecutive_prompts_share_their_prefix():
    sizes = [300] * 60
    changes = check(sizes, 3000)
    # the old cut slid by one turn every turn once full (~50 changes); chunked, it moves every ~5 turns
    assert changes <= 12, changes
    fitted = [fit_messages(conversation(sizes[:n]), 3000) for n in range(20, 60)]
    shared = sum(1 for a, b in zip(fitted, fitted[1:], strict=False) if b[:len(a)] == a)
    assert shared >= 0.75 * (len(fitted) - 1)


def test_what_fits_is_sent_unchanged():
    history = conversation([10] * 5)
    assert fit_messages(history, 10_000) is history


def test_a_turn_larger_than_the_room_is_still_sent_alone():
    fitted = fit_messages(conversation([100, 100, 50_000]), 2_000)
    assert fitted[-1]["content"] == "r" * 50_000 and fitted[2]["content"].startswith("[... 2 earlier turns")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2_000), min_size=1, max_size=40), st.integers(400, 8_000))
def test_any_growing_conversation_stays_well_formed(sizes, limit):
    check(sizes, limit)
