"""A hostile API and a hostile agent: every attempt ends as a bounded error observation, and the
client never goes anywhere but the world's base URL."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from agentsynth_kernel import ToolCall
from agentsynth_rest import server
from agentsynth_rest.exploits import canary
from conftest import rest_env


@pytest.fixture
async def hostile():
    env = rest_env(app="hostile.py:create_app", openapi="hostile.yaml", call_seconds=1.5, max_response_bytes=4096)
    await env.reset(0)
    yield env
    await env.close()


async def test_a_huge_answer_is_read_only_up_to_the_cap(hostile):
    tracemalloc.start()
    obs = await hostile.step(ToolCall("huge", {}))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "longer than 4,096 bytes (max_response_bytes); the rest was not read" in obs.content
    assert obs.content.count("A") == 4096 and len(obs.content) < 5000
    assert peak < 5_000_000  # 100 MB were offered; a few chunks were read
    tracemalloc.start()
    obs = await hostile.step(ToolCall("gzipBomb", {}))  # 50 KB on the wire, 50 MB decoded
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "the rest was not read" in obs.content and obs.content.count("0") >= 4096 and len(obs.content) < 5000
    assert peak < 5_000_000  # inflated only up to the cap (httpx inflated the whole 50 MB: 130 MB at peak)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_a_compressed_answer_under_the_cap_is_decoded_whole(hostile, encoding):
    obs = await hostile.step(ToolCall("compressed", {"encoding": encoding}))
    assert not obs.error and "the rest was not read" not in obs.content
    assert obs.data["json"] == {"value": 0, "note": "z" * 3000}
    assert hostile.client is not None and hostile.client.headers["accept-encoding"] == "gzip, deflate"


def test_the_first_call_of_a_fresh_process_is_not_charged_the_http_backend_import():
    """httpcore imports anyio's asyncio backend on its first request (~0.3 s of CPU, seconds under
    load): reset loads it, so it does not eat into the first call's deadline."""
    import subprocess
    import sys

    from conftest import WORLD

    code = f"""
import asyncio, sys
sys.path.insert(0, {str(WORLD.parent)!r})
from conftest import rest_env
async def main():
    env = rest_env(app="hostile.py:create_app", openapi="hostile.yaml")
    await env.reset(0)
    print("anyio._backends._asyncio" in sys.modules)
    await env.close()
asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True"], out.stdout


@pytest.mark.parametrize("tool", ["drip", "stall"])
async def test_a_slow_answer_is_cut_at_the_deadline(hostile, tool):
    started = time.monotonic()
    obs = await hostile.step(ToolCall(tool, {}))
    took = time.monotonic() - started
    assert obs.error and "no complete answer within 1.5 s (call_seconds)" in obs.content
    assert 1.4 < took < 3.0
    assert not (await hostile.step(ToolCall("getCounter", {}))).error  # the world still answers
    slot = hostile._slot
    await hostile.close()
    # a server whose app is still stuck in that handler never goes back to the pool
    assert slot.active == 1 and slot not in server._idle and slot.server.should_exit


async def test_redirects_are_not_followed_and_proxies_are_ignored(hostile, monkeypatch):
    before = canary().hits
    obs = await hostile.step(ToolCall("redirect", {"to": f"{canary().url}/steal"}))
    assert obs.content.startswith("HTTP 302") and f"location: {canary().url}/steal" in obs.content
    monkeypatch.setenv("HTTP_PROXY", canary().url)
    monkeypatch.setenv("ALL_PROXY", canary().url)
    await hostile.reset(0)  # a new client, built while the proxy variables are set
    assert not (await hostile.step(ToolCall("getCounter", {}))).error
    assert canary().hits == before


@pytest.mark.parametrize("value", ["../admin", "..", ".", "a/b", "a\\b", "x\r\nHost: evil", "1\x00"])
async def test_path_arguments_cannot_climb_or_split(hostile, value):
    obs = await hostile.step(ToolCall("getItem", {"item_id": value}))
    assert obs.error and "is not a path segment" in obs.content


async def test_path_arguments_are_percent_encoded(hostile):
    obs = await hostile.step(ToolCall("getItem", {"item_id": "%2e%2e?x=1#frag"}))
    assert obs.data["json"]["raw_path"] == "/items/%252e%252e%3Fx%3D1%23frag"


async def test_header_injection_is_refused_and_bodies_are_bounded(hostile):
    obs = await hostile.step(ToolCall("echo", {"X-Trace": "a\r\nX-Admin-Token: forged"}))
    assert obs.error and "may not hold CR, LF or NUL" in obs.content
    obs = await hostile.step(ToolCall("echo", {"q": "a\r\nX-Admin: 1"}))  # a query value is encoded, not a header
    assert not obs.error and "x-admin" not in obs.data["json"]["headers"]
    obs = await hostile.step(ToolCall("echo", {"body": {"note": "A" * 2_000_000}}))
    assert obs.error and "at most 1,048,576 (max_request_bytes)" in obs.content
    obs = await hostile.step(ToolCall("echo", {"Host": "evil.example", "Authorization": "Bearer x"}))
    assert obs.error and "unknown argument(s) 'Authorization', 'Host'" in obs.content
