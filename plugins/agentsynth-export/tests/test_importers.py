"""Importers for OpenAI chat logs, Anthropic messages and OpenTelemetry GenAI spans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsynth_export.importers import (
    AnthropicImporter,
    AutoImporter,
    OpenAIImporter,
    OtelImporter,
    detect_format,
)
from agentsynth_kernel import AgentsynthError, Answer, RunStore, ToolCall
from conftest import agentsynth

OPENAI_CONV = {
    "task_id": "weather-1",
    "messages": [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome? Mail bob@corp.example"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Rome\"}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_2", "content": "sunny 25C"},
        {"role": "tool", "tool_call_id": "call_1", "content": "rain 14C"},
        {"role": "assistant", "content": "Paris: rain, Rome: sunny."},
    ],
    "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather now",
                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
}
OPENAI_REQ_RESP = {
    "request": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "What is 2+2?"}],
                "functions": [{"name": "calc", "parameters": {"type": "object"}}]},
    "response": {"id": "chatcmpl-1", "model": "gpt-4o-mini-2024", "usage": {"prompt_tokens": 11, "completion_tokens": 3},
                 "choices": [{"message": {"role": "assistant", "content": None,
                                          "function_call": {"name": "calc", "arguments": "{\"expr\": \"2+2\"}"}}}]},
}


def write_jsonl(path: Path, records: list, raw_lines: dict[int, str] | None = None) -> Path:
    out = [json.dumps(r) for r in records]
    for index, text in sorted((raw_lines or {}).items()):
        out.insert(index, text)
    path.write_text("\n".join(out) + "\n")
    return path


def test_openai_parallel_tool_calls_and_results_matched_by_id(tmp_path):
    path = write_jsonl(tmp_path / "chat.jsonl", [OPENAI_CONV, OPENAI_REQ_RESP])
    trajs = list(OpenAIImporter().read(path))
    assert len(trajs) == 2
    t = trajs[0]
    assert t.task_id == "weather-1" and t.system_prompt == "You are helpful."
    assert t.instruction.startswith("Weather in Paris")
    assert [(c.name, c.arguments, c.id) for c in t.tool_calls] == [
        ("weather", {"city": "Paris"}, "call_1"), ("weather", {"city": "Rome"}, "call_2")]
    assert [s.turn for s in t.steps] == [0, 0, 1]
    assert [s.observation.content for s in t.steps[:2]] == ["rain 14C", "sunny 25C"]  # by id, not by order
    assert t.final_answer == "Paris: rain, Rome: sunny."
    assert t.tools[0].name == "weather" and t.tools[0].parameters["properties"]["city"]["type"] == "string"
    assert t.metadata["import"]["line"] == 1 and t.metadata["import"]["format"] == "openai"
    # request/response log with a legacy function_call
    r = trajs[1]
    assert r.task_id.startswith("imported-") and r.instruction == "What is 2+2?"
    assert r.tool_calls[0].name == "calc" and r.tool_calls[0].arguments == {"expr": "2+2"}
    assert r.metadata["import"]["usage"] == {"prompt_tokens": 11, "completion_tokens": 3}
    assert r.metadata["import"]["model"] == "gpt-4o-mini-2024"
    assert r.metadata["import"]["tool_calls_without_result"] == 1


def test_openai_batch_api_lines(tmp_path):
    batch_in = {"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": "Say hi"}]}}
    batch_out = {"custom_id": "req-2", "response": {"status_code": 200, "body": {
        "model": "gpt-4o", "choices": [{"message": {"role": "assistant", "content": "hi"}}]}},
        "request": {"messages": [{"role": "user", "content": "Say hi"}]}}
    trajs = list(OpenAIImporter().read(write_jsonl(tmp_path / "batch.jsonl", [batch_in, batch_out])))
    assert [t.metadata["import"]["custom_id"] for t in trajs] == ["req-1", "req-2"]
    assert trajs[0].instruction == "Say hi" and trajs[0].steps == []
    assert trajs[1].final_answer == "hi" and trajs[1].task_id == trajs[0].task_id  # same prompt, same task


def test_malformed_lines_are_named_and_skipped_or_stop(tmp_path):
    bad = {"messages": "not a list"}
    path = write_jsonl(tmp_path / "chat.jsonl", [OPENAI_CONV, bad, OPENAI_CONV], raw_lines={1: "{not json"})
    importer = OpenAIImporter()
    assert len(list(importer.read(path))) == 2
    assert importer.problem_count == 2
    assert importer.problems[0].startswith(f"{path}:2: invalid JSON")
    assert importer.problems[1] == f"{path}:3: 'messages' must be a list"
    with pytest.raises(AgentsynthError, match=rf"^{path}:2: invalid JSON"):
        list(OpenAIImporter(on_error="stop").read(path))
    with pytest.raises(AgentsynthError, match="file not found"):
        list(OpenAIImporter().read(tmp_path / "missing.jsonl"))


def test_bad_arguments_mark_the_step_invalid(tmp_path):
    conv = {"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "error: bad args"},
        {"role": "user", "content": "try again"},
        {"role": "assistant", "content": "ok"},
    ]}
    t = list(OpenAIImporter().read(write_jsonl(tmp_path / "c.jsonl", [conv])))[0]
    assert t.steps[0].invalid and t.steps[0].action.arguments == {"_raw": "{oops"}
    assert t.metadata["import"]["user_turns"] == [{"after_step": 1, "content": "try again"}]


ANTHROPIC_CONV = {
    "model": "claude-sonnet-4",
    "system": "You manage files.",
    "tools": [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
    "messages": [
        {"role": "user", "content": "Summarise notes.txt and todo.txt"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I need both files."},
            {"type": "text", "text": "Reading them."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "notes.txt"}},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "todo.txt"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "meeting at 10"}]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": True},
        ]},
        {"role": "assistant", "content": [{"type": "text", "text": "Notes: meeting at 10; todo.txt is missing."}]},
    ],
}


def test_anthropic_tool_use_and_tool_result_blocks(tmp_path):
    path = write_jsonl(tmp_path / "claude.jsonl", [ANTHROPIC_CONV])
    t = list(AnthropicImporter().read(path))[0]
    assert t.system_prompt == "You manage files." and t.instruction == "Summarise notes.txt and todo.txt"
    assert [(c.name, c.arguments, c.id) for c in t.tool_calls] == [
        ("read_file", {"path": "notes.txt"}, "toolu_1"), ("read_file", {"path": "todo.txt"}, "toolu_2")]
    assert t.steps[0].thought == "I need both files.\n\nReading them."
    assert t.steps[0].observation.content == "meeting at 10" and not t.steps[0].observation.error
    assert t.steps[1].observation.error and t.steps[1].observation.content == "no such file"
    assert t.final_answer.startswith("Notes:")
    assert t.tools[0].parameters["properties"]["path"] == {"type": "string"}
    assert t.metadata["import"]["model"] == "claude-sonnet-4"


def test_anthropic_request_response_pair_and_bad_block(tmp_path):
    pair = {"request": {"messages": [{"role": "user", "content": "hi"}]},
            "response": {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "hello"}],
                         "usage": {"input_tokens": 5, "output_tokens": 2}}}
    bad = {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]}
    path = write_jsonl(tmp_path / "c.jsonl", [pair, bad])
    importer = AnthropicImporter()
    trajs = list(importer.read(path))
    assert len(trajs) == 1 and trajs[0].final_answer == "hello"
    assert trajs[0].metadata["import"]["usage"] == {"prompt_tokens": 5, "completion_tokens": 2}
    assert importer.problems == [f"{path}:2: messages[0].content[0]: tool_result without tool_use_id"]


def _kv(key, value):
    if isinstance(value, bool):
        v = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    else:
        v = {"stringValue": value}
    return {"key": key, "value": v}


def otlp_line(spans):
    return {"resourceSpans": [{"resource": {"attributes": [_kv("service.name", "agent")]},
                               "scopeSpans": [{"scope": {"name": "genai"}, "spans": spans}]}]}


def otlp_span(trace, span, parent, name, start, attrs):
    return {"traceId": trace, "spanId": span, "parentSpanId": parent, "name": name,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 10),
            "attributes": [_kv(k, v) for k, v in attrs.items()]}


def semconv_trace(trace: str, city: str) -> list[dict]:
    inputs1 = [{"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
               {"role": "user", "parts": [{"type": "text", "content": f"Weather in {city}?"}]}]
    out1 = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": city}}],
             "finish_reason": "tool_call"}]
    inputs2 = inputs1 + out1 + [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]}]
    out2 = [{"role": "assistant", "parts": [{"type": "text", "content": f"{city}: sunny"}], "finish_reason": "stop"}]
    return [
        otlp_span(trace, "s2", "s1", "chat gpt-4o", 100, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                                                         "gen_ai.input.messages": json.dumps(inputs1),
                                                         "gen_ai.output.messages": json.dumps(out1),
                                                         "gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 5}),
        otlp_span(trace, "s3", "s1", "execute_tool weather", 200, {"gen_ai.operation.name": "execute_tool",
                                                                   "gen_ai.tool.name": "weather", "gen_ai.tool.call.id": "c1"}),
        otlp_span(trace, "s4", "s1", "chat gpt-4o", 300, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                                                         "gen_ai.input.messages": json.dumps(inputs2),
                                                         "gen_ai.output.messages": json.dumps(out2),
                                                         "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 4}),
        otlp_span(trace, "s1", "", "invoke_agent", 50, {"gen_ai.operation.name": "invoke_agent"}),
    ]


def test_otel_otlp_json_semconv_messages_one_trajectory_per_trace(tmp_path):
    t1, t2 = semconv_trace("a" * 32, "Oslo"), semconv_trace("b" * 32, "Lima")
    # trace b's spans are split over two lines, interleaved with trace a
    path = write_jsonl(tmp_path / "spans.jsonl", [otlp_line(t2[:2]), otlp_line(t1), otlp_line(t2[2:])])
    trajs = list(OtelImporter().read(path))
    # traces are emitted once complete, in the order they were first seen
    assert [t.instruction for t in trajs] == ["Weather in Lima?", "Weather in Oslo?"]
    t = trajs[1]
    assert t.system_prompt == "Be brief."
    assert [(c.name, c.arguments, c.id) for c in t.tool_calls] == [("weather", {"city": "Oslo"}, "c1")]
    assert t.steps[0].observation.content == "sunny" and t.final_answer == "Oslo: sunny"
    meta = t.metadata["import"]
    assert meta["usage"] == {"prompt_tokens": 50, "completion_tokens": 9} and meta["model"] == "gpt-4o"
    assert meta["trace_id"] == "a" * 32


def test_otel_console_exporter_events_and_tool_spans(tmp_path):
    # the Python SDK ConsoleSpanExporter shape, older event-based conventions, results only on tool spans
    spans = [
        {"name": "chat", "context": {"trace_id": "0xabc", "span_id": "0x2"}, "parent_id": "0x1",
         "start_time": "2025-01-01T00:00:01Z",
         "attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
         "events": [
             {"name": "gen_ai.user.message", "attributes": {"content": "List files"}},
             {"name": "gen_ai.choice", "attributes": {"body": json.dumps({"message": {"tool_calls": [
                 {"id": "t1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}})}},
         ]},
        {"name": "execute_tool ls", "context": {"trace_id": "0xabc", "span_id": "0x3"}, "parent_id": "0x1",
         "start_time": "2025-01-01T00:00:02Z",
         "attributes": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ls", "gen_ai.tool.call.id": "t1",
                        "gen_ai.tool.call.result": "a.txt b.txt"}},
        {"name": "agent", "context": {"trace_id": "0xabc", "span_id": "0x1"}, "parent_id": None,
         "start_time": "2025-01-01T00:00:00Z", "attributes": {}},
    ]
    path = tmp_path / "console.json"
    path.write_text("\n".join(json.dumps(s) for s in spans))
    t = list(OtelImporter().read(path))[0]
    assert t.instruction == "List files"
    assert t.tool_calls[0].name == "ls" and t.steps[0].observation.content == "a.txt b.txt"
    # what the exporter really writes: indented objects one after another, not JSON lines
    pretty = tmp_path / "console.txt"
    pretty.write_text("".join(json.dumps(s, indent=4) + "\n" for s in spans))
    importer = AutoImporter()
    (t2,) = list(importer.read(pretty))
    assert importer.detected == "otel" and t2.tool_calls == t.tool_calls and t2.final_answer == t.final_answer
    # a broken object is named by the line it starts on, and the rest still imports
    broken = json.dumps(spans[0], indent=4).replace('"chat",', '"chat"', 1)
    bad = tmp_path / "console-bad.txt"
    bad.write_text(broken + "\n" + "".join(json.dumps(s, indent=4) + "\n" for s in spans))
    importer = OtelImporter()
    (t3,) = list(importer.read(bad))
    assert t3.tool_calls == t.tool_calls
    assert len(importer.problems) == 1 and importer.problems[0].startswith(f"{bad}:1: invalid JSON: Expecting ','")


def test_concatenated_json_across_chunk_boundaries(tmp_path):
    from agentsynth_export.importers import _iter_concatenated

    values = [{"a": i, "text": "x" * (i * 3), "nested": {"b": [1, 2, {"c": "}{"}]}} for i in range(20)]
    path = tmp_path / "c.txt"
    path.write_text("".join(json.dumps(v, indent=2) + "\n" for v in values))
    got = list(_iter_concatenated(path, chunk=7))
    assert [v for _, v in got] == values
    starts = [i + 1 for i, text in enumerate(path.read_text().splitlines()) if text == "{"]
    assert [line for line, _ in got] == starts


def test_otel_traces_flush_once_complete(tmp_path):
    lines = [otlp_line(semconv_trace(f"{i:032x}", f"City{i}")) for i in range(6)]
    path = write_jsonl(tmp_path / "many.jsonl", lines)
    importer = OtelImporter(flush_spans=4)
    out = []
    for t in importer.read(path):
        out.append(t.instruction)
    assert out == [f"Weather in City{i}?" for i in range(6)]


def test_otel_flattened_attributes_and_tool_only_traces(tmp_path):
    flat = otlp_span("c" * 32, "x1", "", "openai.chat", 1, {
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Sum 1 and 2",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "3"})
    tools_only = [otlp_span("d" * 32, "y2", "y1", "execute_tool add", 5, {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add", "gen_ai.tool.call.id": "k",
        "gen_ai.tool.call.arguments": "{\"a\": 1}", "gen_ai.tool.call.result": "1"}),
        otlp_span("d" * 32, "y1", "", "agent", 1, {})]
    empty = [otlp_span("e" * 32, "z1", "", "http GET", 1, {"http.method": "GET"})]
    path = write_jsonl(tmp_path / "s.jsonl", [otlp_line([flat]), otlp_line(tools_only), otlp_line(empty)])
    importer = OtelImporter()
    trajs = list(importer.read(path))
    assert trajs[0].instruction == "Sum 1 and 2" and trajs[0].final_answer == "3"
    assert trajs[1].tool_calls[0].arguments == {"a": 1} and trajs[1].steps[0].observation.content == "1"
    assert importer.problems == [f"{path}:3: trace {'e' * 32}: no GenAI spans (no messages, no execute_tool spans)"]


def test_auto_detection(tmp_path):
    assert detect_format(OPENAI_CONV) == "openai"
    assert detect_format(OPENAI_REQ_RESP) == "openai"
    assert detect_format(ANTHROPIC_CONV) == "anthropic"
    assert detect_format(otlp_line(semconv_trace("a" * 32, "X"))) == "otel"
    for name, record, fmt in (("a.jsonl", ANTHROPIC_CONV, "anthropic"), ("o.jsonl", OPENAI_CONV, "openai")):
        importer = AutoImporter()
        trajs = list(importer.read(write_jsonl(tmp_path / name, [record])))
        assert importer.detected == fmt and len(trajs) == 1 and trajs[0].tool_calls
    # a JSON array file
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps([OPENAI_CONV, {"messages": 3}]))
    importer = AutoImporter()
    assert len(list(importer.read(arr))) == 1 and importer.problems == [f"{arr}: item 2: 'messages' must be a list"]


# --- the command ---------------------------------------------------------------------------------------


def test_import_command_redacts_and_writes_a_run_exporters_accept(tmp_path):
    secret = dict(OPENAI_CONV, messages=OPENAI_CONV["messages"] + [
        {"role": "user", "content": "my key is sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX and server 10.1.2.3"}])
    path = write_jsonl(tmp_path / "chat.jsonl", [secret, OPENAI_CONV], raw_lines={1: "garbage"})
    run = tmp_path / "imported"
    proc = agentsynth("import", str(path), "--redact", "-o", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["imported"] == 2 and report["problems"] == 1
    assert report["redacted"] == {"email": 2, "api_key": 1, "bearer": 0, "phone": 0, "ip": 1}
    store = RunStore(run)
    results = list(store.results())
    assert store.get_meta("import")["imported"] == 2
    store.close()
    assert [(r.task_id, r.trial, r.status) for r in results] == [("weather-1", 0, "unverified"), ("weather-1", 1, "unverified")]
    text = json.dumps([r.trajectory.instruction for r in results] + [r.trajectory.metadata for r in results])
    assert "bob@corp.example" not in text and "[EMAIL]" in text and "sk-proj" not in text and "10.1.2.3" not in text
    assert results[0].provenance["imported_from"] == str(path)
    # judges / exporters accept it
    out = tmp_path / "sft.jsonl"
    proc = agentsynth("export", str(run), "-f", "openai", "--filter", "all", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert len(out.read_text().splitlines()) == 2
    assert isinstance(results[0].trajectory.steps[0].action, ToolCall)
    assert isinstance(results[0].trajectory.steps[-1].action, Answer)


def test_import_command_stop_and_errors(tmp_path):
    path = write_jsonl(tmp_path / "chat.jsonl", [OPENAI_CONV, OPENAI_CONV], raw_lines={1: "{\"messages\": ["})
    proc = agentsynth("import", str(path), "--on-error", "stop", "-o", str(tmp_path / "r1"))
    assert proc.returncode == 2 and f"{path}:2: invalid JSON" in proc.stderr and "Traceback" not in proc.stderr
    proc = agentsynth("import", str(path), "-o", str(tmp_path / "r2"))
    assert proc.returncode == 0 and f"warning: {path}:2: invalid JSON" in proc.stderr
    assert "2 trajectories" in proc.stdout
    proc = agentsynth("import", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "r3"))
    assert proc.returncode == 2 and "file not found" in proc.stderr
    proc = agentsynth("import", str(path), "-o", str(tmp_path / "r2"))
    assert proc.returncode == 2 and "already holds 2 episodes" in proc.stderr
    proc = agentsynth("import", str(path), "-f", "antropic", "-o", str(tmp_path / "r4"))
    assert proc.returncode == 2 and "did you mean 'anthropic'" in proc.stderr


def test_import_each_format_through_the_command(tmp_path):
    files = {
        "anthropic": write_jsonl(tmp_path / "a.jsonl", [ANTHROPIC_CONV]),
        "otel": write_jsonl(tmp_path / "o.jsonl", [otlp_line(semconv_trace("f" * 32, "Bern"))]),
    }
    for fmt, path in files.items():
        for given in (fmt, "auto"):
            run = tmp_path / f"run-{fmt}-{given}"
            proc = agentsynth("import", str(path), "-f", given, "-o", str(run), "--json")
            assert proc.returncode == 0, proc.stderr
            report = json.loads(proc.stdout)
            assert report["imported"] == 1 and report["files"][0]["format"] == fmt
            store = RunStore(run)
            (r,) = list(store.results())
            store.close()
            assert r.trajectory.tool_calls and r.trajectory.final_answer


# --- round trips of this plugin's own formats -------------------------------------------------------


def _same_work(imported, original):
    assert imported.system_prompt == original.system_prompt
    assert imported.instruction.startswith(original.instruction)
    assert [(c.name, c.arguments) for c in imported.tool_calls] == [(c.name, c.arguments) for c in original.tool_calls]
    assert [s.observation.content for s in imported.steps if s.observation] == [
        s.observation.content for s in original.steps if s.observation]
    assert imported.final_answer == original.final_answer
    assert [t.name for t in imported.tools] == [t.name for t in original.tools]


def test_sharegpt_and_adp_exports_import_back(results, tmp_path):
    from agentsynth_export.exporters import ADPExporter, ShareGPTExporter
    from agentsynth_export.importers import ShareGPTImporter

    originals = [r.trajectory for r in results if r.trajectory is not None]
    ShareGPTExporter(filter="all", include_test=True).export(results, tmp_path / "s.jsonl")
    back = list(ShareGPTImporter().read(tmp_path / "s.jsonl"))
    assert len(back) == len(originals)
    for imp, orig in zip(back, originals, strict=True):
        _same_work(imp, orig)
        assert [s.turn for s in imp.steps] == [s.turn for s in orig.steps]  # parallel calls stay parallel
    ADPExporter(filter="all", include_test=True).export(results, tmp_path / "a.jsonl")
    importer = AutoImporter()
    back = list(importer.read(tmp_path / "a.jsonl"))
    assert importer.detected == "adp" and len(back) == len(originals)
    for imp, orig, res in zip(back, originals, [r for r in results if r.trajectory], strict=True):
        _same_work(imp, orig)
        assert imp.task_id == res.task_id and imp.metadata["import"]["status"] == res.status
        assert imp.steps[0].thought == orig.steps[0].thought


def test_sharegpt_variants_and_errors(tmp_path):
    factory = {"conversations": [
        {"from": "human", "value": "weather in Oslo?"},
        {"from": "function_call", "value": "{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}"},
        {"from": "observation", "value": "snow"},
        {"from": "gpt", "value": "Snow in Oslo."}], "tools": "[{\"name\": \"weather\", \"parameters\": {}}]"}
    bad = {"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "<tool_call>{oops</tool_call>"}]}
    path = write_jsonl(tmp_path / "s.jsonl", [factory, bad, {"conversations": [{"from": "narrator", "value": "x"}]}])
    importer = AutoImporter()
    trajs = list(importer.read(path))
    assert importer.detected == "sharegpt" and len(trajs) == 1
    assert trajs[0].tool_calls[0].arguments == {"city": "Oslo"} and trajs[0].steps[0].observation.content == "snow"
    assert importer.problems == [
        f"{path}:2: conversations[1]: <tool_call> body is not JSON: Expecting property name enclosed in double quotes",
        f"{path}:3: conversations[0]: unknown role 'narrator'",
    ]


# --- mixed files and records that cannot be read -------------------------------------------------------


def test_auto_detects_each_record_of_a_mixed_file(tmp_path):
    path = write_jsonl(tmp_path / "mixed.jsonl", [OPENAI_CONV, ANTHROPIC_CONV, OPENAI_REQ_RESP, ANTHROPIC_CONV])
    importer = AutoImporter()
    trajs = list(importer.read(path))
    assert [t.metadata["import"]["format"] for t in trajs] == ["openai", "anthropic", "openai", "anthropic"]
    # the Anthropic records keep their tool calls, system prompt and results
    assert [c.name for c in trajs[1].tool_calls] == ["read_file", "read_file"] and trajs[1].system_prompt
    assert trajs[1].steps[0].observation.content == "meeting at 10"
    assert importer.formats == {"openai": 2, "anthropic": 2} and importer.detected == "anthropic+openai"
    assert importer.problem_count == 0


def test_a_record_of_the_other_format_is_a_problem_not_a_silent_loss(tmp_path):
    path = write_jsonl(tmp_path / "claude.jsonl", [OPENAI_CONV, ANTHROPIC_CONV])
    importer = OpenAIImporter()
    assert len(list(importer.read(path))) == 1
    assert importer.problem_count == 1 and importer.problems[0].startswith(f"{path}:2: ")
    assert "Anthropic" in importer.problems[0] and "tool_use" in importer.problems[0]
    importer = AnthropicImporter()
    assert len(list(importer.read(path))) == 1
    assert importer.problem_count == 1 and importer.problems[0].startswith(f"{path}:1: ")
    assert "OpenAI" in importer.problems[0]


def test_auto_reports_spans_mixed_into_chat_records(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [OPENAI_CONV, otlp_line(semconv_trace("b" * 32, "Oslo"))])
    importer = AutoImporter()
    assert len(list(importer.read(path))) == 1
    assert importer.problem_count == 1 and importer.problems[0].startswith(f"{path}:2: ")
    assert "OpenTelemetry" in importer.problems[0]


def test_import_command_reports_mixed_formats_and_problems_with_lines(tmp_path):
    path = write_jsonl(tmp_path / "mixed.jsonl", [OPENAI_CONV, ANTHROPIC_CONV, {"messages": 3}],
                       raw_lines={1: "not json"})
    run = tmp_path / "run"
    proc = agentsynth("import", str(path), "-o", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["imported"] == 2 and report["problems"] == 2
    (entry,) = report["files"]
    assert entry["formats"] == {"openai": 1, "anthropic": 1} and entry["format"] == "anthropic+openai"
    assert [p.split(": ")[0] for p in entry["problem_list"]] == [f"{path}:2", f"{path}:4"]
    store = RunStore(run)
    assert sum(len(r.trajectory.tool_calls) for r in store.results()) == 4
    store.close()
    proc = agentsynth("import", str(path), "-o", str(tmp_path / "run2"))
    assert proc.returncode == 0 and "openai=1, anthropic=1" in proc.stdout and "2 records could not be read" in proc.stdout


def test_import_command_fails_when_nothing_could_be_read(tmp_path):
    path = write_jsonl(tmp_path / "junk.jsonl", [{"messages": 3}, {"hello": "world"}], raw_lines={0: "nope"})
    run = tmp_path / "run"
    proc = agentsynth("import", str(path), "-o", str(run))
    assert proc.returncode == 2, proc.stdout
    assert "nothing could be read" in proc.stderr and f"{path}:1:" in proc.stderr and "Traceback" not in proc.stderr
    assert not run.exists()  # no empty run directory is left behind
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    proc = agentsynth("import", str(empty), "-o", str(run), "--json")
    assert proc.returncode == 2 and "no records" in proc.stderr and not run.exists()
