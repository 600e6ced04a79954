"""The embedded server's pure parts (no model): closing a call cut off by max_tokens, the prompt
rendering of tool calls for templates that know no tools."""

from __future__ import annotations

import pytest

from agentsynth_local.server import close_truncated, to_template_messages


@pytest.mark.parametrize("text, closed", [
    ('{"name": "sql_query", "arguments": {"sql": "INSE', {"name": "sql_query", "arguments": {"sql": "INSE"}}),
    ('{"name": "a", "argu', {"name": "a"}),  # a key cut off: dropped
    ('{"a": [1, 2,', {"a": [1, 2]}),  # a trailing comma: dropped
    ('{"a":', {"a": None}),
    ('{"a": "x\\', {"a": "x"}),  # cut inside an escape
    ('{"a": "say \\"hi', {"a": 'say "hi'}),
    ('{"a": {"b": "}} not a close', {"a": {"b": "}} not a close"}}),  # brackets inside a string
    ('{"a": 1}', {"a": 1}),
])
def test_a_cut_off_value_is_closed(text, closed):
    assert close_truncated(text) == closed


@pytest.mark.parametrize("text", ['{"a": tru', "not json", ""])
def test_what_cannot_be_closed_is_none(text):
    assert close_truncated(text) is None


def test_tool_calls_and_results_become_plain_turns():
    messages = [{"role": "user", "content": "add 2"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"n": 2}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "counter = 2"}]
    tools = [{"type": "function", "function": {"name": "add", "description": "Add n",
                                               "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]
    out = to_template_messages(messages, tools)
    assert out[0]["role"] == "system" and "- add(n: integer): Add n" in out[0]["content"]
    assert out[2] == {"role": "assistant", "content": '{"name": "add", "arguments": {"n": 2}}'}
    assert out[3] == {"role": "user", "content": "Result of add:\ncounter = 2"}


@pytest.mark.parametrize("tokens, loops", [
    (list(range(60)), False),  # no repetition
    ([5] * 47, False), ([5] * 48, True),  # one token over and over: from 48 on
    ([1, 2, 3] + list(range(7, 27)) * 3, True),  # a sentence of 20 tokens three times
    (list(range(7, 37)) * 2, False),  # twice is not a loop
    ([1, 2] * 23, False), ([1, 2] * 24, True),  # "no, no, no, ..." fits an 80-character string until 48
    (list(range(7, 27)) * 3 + [99], False),  # it moved on
])
def test_a_loop_at_the_end_of_an_answer_is_seen(tokens, loops):
    from agentsynth_local.server import looping

    assert looping(tokens) is loops
