"""Provider batch APIs through the LLM client, against BatchStandIn: a stand-in for OpenAI's and
Anthropic's batch endpoints (a real HTTP server on 127.0.0.1 speaking their wire formats; the real
endpoints cannot run here). Results map back by custom_id, failures stay per item, a run killed
with SIGKILL mid-batch resumes by polling the same batch, and the budget holds."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentsynth_kernel.errors import AgentsynthError, BudgetExceeded
from agentsynth_kernel.llm import LLMClient, LLMError, price_for, resolve_route
from agentsynth_kernel.llm.anthropic_wire import from_anthropic_message, to_anthropic_params
from agentsynth_kernel.llm.batch import BatchJournal, BatchSettings, protocol_for
from agentsynth_kernel.testing.batch_server import BatchStandIn

pytest_plugins = ["agentsynth_kernel.testing.pytest_plugin"]

KEY = "sk-batch-test-0123456789abcdef"
FAST = {"poll_s": 0.01, "collect_s": 0.05}


def make(server: BatchStandIn, tmp_path: Path, model: str = "openai/gpt-4o-mini", batch: dict | None = None,
         **kwargs) -> LLMClient:
    options = {"api_key": KEY, "cache": False, "backoff_base": 0.001, "backoff_max": 0.01, "timeout": 5.0,
               "batch": {**FAST, **(batch or {})}, "batch_journal": tmp_path / "batches.sqlite"}
    options.update(kwargs)
    return LLMClient(model, api_base=server.base_url, **options)


def ask(text: str) -> list[dict]:
    return [{"role": "system", "content": "Be terse."}, {"role": "user", "content": text}]


async def test_openai_batch_maps_results_back_by_custom_id(tmp_path):
    with BatchStandIn(polls_to_finish=3, api_key=KEY) as server:
        client = make(server, tmp_path)
        questions = [f"question {i}" for i in range(6)]
        answers = await asyncio.gather(*(client.complete(ask(q), temperature=0) for q in questions))
        await client.aclose()
    assert [a.content for a in answers] == [f"echo: {q}" for q in questions]
    assert len(server.uploads) == 1 and len(server.created) == 1  # one file, one batch for all six
    assert server.unauthorized == 0
    lines = [json.loads(x) for x in server.files[server.uploads[0]].decode().splitlines()]
    assert {x["url"] for x in lines} == {"/v1/chat/completions"} and {x["method"] for x in lines} == {"POST"}
    assert {x["body"]["model"] for x in lines} == {"gpt-4o-mini"}
    assert len({x["custom_id"] for x in lines}) == 6
    assert server.polls[server.created[0]] == 3
    # the batch price (half), not the direct one
    batch_in, batch_out = price_for("openai/gpt-4o-mini", batch=True)
    assert (batch_in, batch_out) != price_for("openai/gpt-4o-mini")
    assert answers[0].usage.prompt_tokens == 11 and answers[0].usage.completion_tokens == 5
    assert answers[0].usage.cost_usd == pytest.approx(11 * batch_in + 5 * batch_out)
    assert client.stats.batches == 1 and client.stats.batch_requests == 6 and client.stats.http_requests == 0


async def test_anthropic_batch_translates_and_maps_results(tmp_path):
    with BatchStandIn(polls_to_finish=2, api_key=KEY) as server:
        client = make(server, tmp_path, model="anthropic/claude-3-5-haiku-20241022", max_tokens=300)
        answers = await asyncio.gather(*(client.complete(ask(f"q{i}")) for i in range(3)))
        await client.aclose()
    assert [a.content for a in answers] == ["echo: q0", "echo: q1", "echo: q2"]
    assert server.created[0].startswith("msgbatch_") and server.unauthorized == 0
    params = [p for _, p in server.batches[server.created[0]]["items"]]
    assert {p["model"] for p in params} == {"claude-3-5-haiku-20241022"}
    assert params[0]["system"] == "Be terse." and params[0]["max_tokens"] == 300
    assert [m["role"] for m in params[0]["messages"]] == ["user"]
    assert answers[0].finish_reason == "stop" and answers[0].usage.prompt_tokens == 11


async def test_a_failed_item_fails_alone(tmp_path):
    def fail(custom_id, body):
        return "content policy" if "bad" in json.dumps(body) else None

    with BatchStandIn(fail_item=fail) as server:
        client = make(server, tmp_path)
        results = await asyncio.gather(*(client.complete(ask(q)) for q in ("good 1", "bad one", "good 2")),
                                       return_exceptions=True)
        await client.aclose()
    assert results[0].content == "echo: good 1" and results[2].content == "echo: good 2"
    assert isinstance(results[1], LLMError) and "content policy" in str(results[1])
    assert results[1].reason == "batch_item" and results[1].agentsynth_error_kind == "provider"
    assert client.ledger.in_flight == 0


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_an_expired_batch_gives_per_item_errors_and_keeps_what_finished(tmp_path, protocol):
    model = "openai/gpt-4o-mini" if protocol == "openai" else "anthropic/claude-3-5-haiku-20241022"
    with BatchStandIn(outcome="expired", expire_after=2) as server:
        client = make(server, tmp_path, model=model, budget_tokens=100_000, max_tokens=64)
        results = await asyncio.gather(*(client.complete(ask(f"q{i}")) for i in range(4)), return_exceptions=True)
        await client.aclose()
    assert [r.content for r in results[:2]] == ["echo: q0", "echo: q1"]
    assert all(isinstance(r, LLMError) and "expired" in str(r) for r in results[2:])
    # expired requests are not billed: only the two answers are spent
    assert client.ledger.spent_tokens == 2 * (11 + 5) and client.ledger.reserved_tokens == 0


async def test_a_failed_batch_fails_its_requests_not_the_caller(tmp_path):
    with BatchStandIn(outcome="failed") as server:
        client = make(server, tmp_path, budget_tokens=100_000, max_tokens=64)
        results = await asyncio.gather(*(client.complete(ask(f"q{i}")) for i in range(3)), return_exceptions=True)
        # the client still works: the next request goes in a batch of its own
        server.outcome = "completed"
        after = await client.complete(ask("later"))
        await client.aclose()
    assert all(isinstance(r, LLMError) and "failed" in str(r) for r in results)
    assert after.content == "echo: later" and len(server.created) == 2
    assert client.ledger.spent_tokens == 16 and client.stats.failures == 3


async def test_max_wait_cancels_and_charges_the_worst_case(tmp_path):
    with BatchStandIn(outcome="never") as server:
        client = make(server, tmp_path, batch={"max_wait_s": 0.1}, budget_tokens=100_000, max_tokens=64)
        started = time.monotonic()
        with pytest.raises(LLMError) as caught:
            await client.complete(ask("slow"))
        await client.aclose()
    assert time.monotonic() - started < 5
    assert caught.value.reason == "batch_timeout" and caught.value.billed_unknown
    assert server.cancelled == server.created  # it was cancelled at the provider
    # nobody knows whether it ran: its whole reservation stays spent
    assert client.ledger.spent_tokens > 64 and client.ledger.reserved_tokens == 0


async def test_budget_is_reserved_before_submission_and_holds(tmp_path):
    with BatchStandIn(usage=(60, 40)) as server:  # each answer really costs 100 tokens
        client = make(server, tmp_path, budget_tokens=300, max_tokens=64)
        results = await asyncio.gather(*(client.complete(ask(f"question {i}")) for i in range(8)),
                                       return_exceptions=True)
        await client.aclose()
    done = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BudgetExceeded)]
    assert done and refused and len(done) + len(refused) == 8
    sent = sum(len(server.batches[b]["items"]) for b in server.created)
    assert sent == len(done)  # what the budget refused never left
    assert client.ledger.spent_tokens <= 300 and client.ledger.overruns == 0
    for _, body in server.batches[server.created[0]]["items"]:  # the cap on the answer went with it
        assert body["max_tokens"] <= 64


async def test_a_cached_answer_sends_nothing(tmp_path):
    with BatchStandIn() as server:
        client = make(server, tmp_path, cache=tmp_path / "cache")
        first = await client.complete(ask("same"))
        second = await client.complete(ask("same"))
        await client.aclose()
    assert first.content == second.content == "echo: same"
    assert second.cached and len(server.created) == 1


async def test_identical_requests_in_one_batch_get_distinct_custom_ids(tmp_path):
    with BatchStandIn() as server:
        client = make(server, tmp_path)
        results = await asyncio.gather(*(client.complete(ask("twice")) for _ in range(3)))
        await client.aclose()
    ids = [c for c, _ in server.batches[server.created[0]]["items"]]
    assert len(set(ids)) == 3 and all(len(c) <= 64 for c in ids)
    assert {r.content for r in results} == {"echo: twice"}


async def test_a_foreign_results_url_is_not_followed_with_our_key(tmp_path):
    with BatchStandIn(results_url="http://127.0.0.2:9/steal", api_key=KEY) as server:
        client = make(server, tmp_path, model="anthropic/claude-3-5-haiku-20241022")
        answer = await client.complete(ask("q"))
        await client.aclose()
    assert answer.content == "echo: q"
    assert any(path.endswith(f"/messages/batches/{server.created[0]}/results") for _, path in server.log)


async def test_the_key_never_reaches_the_journal_or_errors(tmp_path):
    with BatchStandIn(outcome="failed") as server:
        client = make(server, tmp_path)
        with pytest.raises(LLMError) as caught:
            await client.complete(ask(f"my key is {KEY}"))
        await client.aclose()
    assert KEY not in str(caught.value)
    assert KEY.encode() not in (tmp_path / "batches.sqlite").read_bytes()


async def test_batch_false_sends_one_call_directly(tmp_path, llm_server):
    from agentsynth_kernel.testing import reply

    llm_server.add(reply("direct"))
    client = LLMClient("openai/m", api_base=llm_server.base_url, api_key=KEY, cache=False, batch=True,
                       batch_journal=tmp_path / "j.sqlite")
    answer = await client.complete(ask("q"), batch=False)
    await client.aclose()
    assert answer.content == "direct" and client.stats.batches == 0 and len(llm_server.requests) == 1


def test_which_routes_batch_and_how():
    auto = BatchSettings()
    assert protocol_for(resolve_route("openai/gpt-4o-mini"), auto) == "openai"
    assert protocol_for(resolve_route("hosted_vllm/m", "http://127.0.0.1:1/v1"), auto) == "openai"
    assert protocol_for(resolve_route("anthropic/claude-3-5-haiku-latest"), auto) == "anthropic"
    assert protocol_for(resolve_route("gemini/gemini-1.5-pro"), auto) is None  # no batch API here: direct
    with pytest.raises(AgentsynthError, match="batch.provider is 'anthropic'"):
        protocol_for(resolve_route("openai/gpt-4o-mini"), BatchSettings(provider="anthropic"))


async def test_max_requests_splits_batches(tmp_path):
    with BatchStandIn() as server:
        client = make(server, tmp_path, batch={"max_requests": 2})
        answers = await asyncio.gather(*(client.complete(ask(f"q{i}")) for i in range(5)))
        await client.aclose()
    assert [a.content for a in answers] == [f"echo: q{i}" for i in range(5)]
    assert sorted(len(server.batches[b]["items"]) for b in server.created) == [1, 2, 2]


async def test_an_ended_batch_in_the_journal_answers_without_asking_again(tmp_path):
    with BatchStandIn() as server:
        first = make(server, tmp_path)
        before = await first.complete(ask("once"))
        await first.aclose()
        polls = dict(server.polls)
        again = make(server, tmp_path)  # a new session on the same journal (the cache is off)
        after = await again.complete(ask("once"))
        await again.aclose()
    assert after.content == before.content == "echo: once"
    assert len(server.created) == 1 and server.polls == polls and again.stats.batch_resumed == 1


def test_settings_errors_name_the_key():
    with pytest.raises(AgentsynthError, match=r"batch.poll_s: expected a number of seconds"):
        BatchSettings.parse({"poll_s": "soon"})
    with pytest.raises(AgentsynthError, match=r"unknown key\(s\) 'pol_s'"):
        BatchSettings.parse({"pol_s": 1})
    with pytest.raises(AgentsynthError, match=r"batch.provider: expected auto, openai or anthropic"):
        BatchSettings.parse({"provider": "gemini"})
    with pytest.raises(AgentsynthError, match=r"\$AGENTSYNTH_LLM_BATCH: not a JSON object"):
        BatchSettings.parse("{nope", "$AGENTSYNTH_LLM_BATCH")
    assert BatchSettings.parse("off") is None and BatchSettings.parse(False) is None
    assert BatchSettings.parse("anthropic") == BatchSettings(provider="anthropic")
    assert BatchSettings.parse('{"poll_s": 5}') == BatchSettings(poll_s=5.0)


def test_the_environment_turns_batching_on(monkeypatch):
    monkeypatch.setenv("AGENTSYNTH_LLM_BATCH", '{"provider": "openai", "poll_s": 60}')
    assert LLMClient("openai/x", cache=False).batch == BatchSettings(provider="openai", poll_s=60.0)
    monkeypatch.setenv("AGENTSYNTH_LLM_BATCH", "off")
    assert LLMClient("openai/x", cache=False).batch is None


def test_a_damaged_journal_is_a_clear_error(tmp_path):
    path = tmp_path / "batches.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(AgentsynthError, match="not a usable batch journal"):
        BatchJournal.open(path)


def test_anthropic_translation_of_a_tool_conversation():
    request = {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "do it"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"k": "a"}'}},
                {"id": "c2", "type": "function", "function": {"name": "get", "arguments": '{"k": "b"'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "1"},
            {"role": "tool", "tool_call_id": "c2", "content": "2"},
        ],
        "tools": [{"type": "function", "function": {"name": "get", "description": "Read",
                                                    "parameters": {"type": "object"}}}],
        "tool_choice": "required", "parallel_tool_calls": False, "seed": 3, "stop": "END", "temperature": 0.5,
    }
    params = to_anthropic_params("claude-x", request, 1024)
    assert params["system"] == "sys" and params["max_tokens"] == 1024 and "seed" not in params
    assert [m["role"] for m in params["messages"]] == ["user", "assistant", "user"]
    uses = params["messages"][1]["content"]
    assert uses[0] == {"type": "tool_use", "id": "c1", "name": "get", "input": {"k": "a"}}
    assert uses[1]["input"] == {"_raw": '{"k": "b"'}  # broken JSON in the history is kept, not fatal
    assert [b["tool_use_id"] for b in params["messages"][2]["content"]] == ["c1", "c2"]
    assert params["tools"] == [{"name": "get", "description": "Read", "input_schema": {"type": "object"}}]
    assert params["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert params["stop_sequences"] == ["END"] and params["temperature"] == 0.5
    response, has_usage = from_anthropic_message({
        "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t1", "name": "set",
                                                      "input": {"v": 1}}],
        "stop_reason": "tool_use", "model": "claude-x",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3}})
    assert has_usage and response.content == "ok" and response.finish_reason == "tool_calls"
    assert response.tool_calls[0].name == "set" and json.loads(response.tool_calls[0].arguments) == {"v": 1}
    assert response.usage.prompt_tokens == 15 and response.usage.completion_tokens == 3


# --- kill -9 in the middle of a batch -------------------------------------------------------------

WORKER = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    from types import SimpleNamespace
    from agentsynth_kernel.llm import client_for
    from agentsynth_kernel.store import RunStore

    base, run_dir = sys.argv[1], Path(sys.argv[2])
    store = RunStore(run_dir)
    run = SimpleNamespace(services={}, spec=SimpleNamespace(budget=SimpleNamespace(usd=None, tokens=5000)),
                          journal=store, run_dir=run_dir, spent=None)
    client = client_for(run, api_base=base, api_key_env="BATCH_TEST_KEY", cache=False, max_tokens=64,
                        batch={"poll_s": 0.02, "collect_s": 0.1})

    async def main():
        qs = [f"question {i}" for i in range(4)]
        answers = await asyncio.gather(*(client.complete([{"role": "user", "content": q}], model="openai/gpt-4o-mini")
                                         for q in qs))
        await client.aclose()
        print(json.dumps({"answers": [a.content for a in answers], "resumed": client.stats.batch_resumed,
                          "batches": client.stats.batches, "spent_tokens": client.ledger.spent_tokens,
                          "spend": store.spend_total()}), flush=True)

    asyncio.run(main())
""")


