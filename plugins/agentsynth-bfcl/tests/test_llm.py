"""An LLM agent on a BFCL pack, through the kernel's llm policy and a real OpenAI-compatible server
on 127.0.0.1 with scripted answers: the BFCL functions are the model's tools, its parallel calls
are scored, and a model that writes the call as text instead of making it fails."""

from __future__ import annotations

import asyncio

from agentsynth_kernel import ComponentSpec, RunSpec, execute, load_pack
from agentsynth_kernel.testing import ScriptedLLMServer, reply, tool_calls

RIGHT = (("spotify_play", {"artist": "Taylor Swift", "duration": 20}),
         ("spotify_play", {"artist": "Maroon 5", "duration": 15}))


def run(server: ScriptedLLMServer):
    policy = ComponentSpec("llm", {"model": "hosted_vllm/scripted", "api_base": server.base_url, "cache": False,
                                   "max_turns": 4})
    spec = RunSpec(policy=policy, only=["parallel_0"], timeout=60)
    return asyncio.run(execute(spec, load_pack("bfcl:parallel"))).results[0]


def answered(request) -> bool:
    return any(m.get("role") == "tool" for m in request["messages"])


def test_a_model_making_the_parallel_calls_passes(monkeypatch):
    monkeypatch.setenv("HOSTED_VLLM_API_KEY", "sk-test")
    with ScriptedLLMServer(handler=lambda r: reply("Playing both.") if answered(r) else tool_calls(*RIGHT)) \
            as server:
        result = run(server)
        first = server.requests[0].json
    assert result.status == "passed", result.why
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(tools) == {"spotify_play"}  # BFCL's spotify.play, offered under an OpenAI-valid name
    params = tools["spotify_play"]["parameters"]
    assert params["type"] == "object" and params["properties"]["duration"]["type"] == "integer"
    assert first["messages"][-1]["content"].startswith("Play songs from the artists Taylor Swift and Maroon 5")
    assert [s.turn for s in result.trajectory.steps[:2]] == [0, 0]  # one turn, two parallel calls


def test_a_model_that_says_the_call_instead_of_making_it_fails(monkeypatch):
    monkeypatch.setenv("HOSTED_VLLM_API_KEY", "sk-test")
    text = 'spotify.play(artist="Taylor Swift", duration=20); spotify.play(artist="Maroon 5", duration=15)'
    with ScriptedLLMServer(handler=lambda r: reply(text)) as server:
        result = run(server)
    assert result.status == "failed" and "0 call(s) made" in result.why


def test_a_model_with_one_wrong_value_fails(monkeypatch):
    monkeypatch.setenv("HOSTED_VLLM_API_KEY", "sk-test")
    wrong = (RIGHT[0], ("spotify_play", {"artist": "Maroon 5", "duration": 20}))
    with ScriptedLLMServer(handler=lambda r: reply("ok") if answered(r) else tool_calls(*wrong)) as server:
        result = run(server)
    assert result.status == "failed" and "invalid value for parameter 'duration'" in result.why
