"""single_agent and back over a catalog (simulated results), staged verification, reject statistics,
failures that fail one item, determinism, and the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import agentsynth, agentsynth_process

from agentsynth_generate import generate_records
from agentsynth_kernel import validate_arguments
from agentsynth_kernel.testing import reply, status, tool_calls
from conftest import WEATHER_TOOLS, base


def test_single_agent_record_is_an_openai_tool_conversation(model: Any) -> None:
    m, server = model
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"]))
    (record,) = records
    roles = [msg["role"] for msg in record["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = record["messages"][2]["tool_calls"][0]
    assert record["messages"][2]["content"] == "I will look up the forecast for Lisbon."  # the reasoning
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Lisbon"}
    assert record["messages"][3]["tool_call_id"] == call["id"]
    assert json.loads(record["messages"][3]["content"])["forecast"] == "sunny"  # the simulator's answer
    assert record["messages"][4]["content"] == "It will be sunny, 21 C."
    assert record["tools"] == WEATHER_TOOLS
    # never presented as verified: the results were written by a model, and nothing checked a world
    assert record["grounding"] == "simulated" and record["verification"]["world"] == "not_checked"
    assert report["stages"]["semantic"]["passed"] == 1 and report["accepted"] == 1
    assert report["llm_requests"] == 4 == record["llm_requests"]  # agent x2, simulator, semantic
    assert report["llm_requests_per_accepted"] == 4.0


@pytest.mark.parametrize(("bad_call", "reason"), [
    (("get_wether", {"city": "Oslo"}), "unknown_tool"),
    (("get_weather", '{"city": "Oslo"'), "bad_json"),
    (("get_weather", {"city": 7}), "schema"),
    (("get_weather", {"city": "Oslo", "days": 30}), "schema"),
    (("book_hotel", {"city": "Oslo", "nights": 1, "pets": True}), "schema"),
])
def test_format_stage_rejects_bad_calls_and_keeps_the_reason(model: Any, bad_call: Any, reason: str) -> None:
    m, server = model
    m.agent = lambda r: reply("done") if any(x["role"] == "tool" for x in r["messages"]) else tool_calls(bad_call)
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Oslo?"]))
    assert records == []
    assert report["stages"]["format"] == {"entered": 1, "passed": 0, "rejected": {reason: 1}, "pass_rate": 0.0}
    assert report["stages"]["execution"]["entered"] == 0  # later stages never see it
    assert m.calls.get("simulator", 0) == 0  # an invalid call is never executed


def test_rejected_records_keep_stage_and_reason(model: Any, tmp_path: Path, tools_file: Path) -> None:
    m, server = model
    m.simulator = lambda r: reply('{"error": "city not found"}')
    out, rejected = tmp_path / "out.jsonl", tmp_path / "rejected.jsonl"
    proc = agentsynth("generate", "--tools", str(tools_file), "-q", "Weather in Atlantis?", "--model", "openai/scripted",
                      "--api-base", server.base_url, "--no-cache", "-o", str(out), "--rejected", str(rejected),
                      "--json", "-")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["stages"]["execution"]["rejected"] == {"tool_error": 1}
    assert out.read_text() == ""
    (row,) = [json.loads(line) for line in rejected.read_text().splitlines()]
    assert row["rejected"]["stage"] == "execution" and "city not found" in row["rejected"]["detail"]
    assert "[1/1] q0-0-single_agent: rejected at execution (tool_error)" in proc.stderr


def test_execution_stage_rejects_loops(model: Any) -> None:
    m, server = model
    m.agent = lambda r: tool_calls(("get_weather", {"city": "Oslo"}))  # never answers, same call forever
    m.simulator = lambda r: reply("{}")
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Oslo?"], max_turns=4))
    assert report["stages"]["format"]["rejected"] == {"no_final_answer": 1}
    m.agent = lambda r: (reply("done") if sum(x["role"] == "tool" for x in r["messages"]) >= 3 else
                         tool_calls(("get_weather", {"city": "Oslo", "days": sum(x["role"] == "tool" for x in r["messages"]) + 1})))
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Oslo?"]))
    assert report["stages"]["execution"]["rejected"] == {"empty_observation_loop": 1}
    m.simulator = lambda r: reply('{"forecast": "rain"}')
    m.agent = lambda r: (reply("rain") if sum(x["role"] == "tool" for x in r["messages"]) >= 2 else
                         tool_calls(("get_weather", {"city": "Oslo"})))
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Oslo?"]))
    assert report["stages"]["execution"]["rejected"] == {"repeated_call": 1}


def test_a_flood_of_parallel_calls_is_not_executed(model: Any) -> None:
    m, server = model
    m.agent = lambda r: tool_calls(*[("get_weather", {"city": f"c{i}"}, f"c{i}") for i in range(200)])
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather everywhere"]))
    assert report["stages"]["format"]["rejected"] == {"too_many_calls": 1}
    assert m.calls.get("simulator", 0) == 0


def test_megabytes_of_arguments_are_not_executed(model: Any) -> None:
    m, server = model
    m.agent = lambda r: tool_calls(("get_weather", {"city": "x" * 400_000}))
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather?"]))
    assert report["stages"]["format"]["rejected"] == {"arguments_too_large": 1}
    assert m.calls.get("simulator", 0) == 0


def test_semantic_stage(model: Any) -> None:
    m, server = model
    m.semantic = lambda r: reply('{"satisfied": false, "reason": "the answer ignores the hotel"}')
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Oslo?"]))
    assert records == [] and report["stages"]["semantic"]["rejected"] == {"unsatisfied": 1}
    m.semantic = lambda r: reply("looks fine to me")
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Oslo?"]))
    assert report["stages"]["semantic"]["rejected"] == {"judge_unparseable": 1}
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, query=["Weather in Oslo?"], semantic=False))
    assert len(records) == 1 and records[0]["verification"]["semantic"] == {"skipped": True}


def test_a_failing_llm_request_fails_that_item_not_the_run(model: Any, tmp_path: Path, tools_file: Path) -> None:
    m, server = model
    m.agent = lambda r: (status(400) if "Atlantis" in r["messages"][1]["content"] else m.default_agent(r))
    out = tmp_path / "out.jsonl"
    proc = agentsynth("generate", "--tools", str(tools_file), "-q", "Weather in Lisbon?", "-q", "Weather in Atlantis?",
                      "-q", "Weather in Porto?", "--model", "openai/scripted", "--api-base", server.base_url,
                      "--no-cache", "-o", str(out), "--json", str(tmp_path / "report.json"))
    assert proc.returncode == 4, proc.stderr  # some items failed
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["accepted"], report["incomplete"]) == (2, 1)
    assert "q1-0-single_agent: LLM request failed" in report["errors"][0]
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["q0-0-single_agent", "q2-0-single_agent"]
    assert "test-key-not-secret" not in out.read_text() + proc.stdout + proc.stderr


def test_identical_inputs_and_seed_give_byte_identical_output_across_processes(model: Any, tmp_path: Path, tools_file: Path) -> None:
    m, server = model
    outputs = []
    for run in range(3):
        out = tmp_path / f"out{run}.jsonl"
        seed = "7" if run < 2 else "8"
        proc = agentsynth_process("generate", "--tools", str(tools_file), "-q", "Weather in Lisbon?", "-n", "2", "-m", "back",
                          "-m", "single_agent", "--seed", seed, "--model", "openai/scripted", "--api-base",
                          server.base_url, "--no-cache", "-o", str(out), "--quiet")
        assert proc.returncode == 0, proc.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == 4
    assert outputs[0] != outputs[2]  # the seed matters (back-translation chains are sampled from it)


def test_back_translation_builds_valid_chains_whose_outputs_feed_later_inputs(model: Any) -> None:
    m, server = model
    m.simulator = lambda r: reply(json.dumps({"city": "Kyoto", "forecast": "sunny"}))
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, mode=["back"], n=12, seed=3))
    assert report["accepted"] == 12
    chained = 0
    for record in records:
        calls = [c for msg in record["messages"] for c in msg.get("tool_calls", ())]
        for c in calls:
            schema = next(t["function"]["parameters"] for t in WEATHER_TOOLS if t["function"]["name"] == c["function"]["name"])
            assert validate_arguments(schema, json.loads(c["function"]["arguments"])) == []
        if len(calls) > 1:
            chained += 1
            # the second call's city came from the first call's result
            assert json.loads(calls[1]["function"]["arguments"])["city"] in ("Kyoto", json.loads(calls[0]["function"]["arguments"])["city"])
        assert record["query"].startswith("Please ") and record["messages"][1]["content"] == record["query"]
        assert record["messages"][-1]["content"].startswith("Done: ")
    assert chained >= 3
    assert report["metrics"]["tool_signatures"]["distinct"] >= 3
    assert report["metrics"]["modes"] == {"back": 12}


def test_back_translation_that_returns_no_query_is_rejected(model: Any) -> None:
    m, server = model
    m.back = lambda r: reply("Sure! Here is a query: what's the weather")
    records, report = generate_records(base(server, tools=WEATHER_TOOLS, mode=["back"]))
    assert report["stages"]["format"]["rejected"] == {"bad_back_translation": 1}


def test_bad_input_is_a_clear_error_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps([{"name": "x", "parameters": "nope"}]))
    proc = agentsynth("generate", "--tools", str(bad), "-q", "hi", "--model", "openai/x")
    assert proc.returncode == 2 and f"error: {bad}: [0].parameters: expected a JSON Schema object" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = agentsynth("generate", "--tools", str(bad), "-q", "hi")
    assert proc.returncode == 2 and "model: missing" in proc.stderr
    good = tmp_path / "good.json"
    good.write_text(json.dumps(WEATHER_TOOLS))
    proc = agentsynth("generate", "--tools", str(good), "--model", "openai/x")
    assert proc.returncode == 2 and "no queries: give --query/-q" in proc.stderr
    proc = agentsynth("generate", "--tools", str(good), "--pack", "core", "-q", "x", "--model", "openai/x")
    assert proc.returncode == 2 and "give a catalog (tools) or a world (pack / world), not both" in proc.stderr
    proc = agentsynth("generate", "--tools", str(good), "-q", "x", "--model", "openai/x", "--judge", "nosuchjudge")
    assert proc.returncode == 2 and "judge.type: unknown judge 'nosuchjudge'" in proc.stderr


def test_json_answers_are_asked_for_with_a_schema(model: Any) -> None:
    """Requests whose answer is parsed as JSON carry a response_format, so servers that constrain decoding
    (the embedded model's among them) make even a small model answer in that shape."""
    m, server = model
    generate_records(base(server, tools=WEATHER_TOOLS, mode=["back"]))
    formats = {}
    for request in server.requests:
        body = request.json or {}
        formats[body["messages"][0]["content"][:30]] = body.get("response_format")
    by_role = formats
    back = next(v for k, v in by_role.items() if k.startswith("You write training data"))
    assert back["json_schema"]["schema"]["required"] == ["query", "answer"]
    semantic = next(v for k, v in by_role.items() if k.startswith("You check training data"))
    assert semantic["json_schema"]["schema"]["properties"]["satisfied"] == {"type": "boolean"}
    assert next(v for k, v in by_role.items() if k.startswith("You simulate")) == {"type": "json_object"}


def test_concurrency_does_not_change_the_output(model: Any) -> None:
    m, server = model
    server.latency = 0.01
    m.agent = lambda r: (tool_calls(("nope", {})) if "Oslo" in r["messages"][1]["content"] else m.default_agent(r))
    params = base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?", "Weather in Oslo?", "Weather in Rome?"],
                  n=3, mode=["single_agent", "back"], seed=4)
    one, report_one = generate_records(params)
    many, report_many = generate_records({**params, "concurrency": 6})
    assert json.dumps(one, sort_keys=True) == json.dumps(many, sort_keys=True)
    assert report_one["stages"] == report_many["stages"] and report_one["llm_requests"] == report_many["llm_requests"]
    assert report_many["stages"]["format"]["rejected"] == {"unknown_tool": 3}


