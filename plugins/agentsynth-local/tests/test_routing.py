"""``local`` model strings: the kernel asks the plugins, agentsynth-local answers; servers the user
runs are found; bad names fail with a message that says what to do."""

from __future__ import annotations

import asyncio

import pytest

from agentsynth_kernel import AgentsynthError, LLMClient, hookimpl, reset_plugins, resolve_route
from agentsynth_kernel.testing import ScriptedLLMServer, reply
from agentsynth_local.manager import Manager


class EchoModels:
    """A throw-away plugin serving ``local/echo`` from a scripted server."""

    def __init__(self, base: str):
        self.base, self.asked = base, []

    @hookimpl
    def local_model_endpoint(self, model):
        self.asked.append(model)
        return (self.base, "echo") if model == "local/echo" else None


def test_a_local_model_goes_where_the_plugin_says(host, tmp_path):
    with ScriptedLLMServer([reply("hello from echo")]) as server:
        plugin = EchoModels(server.base_url)
        host.add_plugin(plugin, "echo-models")
        route = resolve_route("local/echo")
        client = LLMClient(cache=tmp_path / "cache")
        answer = asyncio.run(client.complete([{"role": "user", "content": "hi"}], model="local/echo"))
        sent = server.requests[0].json
    assert (route.transport, route.api_base, route.wire_model, route.model) == (
        "openai", server.base_url.rstrip("/"), "echo", "local/echo")
    assert answer.content == "hello from echo" and sent["model"] == "echo"
    assert plugin.asked == ["local/echo", "local/echo"]


def test_without_a_plugin_serving_local_models_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setenv("AGENTSYNTH_DISABLE_PLUGINS", "local")
    reset_plugins()
    try:
        with pytest.raises(AgentsynthError, match="install agentsynth-local"):
            resolve_route("local")
    finally:
        reset_plugins()


def test_an_api_base_needs_no_plugin():
    route = resolve_route("local/my-model", api_base="http://127.0.0.1:9/v1/")
    assert (route.api_base, route.wire_model, route.model) == ("http://127.0.0.1:9/v1", "my-model", "local/my-model")


def test_a_server_the_user_runs_is_used_when_configured(monkeypatch):
    with ScriptedLLMServer(model="qwen2.5:0.5b") as server:
        monkeypatch.setenv("AGENTSYNTH_LOCAL_API_BASE", server.base_url)
        manager = Manager()
        assert manager.endpoint("local/server") == (server.base_url.rstrip("/"), "qwen2.5:0.5b")
        assert manager.endpoint("local") == (server.base_url.rstrip("/"), "qwen2.5:0.5b")
        with pytest.raises(AgentsynthError, match="does not serve 'llama3'"):
            manager.endpoint("local/server:llama3")
    assert not manager.servers  # nothing embedded was started


def test_ollama_that_is_not_running_is_named(monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:9")  # the discard port: nothing listens
    with pytest.raises(AgentsynthError, match="no Ollama answers at http://127.0.0.1:9/v1"):
        Manager().endpoint("local/ollama:llama3.2")


@pytest.mark.parametrize("model, message", [
    ("local/missing.gguf", "no such file"),
    ("local/no-such-model", "not a packaged model"),
])
def test_bad_local_names_fail_clearly(model, message):
    with pytest.raises(AgentsynthError, match=message):
        Manager().endpoint(model)


def test_the_default_model_ships_in_a_wheel():
    from agentsynth_local.models import find_gguf

    path = find_gguf("smollm2")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"
