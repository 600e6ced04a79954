"""One parser for every tool-catalog shape, and queries files; bad input is a path-qualified SpecError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsynth_generate import load_queries, load_tools, parse_queries, parse_tools
from agentsynth_kernel import SpecError

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


@pytest.mark.parametrize("shape", ["openai_block", "openai_request", "bare", "anthropic", "mcp", "mcp_jsonrpc"])
def test_every_shape_gives_the_same_tools(shape: str) -> None:
    data = {
        "openai_block": [{"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": SCHEMA}}],
        "openai_request": {"model": "x", "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
                                                                                      "parameters": SCHEMA}}]},
        "bare": [{"name": "get_weather", "description": "d", "parameters": SCHEMA}],
        "anthropic": [{"name": "get_weather", "description": "d", "input_schema": SCHEMA}],
        "mcp": {"tools": [{"name": "get_weather", "description": "d", "inputSchema": SCHEMA}]},
        "mcp_jsonrpc": {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "get_weather", "description": "d",
                                                                          "inputSchema": SCHEMA}]}},
    }[shape]
    (tool,) = parse_tools(data, "tools.json")
    assert (tool.name, tool.description, tool.parameters) == ("get_weather", "d", SCHEMA)


def test_a_tool_without_parameters_takes_none() -> None:
    (tool,) = parse_tools([{"name": "ping"}])
    assert tool.parameters == {"type": "object", "properties": {}}


def test_all_problems_at_once_each_with_its_path() -> None:
    bad = [
        {"type": "function", "function": {"name": "ok", "parameters": SCHEMA}},
        {"type": "function", "function": {"name": "a", "parameters": "not a schema"}},
        {"description": "no name"},
        {"name": "has space"},
        {"name": "ok", "parameters": SCHEMA},
        {"name": "arr", "parameters": {"type": "array"}},
        {"name": "req", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["y"]}},
        {"name": "prop", "parameters": {"type": "object", "properties": {"x": 3}}},
        "just a string",
    ]
    with pytest.raises(SpecError) as err:
        parse_tools(bad, "tools.json")
    text = str(err.value)
    for expected in ("tools.json: [1].function.parameters: expected a JSON Schema object, got a string",
                     "tools.json: [2].name: missing", "tools.json: [3].name: 'has space' is not a valid tool name",
                     "tools.json: [4].name: duplicate tool 'ok' (also [0])",
                     "tools.json: [5].parameters.type: a tool's parameters must be a JSON Schema of type 'object'",
                     "tools.json: [6].parameters.required: 'y' is not one of the properties",
                     "tools.json: [7].parameters.properties.x: expected a JSON Schema object, got an integer",
                     "tools.json: [8]: expected a tool object, got a string"):
        assert expected in text, text
    assert len(err.value.messages) == 8


@pytest.mark.parametrize(("content", "expected"), [
    ("{not json", "not valid JSON"), ('{"model": "x"}', "expected a list of tools, or an object with a 'tools' list"),
    ("[]", "the catalog has no tools"), ('"tools"', "$: expected a list of tools, got a string"),
])
def test_bad_files(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "tools.json"
    path.write_text(content)
    with pytest.raises(SpecError) as err:
        load_tools(path)
    assert str(err.value).startswith(f"{path}: ") and expected in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot read a tool catalog"):
        load_tools(tmp_path / "nope.json")


def test_queries_json_array_and_jsonl(tmp_path: Path) -> None:
    array = tmp_path / "q.json"
    array.write_text(json.dumps(["What is the weather in Oslo?", {"id": "hotel", "query": "Book 2 nights in Oslo",
                                                                   "domain": "travel", "mode": "back"}]))
    got = load_queries(array)
    assert [(s.id, s.query, s.domain, s.mode) for s in got] == [
        ("q0", "What is the weather in Oslo?", "", ""), ("hotel", "Book 2 nights in Oslo", "travel", "back")]
    lines = tmp_path / "q.jsonl"
    lines.write_text('{"instruction": "a"}\n\n{"query": "b", "metadata": {"k": 1}}\n')
    assert [(s.query, s.metadata) for s in load_queries(lines)] == [("a", {}), ("b", {"k": 1})]


def test_bad_queries_are_reported_by_line_and_key(tmp_path: Path) -> None:
    lines = tmp_path / "q.jsonl"
    lines.write_text('{"query": "a", "mood": "x"}\n{"query": ""}\n{"query": "c", "mode": "solo"}\n[1]\n{broken\n')
    with pytest.raises(SpecError) as err:
        load_queries(lines)
    assert "line 5: not valid JSON" in str(err.value)
    lines.write_text('{"query": "a", "mood": "x"}\n{"query": ""}\n{"query": "c", "mode": "solo"}\n[1]\n{"id": "a b", "query": "x"}\n')
    with pytest.raises(SpecError) as err:
        load_queries(lines)
    text = str(err.value)
    for expected in ("line 1.mood: unknown key (did you mean 'mode'?)", "line 2.query: missing or empty",
                     "line 3.mode: expected one of single_agent, back, multi_agent, code_execution, got 'solo'",
                     "line 4: expected a string or an object with 'query', got a list", "line 5.id: 'a b' is not a valid id"):
        assert expected in text, text


def test_duplicate_ids() -> None:
    with pytest.raises(SpecError, match=r"\[1\].id: duplicate id 'x' \(also \[0\]\)"):
        parse_queries([{"id": "x", "query": "a"}, {"id": "x", "query": "b"}], "q.json")
