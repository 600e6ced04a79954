"""A scripted model that plays every role of the generator over a real HTTP server on 127.0.0.1.

It answers by the request's system prompt (the generator's roles each have their own), so one server
serves many items in any order and the answers are deterministic: the scripted "policy" of these tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentsynth_kernel.testing import Reply, ScriptedLLMServer, reply, tool_calls

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

WEATHER_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Forecast for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "book_hotel", "description": "Book a hotel room.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "nights": {"type": "integer", "minimum": 1}},
                       "required": ["city", "nights"], "additionalProperties": False}}},
]


def role(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"] if request["messages"][0]["role"] == "system" else ""
    for key, name in (("simulate a software tool", "simulator"), ("check training data", "semantic"),
                      ("write training data", "back"), ("planner of a team", "planner"),
                      ("reviewer of a team", "reviewer"), ("executor of a team", "executor"),
                      ("solves tasks by writing Python", "coder"), ("grade a tool-using assistant", "grader"),
                      ("write questions for a training set", "question")):
        if key in system:
            return name
    return "agent"


class Model:
    """Per-role behaviour, replaceable by a test: ``model.agent = lambda request: Reply``."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.agent: Callable[[dict[str, Any]], Reply] = self.default_agent
        self.simulator: Callable[[dict[str, Any]], Reply] = lambda r: reply(json.dumps({"city": _args(r).get("city", "?"),
                                                                                        "forecast": "sunny", "temp_c": 21}))
        self.semantic: Callable[[dict[str, Any]], Reply] = lambda r: reply('{"satisfied": true, "reason": "the calls answer it"}')
        self.back: Callable[[dict[str, Any]], Reply] = self.default_back
        self.planner: Callable[[dict[str, Any]], Reply] = lambda r: reply("1. Call get_weather for the city. 2. Answer.")
        self.reviewer: Callable[[dict[str, Any]], Reply] = lambda r: reply("APPROVE: the forecast answers the request")
        self.executor: Callable[[dict[str, Any]], Reply] = self.default_agent
        self.coder: Callable[[dict[str, Any]], Reply] = self.default_agent
        self.question: Callable[[dict[str, Any]], Reply] = lambda r: reply(json.dumps(
            {"question": "When does the " + r["messages"][1]["content"].split()[1].lower() + " open?"}))
        self.grader: Callable[[dict[str, Any]], Reply] = lambda r: reply(json.dumps(
            {"task_completion": 0.9, "tool_selection": 1.0, "grounding": 0.8, "communication": 0.7, "rationale": "fine"}))

    @staticmethod
    def default_agent(request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        if any(m["role"] == "tool" for m in messages):
            return reply("It will be sunny, 21 C.")
        return tool_calls(("get_weather", {"city": "Lisbon"}), content="I will look up the forecast for Lisbon.")

    @staticmethod
    def default_back(request: dict[str, Any]) -> Reply:
        chain = json.loads(request["messages"][1]["content"].split("\nThe request should")[0])
        names = " then ".join(c["tool"] for c in chain)
        return reply(json.dumps({"query": f"Please {names} for {chain[0]['arguments'].get('city', 'me')}.",
                                 "answer": "Done: " + names}))

    def __call__(self, request: dict[str, Any]) -> Reply:
        name = role(request)
        self.calls[name] = self.calls.get(name, 0) + 1
        return getattr(self, name)(request)


def _args(request: dict[str, Any]) -> dict[str, Any]:
    return json.loads(request["messages"][1]["content"]).get("arguments", {})


@pytest.fixture
def model() -> Iterator[tuple[Model, ScriptedLLMServer]]:
    m = Model()
    with ScriptedLLMServer(handler=m) as server:
        yield m, server


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    monkeypatch.setenv("AGENTSYNTH_LLM_CACHE", str(tmp_path / "llm-cache"))


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": WEATHER_TOOLS}))
    return path


def base(server: ScriptedLLMServer, **params: Any) -> dict[str, Any]:
    return {"model": "openai/scripted", "api_base": server.base_url, "cache": False, **params}
