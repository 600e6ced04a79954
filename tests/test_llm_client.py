"""The LLM client against a real OpenAI-compatible server on 127.0.0.1 (no network, no key)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsynth_kernel.errors import BudgetExceeded
from agentsynth_kernel.llm import (
    BudgetLedger,
    BudgetUnenforceable,
    LLMClient,
    LLMError,
    client_for,
    completion_cap_param,
    price_for,
    redact_secrets,
    redact_text,
    resolve_route,
)
from agentsynth_kernel.records import ToolSpec, Usage
from agentsynth_kernel.testing import (
    ScriptedLLMServer,
    disconnect,
    garbage,
    hang,
    reply,
    status,
    tool_calls,
)

pytest_plugins = ["agentsynth_kernel.testing.pytest_plugin"]

MESSAGES = [{"role": "user", "content": "What is in key a?"}]
KEY = "sk-test-abcdefghijklmnop"


def make_client(server: ScriptedLLMServer, **kwargs) -> LLMClient:
    options = {"api_key": KEY, "cache": False, "backoff_base": 0.001, "backoff_max": 0.01, "timeout": 5.0}
    options.update(kwargs)
    return LLMClient("openai/scripted-model", api_base=server.base_url, **options)


async def test_fast_path_text_and_tool_calls(llm_server):
    llm_server.add(tool_calls(("get", {"key": "a"}), ("set", '{"key": "b"', "c9")), reply("a is 1", usage=(7, 3)))
    client = make_client(llm_server)
    tools = [ToolSpec("get", "Read", {"type": "object", "properties": {"key": {"type": "string"}}})]
    first = await client.complete(MESSAGES, tools=tools, temperature=0.2, headers={"X-Title": "agentsynth-test"})
    assert [c.name for c in first.tool_calls] == ["get", "set"]
    assert json.loads(first.tool_calls[0].arguments) == {"key": "a"}
    assert first.tool_calls[1].arguments == '{"key": "b"' and first.tool_calls[1].id == "c9"  # raw, even when broken
    assert first.message()["tool_calls"][1]["function"]["arguments"] == '{"key": "b"'
    second = await client.complete([*MESSAGES, first.message()])
    assert second.content == "a is 1" and second.tool_calls == []
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (7, 3)
    assert second.usage.cost_usd is None  # unknown model: cost is unknown, not 0
    sent = llm_server.requests[0]
    assert sent.json["model"] == "scripted-model"  # provider prefix stripped on the wire
    assert sent.json["tools"][0]["function"]["name"] == "get" and sent.json["temperature"] == 0.2
    assert sent.headers["authorization"] == f"Bearer {KEY}" and sent.headers["x-title"] == "agentsynth-test"
    assert client.stats.requests == 2 and client.stats.http_requests == 2 and client.stats.cost_unknown == 2
    await client.aclose()


async def test_retries_on_429_5xx_garbage_and_disconnects_are_counted(llm_server):
    llm_server.add(status(429, headers={"Retry-After": "0"}), status(503), garbage(), garbage('{"choices": []}'),
                   disconnect(), reply("finally"))
    client = make_client(llm_server, max_retries=5)
    response = await client.complete(MESSAGES)
    assert response.content == "finally"
    assert response.attempts == 6 and len(llm_server.requests) == 6
    assert client.stats.retries == 5
    assert client.stats.retry_reasons == {"429": 1, "503": 1, "malformed": 2, "connection": 1}
    assert response.usage.requests == 6


async def test_timeouts_are_retried(llm_server):
    llm_server.add(hang(10), reply("ok"))
    client = make_client(llm_server, timeout=0.3)
    started = time.perf_counter()
    response = await client.complete(MESSAGES)
    assert response.content == "ok" and client.stats.retry_reasons == {"timeout": 1}
    assert time.perf_counter() - started < 5


async def test_gives_up_with_a_provider_error(llm_server):
    llm_server.add(*[status(500, {"error": {"message": f"boom, your key {KEY} is fine"}}) for _ in range(3)])
    client = make_client(llm_server, max_retries=2)
    with pytest.raises(LLMError) as info:
        await client.complete(MESSAGES)
    exc = info.value
    assert exc.agentsynth_error_kind == "provider" and exc.attempts == 3 and exc.status == 500
    assert "gave up after 3 attempts" in str(exc) and "boom" in str(exc)
    assert KEY not in str(exc)  # the key never reaches an error message
    assert len(llm_server.requests) == 3 and client.stats.failures == 1


async def test_client_errors_are_not_retried(llm_server):
    llm_server.add(status(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    client = make_client(llm_server)
    with pytest.raises(LLMError) as info:
        await client.complete(MESSAGES)
    assert info.value.status == 401 and info.value.attempts == 1
    assert KEY not in str(info.value) and "Incorrect API key" in str(info.value)
    assert client.stats.retries == 0 and len(llm_server.requests) == 1


async def test_cache_replays_with_zero_requests_and_no_secrets(llm_server, tmp_path):
    llm_server.add(reply("first"))
    client = make_client(llm_server, cache=tmp_path / "cache")
    assert (await client.complete(MESSAGES, temperature=0.0)).content == "first"
    assert len(llm_server.requests) == 1
    # a new client (a re-run) on the same cache directory: replayed, nothing sent
    replay = make_client(llm_server, cache=tmp_path / "cache", api_key="sk-other-key-1234567")
    hit = await replay.complete(MESSAGES, temperature=0.0)
    assert hit.content == "first" and hit.cached and hit.usage == Usage(0, 0, 0.0, 0)  # a hit spends nothing
    assert hit.original_usage.prompt_tokens > 0 and hit.original_usage.requests == 1
    assert len(llm_server.requests) == 1 and replay.stats.cache_hits == 1 and replay.stats.http_requests == 0
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1 and KEY.encode() not in files[0].read_bytes()
    # a different request, a different salt, or cache=False: sent
    llm_server.add(reply("x"), reply("y"), reply("z"))
    await replay.complete(MESSAGES, temperature=0.5)
    await replay.complete(MESSAGES, temperature=0.0, cache_salt="trial-2")
    await replay.complete(MESSAGES, temperature=0.0, cache=False)
    assert len(llm_server.requests) == 4


async def test_token_budget_is_a_hard_cap(llm_server):
    llm_server.handler = lambda request: reply("word " * 50, usage=(10, 50))
    client = make_client(llm_server, budget_tokens=400, max_tokens=100)
    spent = 0
    with pytest.raises(BudgetExceeded, match="budget reached"):
        for _ in range(50):
            response = await client.complete(MESSAGES)
            spent += response.usage.prompt_tokens + response.usage.completion_tokens
    assert spent == client.ledger.spent_tokens <= 400
    assert client.stats.budget_refusals == 1
    # near the end, max_tokens is shrunk to what is left, so the provider cannot overshoot
    caps = [r.json["max_tokens"] for r in llm_server.requests]
    assert caps[0] == 100 and min(caps) < 100
    assert client.ledger.overruns == 0 and client.ledger.reserved_tokens == 0


async def test_usd_budget_needs_a_price(llm_server):
    client = make_client(llm_server, budget_usd=1.0)
    with pytest.raises(BudgetUnenforceable, match="price of model"):
        await client.complete(MESSAGES)
    assert llm_server.requests == []


async def test_cost_metering_with_prices(llm_server):
    llm_server.add(reply("a", usage=(1000, 200)), reply("b", usage=(10, 10)))
    client = make_client(llm_server, prices={"openai/scripted-model": (1e-6, 4e-6)}, budget_usd=0.01)
    first = await client.complete(MESSAGES)
    assert first.usage.cost_usd == pytest.approx(1000e-6 + 800e-6)
    await client.complete(MESSAGES)
    assert client.stats.cost_usd == pytest.approx(1.8e-3 + 10e-6 + 40e-6)
    assert client.ledger.spent_usd == pytest.approx(client.stats.cost_usd)


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
def test_price_table_is_read_without_importing_litellm():
    code = ("import sys; from agentsynth_kernel.llm import price_for; p = price_for('openai/gpt-4o-mini');"
            "print(p is not None and p[0] > 0, 'litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
    assert out == ["True", "False"]
    assert price_for("openai/no-such-model-xyz") is None
    assert price_for("openai/no-such-model-xyz", {"no-such-model-xyz": {"input": 1, "output": 2}}) == (1.0, 2.0)


async def test_concurrency_limit(llm_server):
    llm_server.latency = 0.1
    client = make_client(llm_server, concurrency=2)
    llm_server.handler = lambda request: reply("ok")
    started = time.perf_counter()
    await asyncio.gather(*(client.complete(MESSAGES) for _ in range(6)))
    assert time.perf_counter() - started >= 0.29  # 6 requests, 2 at a time, 0.1 s each


def let_go(monkeypatch, stall=None) -> list[float]:
    """When each request was posted by the real HTTP transport (what ``rpm`` spaces): the times
    the server reads them also carry connection set-up and thread scheduling, which on a loaded
    machine took up to 0.4 s for a first connection. ``stall(n)`` runs as the n-th goes."""
    from agentsynth_kernel.llm import fast

    stamps: list[float] = []
    for name in ("_post_aiohttp", "_post_httpx"):
        post = getattr(fast.FastTransport, name)

        async def spy(self, *args, _post=post, **kwargs):
            stamps.append(time.monotonic())
            if stall is not None:
                stall(len(stamps))
            return await _post(self, *args, **kwargs)

        monkeypatch.setattr(fast.FastTransport, name, spy)
    return stamps


def spaced(stamps: list[float], interval: float) -> bool:
    return all(b - a >= interval - 0.002 for a, b in zip(stamps, stamps[1:], strict=False))  # clock granularity


async def test_requests_per_minute(llm_server, monkeypatch):
    llm_server.handler = lambda request: reply("ok")
    stamps = let_go(monkeypatch)
    client = make_client(llm_server, rpm=600)  # one every 0.1 s
    started = time.perf_counter()
    await asyncio.gather(*(client.complete(MESSAGES) for _ in range(4)))
    assert time.perf_counter() - started >= 0.29
    assert len(stamps) == 4 == llm_server.count and spaced(stamps, 0.1), stamps


@pytest.mark.parametrize("delay", ["the first use imports the HTTP backend slowly", "the event loop stalls"])
async def test_requests_per_minute_after_a_delay_are_not_a_burst(llm_server, monkeypatch, delay):
    """The limiter booked a start time per request ahead: whatever held the first ones back (an
    aiohttp import of 1-3 s on a busy machine, a stalled loop) made every booked time overdue
    together, and they left within a millisecond of each other."""
    from agentsynth_kernel.llm import fast

    llm_server.handler = lambda request: reply("ok")
    if delay.startswith("the first use"):
        imported = fast.import_off_loop
        slow: list[asyncio.Future[None]] = []

        async def slow_import(name):
            if not slow:  # one import for every caller, as the real one is
                slow.append(asyncio.ensure_future(asyncio.sleep(0.35)))
            await asyncio.shield(slow[0])
            return await imported(name)

        monkeypatch.setattr(fast, "import_off_loop", slow_import)
        stamps = let_go(monkeypatch)
    else:
        # the loop blocked while the second request goes, when the third and fourth already wait their turn
        stamps = let_go(monkeypatch, stall=lambda n: time.sleep(0.35) if n == 2 else None)
    client = make_client(llm_server, rpm=600)
    await asyncio.gather(*(client.complete(MESSAGES) for _ in range(4)))
    assert len(stamps) == 4 == llm_server.count and spaced(stamps, 0.1), [round(b - a, 3) for a, b in
                                                                           zip(stamps, stamps[1:], strict=False)]


async def test_cancelled_request_is_charged_its_reservation(llm_server):
    llm_server.add(hang(10))
    client = make_client(llm_server, budget_tokens=10_000, max_tokens=100)
    task = asyncio.ensure_future(client.complete(MESSAGES))
    while not llm_server.requests:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.ledger.reserved_tokens == 0 and client.ledger.in_flight == 0
    assert client.ledger.spent_tokens > 100  # the worst case, since it may have been processed


def test_complete_sync_and_a_new_event_loop_each_time(llm_server):
    llm_server.handler = lambda request: reply("sync")
    client = make_client(llm_server)
    assert client.complete_sync(MESSAGES).content == "sync"
    assert client.complete_sync(MESSAGES).content == "sync"  # pools are rebuilt for the new loop


async def test_httpx_fallback_backend(llm_server):
    llm_server.add(status(500), reply("via httpx"))
    client = make_client(llm_server, http_backend="httpx")
    response = await client.complete(MESSAGES)
    assert response.content == "via httpx" and client.stats.retries == 1
    await client.aclose()


async def test_litellm_transport_same_interface(llm_server):
    pytest.importorskip("litellm")
    llm_server.add(status(500), tool_calls(("get", {"key": "a"})), reply("done", usage=(5, 1)))
    client = make_client(llm_server, transport="litellm")
    first = await client.complete(MESSAGES)
    assert first.tool_calls[0].name == "get" and json.loads(first.tool_calls[0].arguments) == {"key": "a"}
    assert client.stats.retries == 1 and client.stats.retry_reasons == {"500": 1}
    second = await client.complete([*MESSAGES, first.message(),
                                    {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "1"}])
    assert second.content == "done" and second.usage.prompt_tokens == 5
    assert llm_server.requests[-1].json["messages"][-1]["role"] == "tool"


def test_routes():
    assert resolve_route("gpt-4o-mini").transport == "openai"
    fast = resolve_route("openai/gpt-4o-mini")
    assert (fast.wire_model, fast.api_base, fast.key_env) == ("gpt-4o-mini", "https://api.openai.com/v1", "OPENAI_API_KEY")
    assert resolve_route("anthropic/claude-3-5-haiku-latest").transport == "litellm"
    assert resolve_route("anthropic/claude", "http://localhost:4000").transport == "litellm"
    vllm = resolve_route("hosted_vllm/Qwen/Qwen2.5-7B", "http://localhost:8000/v1/")
    assert (vllm.transport, vllm.wire_model, vllm.api_base) == ("openai", "Qwen/Qwen2.5-7B", "http://localhost:8000/v1")
    local = resolve_route("meta-llama/Llama-3.1-8B", "http://localhost:8000/v1")
    assert (local.transport, local.wire_model) == ("openai", "meta-llama/Llama-3.1-8B")
    assert resolve_route("openai/x", transport="litellm").transport == "litellm"
    with pytest.raises(Exception, match="needs an api_base"):
        resolve_route("hosted_vllm/x")
    with pytest.raises(ValueError, match="transport"):
        resolve_route("openai/x", transport="grpc")


def test_redact_secrets(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "super-secret-value-42")
    spec = {
        "policy": {"type": "llm", "model": "openai/x", "api_key": "plain-key-value", "api_key_env": "OPENAI_API_KEY",
                   "max_tokens": 100, "params": {"extra_headers": {"Authorization": "Bearer abcdefghijkl"}}},
        "budget": {"tokens": 5000, "usd": 1.0},
        "notes": ["the key is super-secret-value-42", "sk-proj-ABCDEFGHIJKLMNOP in text"],
        "environment": {"type": "kv", "key": "a"},
    }
    clean = redact_secrets(spec)
    text = json.dumps(clean)
    assert "plain-key-value" not in text and "super-secret-value-42" not in text and "abcdefghijkl" not in text
    assert "sk-proj-ABCDEFGHIJKLMNOP" not in text
    assert clean["policy"]["api_key_env"] == "OPENAI_API_KEY" and clean["policy"]["max_tokens"] == 100
    assert clean["budget"] == {"tokens": 5000, "usd": 1.0} and clean["environment"]["key"] == "a"
    assert spec["policy"]["api_key"] == "plain-key-value"  # a copy, the input is untouched
    assert redact_text("use sk-abcdefghijkl now") == "use <redacted> now"


def test_client_for_is_run_scoped():
    run = SimpleNamespace(services={}, spec=SimpleNamespace(budget=SimpleNamespace(usd=None, tokens=1234)))
    client = client_for(run)
    assert client_for(run) is client and run.services["llm"] is client
    assert client.ledger.token_cap == 1234 and client.ledger.usd_cap is None
    assert client_for(None) is client_for(None) is not client
    resumed = SimpleNamespace(services={}, spent=Usage(100, 50, 0.25, 3),
                              spec=SimpleNamespace(budget=SimpleNamespace(usd=1.0, tokens=None)))
    ledger = client_for(resumed).ledger
    assert (ledger.spent_tokens, ledger.spent_usd, ledger.usd_cap) == (150, 0.25, 1.0)
    assert "sk-" not in repr(LLMClient("openai/x", api_key="sk-abcdefghijklmnop"))


@pytest.mark.parametrize("argv", [["--help"], ["plugins", "--json"]])
def test_cli_does_not_import_http_or_litellm(argv, tmp_path):
    code = ("import sys, runpy; sys.argv = ['agentsynth', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('agentsynth_kernel', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('litellm', 'httpx', 'aiohttp', 'openai') if m in sys.modules)\n"
            "print('HEAVY=' + ','.join(heavy))")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60, env=env,
                         cwd=tmp_path)
    assert "HEAVY=\n" in out.stdout or out.stdout.rstrip().endswith("HEAVY="), out.stdout[-500:] + out.stderr[-2000:]


# --- the budget cap under concurrency (property-style) ---------------------------------------------


@pytest.fixture(scope="module")
def shared_server():
    with ScriptedLLMServer(log_requests=False) as server:
        yield server


def test_ledger_reserve_settle_property():
    """The ledger alone, with random worst cases and random real costs <= them, 32 at a time."""

    @settings(max_examples=40, deadline=None)
    @given(cap=st.integers(50, 5000), jobs=st.lists(st.tuples(st.integers(1, 60), st.integers(1, 300),
                                                              st.floats(0, 1)), min_size=1, max_size=80))
    def check(cap, jobs):
        async def main():
            ledger = BudgetLedger(tokens=cap)
            peak = 0

            async def job(prompt, max_completion, fraction):
                nonlocal peak
                try:
                    res = await ledger.reserve(prompt, max_completion, None, min_completion=8)
                except BudgetExceeded:
                    return 0
                peak = max(peak, ledger.spent_tokens + ledger.reserved_tokens)
                await asyncio.sleep(0)
                used = prompt + int(res.completion_allowance * fraction)
                ledger.settle(res, used, None)
                return used

            sem = asyncio.Semaphore(32)

            async def limited(*args):
                async with sem:
                    return await job(*args)

            used = await asyncio.gather(*(limited(*j) for j in jobs))
            assert sum(used) == ledger.spent_tokens <= cap
            assert peak <= cap and ledger.reserved_tokens == 0 and ledger.overruns == 0

        asyncio.run(main())

    check()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    budget=st.one_of(st.tuples(st.just("tokens"), st.integers(200, 6000)),
                     st.tuples(st.just("usd"), st.floats(0.0005, 0.02))),
    usages=st.lists(st.tuples(st.integers(1, 30), st.integers(1, 400)), min_size=1, max_size=12),
    requests=st.integers(32, 96),
)
def test_budget_cap_holds_over_http_at_concurrency_32(shared_server, budget, usages, requests):
    """Random per-request costs from a real server, 32 requests in flight: the cap is never exceeded,
    every request either completes or is refused with BudgetExceeded, and nothing stays reserved."""
    counter = iter(range(10**9))
    shared_server.handler = lambda request: reply("x", usage=usages[next(counter) % len(usages)])
    kind, cap = budget
    prices = {"openai/scripted-model": (2e-6, 8e-6)}
    client = LLMClient("openai/scripted-model", api_base=shared_server.base_url, api_key="k", cache=False,
                       concurrency=32, max_tokens=256, prices=prices,
                       budget_tokens=cap if kind == "tokens" else None, budget_usd=cap if kind == "usd" else None)

    async def main():
        async def one():
            try:
                response = await client.complete([{"role": "user", "content": "go " * 10}])
            except BudgetExceeded:
                return None
            return response.usage

        results = await asyncio.gather(*(one() for _ in range(requests)))
        await client.aclose()
        return [r for r in results if r is not None]

    done = asyncio.run(main())
    tokens = sum(u.prompt_tokens + u.completion_tokens for u in done)
    usd = sum(u.cost_usd for u in done)
    if kind == "tokens":
        assert tokens == client.ledger.spent_tokens <= cap
    else:
        assert usd == pytest.approx(client.ledger.spent_usd) and client.ledger.spent_usd <= cap + 1e-12
    assert client.ledger.reserved_tokens == 0 and client.ledger.reserved_usd == pytest.approx(0, abs=1e-12)
    assert client.ledger.overruns == 0 and client.ledger.in_flight == 0
    assert len(done) + client.stats.budget_refusals == requests


async def test_answer_cap_field_per_endpoint(llm_server):
    assert completion_cap_param(resolve_route("openai/o3-mini")) == "max_completion_tokens"
    assert completion_cap_param(resolve_route("hosted_vllm/x", "http://h:8000/v1")) == "max_tokens"
    assert completion_cap_param(resolve_route("anthropic/claude-3-5-haiku-latest")) == "max_tokens"
    llm_server.add(reply("a"), reply("b"))
    client = make_client(llm_server)
    await client.complete(MESSAGES, max_completion_tokens=33)  # either name is accepted
    await client.complete(MESSAGES, max_tokens=44)
    assert [r.json["max_tokens"] for r in llm_server.requests] == [33, 44]


async def test_a_missing_key_fails_at_once_without_sending(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient("openai/gpt-4o-mini", cache=False, budget_tokens=10_000)
    with pytest.raises(LLMError, match="no API key: set OPENAI_API_KEY") as info:
        await client.complete(MESSAGES)
    assert info.value.agentsynth_error_kind == "provider" and client.stats.http_requests == 0
    assert client.ledger.reserved_tokens == 0 and client.ledger.in_flight == 0


async def test_cancelled_before_sending_costs_nothing(llm_server):
    llm_server.add(hang(10))
    client = make_client(llm_server, budget_tokens=10_000, max_tokens=100, concurrency=1)
    first = asyncio.ensure_future(client.complete(MESSAGES))
    while not llm_server.requests:
        await asyncio.sleep(0.01)
    second = asyncio.ensure_future(client.complete(MESSAGES))  # waits for the only slot
    await asyncio.sleep(0.05)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert client.ledger.spent_tokens == 0 and client.ledger.in_flight == 1
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert client.ledger.spent_tokens > 100 and client.ledger.in_flight == 0 and len(llm_server.requests) == 1


async def test_load_server_as_a_separate_process():
    proc = subprocess.Popen([sys.executable, "-m", "agentsynth_kernel.testing", "--content", "pong"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.startswith("listening on http://127.0.0.1:")
        client = LLMClient("openai/any", api_base=line.split()[-1], cache=False)
        responses = await asyncio.gather(*(client.complete(MESSAGES) for _ in range(5)))
        assert [r.content for r in responses] == ["pong"] * 5
        await client.aclose()
    finally:
        proc.terminate()
        proc.wait(5)


async def test_one_client_from_the_loop_and_a_worker_thread_at_once(llm_server):
    """A sync caller on another thread (its own event loop) shares the budget, not the pools."""
    llm_server.latency = 0.05
    llm_server.handler = lambda request: reply("ok", usage=(5, 5))
    client = make_client(llm_server, budget_tokens=10_000, max_tokens=50)
    on_loop = [client.complete(MESSAGES) for _ in range(4)]
    in_thread = asyncio.to_thread(lambda: [client.complete_sync(MESSAGES) for _ in range(3)])
    results = await asyncio.gather(*on_loop, in_thread)
    assert [r.content for r in results[:4]] == ["ok"] * 4 and [r.content for r in results[4]] == ["ok"] * 3
    assert client.ledger.spent_tokens == 70 and client.ledger.in_flight == 0 and client.ledger.reserved_tokens == 0
    assert (await client.complete(MESSAGES)).content == "ok"  # the loop's pool is still fine


async def test_the_pytest_fixtures(llm_server, llm_client):
    llm_server.add(status(500), reply("fixture"))
    response = await llm_client.complete(MESSAGES)
    assert response.content == "fixture" and llm_client.stats.retries == 1
    assert llm_server.requests[-1].headers["authorization"] == "Bearer test-key"


async def test_the_scripted_server_streams_when_asked(llm_server):
    """Clients that always stream (verifiers' chat loop) get the same answer as server-sent events."""
    import httpx

    llm_server.add(tool_calls(("lookup", {"key": "a"})), reply("it is 1"))
    body = {"model": "m", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
    async with httpx.AsyncClient() as http:
        first = await http.post(f"{llm_server.base_url}/chat/completions", json=body)
        second = await http.post(f"{llm_server.base_url}/chat/completions", json=body)
    assert first.headers["content-type"] == "text/event-stream"
    events = [line[6:] for line in first.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    calls = [c for chunk in chunks for choice in chunk["choices"] for c in choice["delta"].get("tool_calls", [])]
    assert [c["function"]["name"] for c in calls] == ["lookup"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"key": "a"}
    assert chunks[-1]["usage"]["completion_tokens"] >= 0 and chunks[-1]["choices"] == []
    text = "".join(choice["delta"].get("content", "") for line in second.text.splitlines()
                   if line.startswith("data: {") for choice in json.loads(line[6:])["choices"])
    assert text == "it is 1"
