"""Bring-your-own-loop helpers: OpenAI / Anthropic tool shapes <-> agentsynth actions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agentsynth_kernel.adapters import (
    InvalidToolCall,
    action_from_anthropic_tool_use,
    action_from_openai_tool_call,
    anthropic_tool_result,
    openai_tool_result,
    to_anthropic_tools,
    to_openai_tools,
    tool_specs,
    validate_arguments,
)
from agentsynth_kernel.llm import LLMClient, LLMToolCall
from agentsynth_kernel.records import Observation, ToolCall, ToolSpec
from agentsynth_kernel.testing import ScriptedLLMServer, conversation_handler, reply, tool_calls
from agentsynth_testworld import KVWorld


def test_tools_from_an_environment_specs_or_dicts():
    env = KVWorld()
    openai = to_openai_tools(env)
    assert [t["function"]["name"] for t in openai] == ["set", "get", "delete", "fail", "sleep"]
    assert openai[0]["type"] == "function" and openai[0]["function"]["parameters"]["required"] == ["key", "value"]
    anthropic = to_anthropic_tools(env.tools())
    assert anthropic[1] == {"name": "get", "description": "Read a key", "input_schema": env.tools()[1].parameters}
    # round trips: OpenAI dicts and Anthropic dicts back to ToolSpecs
    assert tool_specs(openai) == env.tools() == tool_specs(anthropic)


def test_async_tools_need_an_await():
    class AsyncEnv:
        async def tools(self):
            return [ToolSpec("x")]

    with pytest.raises(TypeError, match="await env.tools"):
        to_openai_tools(AsyncEnv())


def test_openai_tool_call_shapes():
    tools = KVWorld().tools()
    as_dict = {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"key": "a"}'}}
    as_sdk = SimpleNamespace(id="c2", type="function", function=SimpleNamespace(name="set",
                                                                                 arguments='{"key": "a", "value": "1"}'))
    assert action_from_openai_tool_call(as_dict, tools=tools) == ToolCall("get", {"key": "a"}, id="c1")
    assert action_from_openai_tool_call(as_sdk, tools=tools) == ToolCall("set", {"key": "a", "value": "1"}, id="c2")
    assert action_from_openai_tool_call(LLMToolCall("c3", "fail", "")) == ToolCall("fail", {}, id="c3")


@pytest.mark.parametrize(
    ("arguments", "name", "reason", "message"),
    [
        ('{"key": ', "get", "bad_json", "not valid JSON"),
        ('["a"]', "get", "bad_json", "must be a JSON object"),
        ('{"key": 1}', "get", "schema", "key: expected string, got integer 1"),
        ('{}', "set", "schema", "key: missing required argument"),
        ('{"key": "a"}', "teleport", "unknown_tool", "unknown tool 'teleport'"),
    ],
)
def test_invalid_openai_calls(arguments, name, reason, message):
    call = {"id": "c9", "function": {"name": name, "arguments": arguments}}
    with pytest.raises(InvalidToolCall) as info:
        action_from_openai_tool_call(call, tools=KVWorld().tools())
    exc = info.value
    assert exc.reason == reason and message in str(exc) and exc.call_id == "c9"
    obs = exc.observation()
    assert obs.error and obs.content.startswith("error: ")
    assert openai_tool_result(exc.call_id, obs) == {"role": "tool", "tool_call_id": "c9", "content": obs.content}


def test_anthropic_tool_use_blocks():
    tools = KVWorld().tools()
    block = {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"key": "a"}}
    assert action_from_anthropic_tool_use(block, tools=tools) == ToolCall("get", {"key": "a"}, id="toolu_1")
    sdk = SimpleNamespace(type="tool_use", id="toolu_2", name="delete", input={"key": "z"})
    assert action_from_anthropic_tool_use(sdk) == ToolCall("delete", {"key": "z"}, id="toolu_2")
    with pytest.raises(InvalidToolCall, match="expected a tool_use block"):
        action_from_anthropic_tool_use({"type": "text", "text": "hi"})
    with pytest.raises(InvalidToolCall, match="missing required argument"):
        action_from_anthropic_tool_use({"type": "tool_use", "id": "t", "name": "set", "input": {"key": "a"}}, tools=tools)
    assert anthropic_tool_result("toolu_1", Observation("no key 'a'", error=True)) == {
        "type": "tool_result", "tool_use_id": "toolu_1", "content": "error: no key 'a'", "is_error": True,
    }
    assert anthropic_tool_result("toolu_2", Observation("ok")) == {
        "type": "tool_result", "tool_use_id": "toolu_2", "content": "ok",
    }


def test_validate_arguments_subset():
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "maxItems": 2},
            "when": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "nested": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"],
                       "additionalProperties": False},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    assert validate_arguments(schema, {"n": 3, "mode": "a", "tags": ["x"], "when": None, "nested": {"x": 1.5}}) == []
    assert validate_arguments(schema, {"n": 2.0}) == []  # 2.0 is an integer in JSON
    problems = validate_arguments(schema, {"n": 9, "mode": "c", "tags": ["X", "y", "z"], "when": 3,
                                           "nested": {"y": 1}, "extra": True})
    assert problems == [
        "n: must be <= 5",
        "mode: 'c' is not one of ['a', 'b']",
        "tags[0]: does not match /^[a-z]+$/",
        "tags: allows at most 2 items",
        "when: does not match any of the allowed schemas",
        "nested.x: missing required argument",
        "nested.y: unknown argument (allowed: x)",
        "extra: unknown argument (allowed: mode, n, nested, tags, when)",
    ]
    assert validate_arguments(schema, {"n": True}) == ["n: expected integer, got boolean true"]
    assert validate_arguments({}, {"anything": 1}) == []


async def test_bring_your_own_loop_end_to_end():
    """An agent loop written against the OpenAI shapes drives a real environment through the helpers."""
    turns = [tool_calls(("set", {"key": "b", "value": "2"}), ("get", '{"key": ')), reply("b is 2")]
    env = KVWorld({"a": "1"})
    env.reset(0)
    with ScriptedLLMServer(handler=conversation_handler(turns)) as server:
        client = LLMClient("openai/scripted", api_base=server.base_url, cache=False)
        messages = [{"role": "user", "content": "set b to 2"}]
        tools = to_openai_tools(env)
        for _ in range(4):
            response = await client.complete(messages, tools=tools)
            messages.append(response.message())
            if not response.tool_calls:
                break
            for call in response.tool_calls:
                try:
                    action = action_from_openai_tool_call(call, tools=tools)
                except InvalidToolCall as exc:
                    messages.append(openai_tool_result(exc.call_id, exc.observation()))
                    continue
                messages.append(openai_tool_result(action.id, env.step(action)))
        await client.aclose()
    assert env.data == {"a": "1", "b": "2"}
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert messages[3]["content"].startswith("error: arguments of 'get' are not valid JSON")
    assert messages[-1]["content"] == "b is 2"