def test_back_translations_a_small_model_gets_wrong_are_rejected(model: Any) -> None:
    """What SmolLM2-135M wrote in a real run: the tool's name as the request, a request that ignores
    the chain's arguments, and an answer that loops."""
    m, server = model
    cases = {"query_too_short": {"query": "get_weather", "answer": "It is sunny."},
             "query_not_grounded": {"query": "Please tell me about money in the city of money", "answer": "Sunny."},
             "degenerate_answer": {"query": "What is the weather in {city} this week?",
                                   "answer": "I hope that you enjoy everything, and I hope that you enjoy everything. "
                                             "I hope that you enjoy everything."}}
    for reason, value in cases.items():
        def back(request: dict[str, Any], value: dict[str, str] = value) -> Any:
            chain = json.loads(request["messages"][1]["content"].split("\nThe request should")[0])
            city = chain[0]["arguments"].get("city", "")
            return reply(json.dumps({k: v.replace("{city}", city) for k, v in value.items()}))
        m.back = back
        records, report = generate_records(base(server, tools=WEATHER_TOOLS, mode=["back"]))
        assert report["stages"]["semantic"]["rejected"] == {reason: 1}, (reason, report["stages"])


def test_dedup_rejects_repeats_in_item_order(model: Any) -> None:
    m, server = model
    params = base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?", "weather in  LISBON?", "Weather in Rome?"],
                  n=2, dedup=True)
    records, report = generate_records(params)
    # the scripted teacher answers every sample of a request alike: one record per distinct request survives
    assert [r["id"] for r in records] == ["q0-0-single_agent", "q2-0-single_agent"]
    assert report["stages"]["dedup"] == {"entered": 6, "passed": 2, "rejected": {"duplicate": 4}, "pass_rate": round(2 / 6, 4)}
    again, _ = generate_records({**params, "concurrency": 4})
    assert [r["id"] for r in again] == [r["id"] for r in records]


def test_provider_call_ids_do_not_reach_the_output(model: Any) -> None:
    """llama.cpp's server gives every tool call a random id (seen in a real run): the records use their own."""
    import uuid

    m, server = model
    m.agent = lambda r: (reply("Sunny.") if any(x["role"] == "tool" for x in r["messages"])
                         else tool_calls(("get_weather", {"city": "Lisbon"}, f"call_{uuid.uuid4().hex[:12]}")))
    params = base(server, tools=WEATHER_TOOLS, query=["Weather in Lisbon?"], n=2)
    first, _ = generate_records(params)
    second, _ = generate_records(params)
    assert json.dumps(first) == json.dumps(second)
    assert first[0]["messages"][2]["tool_calls"][0]["id"] == "call_0_0" == first[0]["messages"][3]["tool_call_id"]