def test_kill_9_mid_batch_resumes_by_polling_the_same_batch(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    run_dir = tmp_path / "run"
    env = {**os.environ, "BATCH_TEST_KEY": KEY, "AGENTSYNTH_LLM_CACHE": "off"}
    with BatchStandIn(api_key=KEY) as server:
        server.hold.set()  # the batch stays in progress until released
        proc = subprocess.Popen([sys.executable, str(script), server.base_url, str(run_dir)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (server.created and server.polls.get(server.created[0], 0) >= 3):
            time.sleep(0.02)
        assert server.created, proc.stderr.read() if proc.poll() is not None else "no batch was created"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
        batch_id = server.created[0]

        server.hold.clear()
        again = subprocess.run([sys.executable, str(script), server.base_url, str(run_dir)], env=env,
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr
        out = json.loads(again.stdout.strip().splitlines()[-1])
    assert out["answers"] == [f"echo: question {i}" for i in range(4)]
    assert server.created == [batch_id] and len(server.uploads) == 1  # polled, never resubmitted
    assert out["resumed"] == 4 and out["batches"] == 0
    # the killed session's worst-case reservations were settled at the real cost, nothing counted twice
    assert out["spent_tokens"] == 4 * (11 + 5)
    assert out["spend"] == [4 * (11 + 5), out["spend"][1], 0]


# --- a whole run ----------------------------------------------------------------------------------

RUN_SPEC = """
environment: {{type: kv, initial: {{a: "1"}}}}
tasks:
  - id: copy-a
    instruction: Copy the value of a into b.
    checkers: [{{type: kv_equals, key: b, value: "1"}}]
policy: {{type: llm, model: openai/gpt-4o-mini, api_base: {base}, api_key_env: BATCH_TEST_KEY, max_turns: 2}}
trials: 4
concurrency: 4
budget: {{tokens: 100000}}
"""


def test_a_run_batches_its_episodes_requests_and_keeps_the_journal_in_the_run_dir(host, write, tmp_path,
                                                                                  monkeypatch):
    from agentsynth_kernel.engine import execute
    from agentsynth_kernel.spec import load_run_spec

    monkeypatch.setenv("AGENTSYNTH_LLM_BATCH", json.dumps({"poll_s": 0.01, "collect_s": 0.2}))
    monkeypatch.setenv("AGENTSYNTH_LLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BATCH_TEST_KEY", KEY)
    with BatchStandIn(api_key=KEY) as server:
        spec, pack = load_run_spec(write("spec.yaml", RUN_SPEC.format(base=server.base_url)), host=host)
        report = asyncio.run(execute(spec, pack, host=host, run_dir=tmp_path / "run"))
    results = list(report.results)
    # answered (wrongly: nothing was set, so the checker fails them), no episode error
    assert [(r.status, r.error) for r in results] == [("failed", "")] * 4, [r.error for r in results]
    assert all("echo: Copy the value" in json.dumps(r.trajectory, default=str) for r in results)
    assert len(server.created) == 1 and len(server.batches[server.created[0]]["items"]) == 4
    assert (tmp_path / "run" / "llm-batches.sqlite").is_file()
