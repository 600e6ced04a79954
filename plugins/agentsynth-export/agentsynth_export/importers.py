"""Trace importers: foreign agent logs become agentsynth Trajectories, streaming.

- ``openai``: chat logs, one conversation per line (``{"messages": [...], "tools": [...]}``, the
  fine-tuning shape), or request/response pairs (``{"request": {...}, "response": {...}}``), or a
  JSON array of those. Assistant ``tool_calls`` (parallel) and ``tool`` results, legacy
  ``function_call``, content given as parts.
- ``anthropic``: Messages API conversations (``{"system", "messages", "tools"}`` or
  request/response pairs) with ``tool_use`` / ``tool_result`` / ``thinking`` blocks.
- ``otel``: OpenTelemetry GenAI spans as JSON (OTLP/JSON ``resourceSpans`` lines as the collector's
  file exporter writes them, or the Python SDK console exporter's indented span objects). One trajectory per
  trace: messages from ``gen_ai.input.messages``/``gen_ai.output.messages`` (current semantic
  conventions), ``gen_ai.*.message``/``gen_ai.choice`` events, or the flattened
  ``gen_ai.prompt.N.*``/``gen_ai.completion.N.*`` attributes; ``execute_tool`` spans fill tool results.
- ``auto``: detects the format of every record (a file may mix them); a span file is read as ``otel``.

Every problem names the file and line (``trace.jsonl:17: ...``). With ``on_error: skip`` the
record is skipped and the problem recorded (``problems``); with ``stop`` an AgentsynthError is
raised. Per-record extras (source line, usage, model, status, reward) go to
``trajectory.metadata["import"]``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec

from agentsynth_kernel import AgentsynthError, Answer, Observation, Step, ToolCall, ToolSpec, Trajectory

MAX_PROBLEMS_KEPT = 1000


class BadRecord(ValueError):
    """A record that cannot be converted; the message says why (the caller adds file:line)."""


_decode = msgspec.json.Decoder().decode


def iter_json(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for every JSON record in a file; a bad line yields ``(line, BadRecord)``.

    JSONL is read line by line (streaming). A file starting with ``[`` is one JSON array (each item
    reported with the line its text starts on is not known, so with its 1-based item number as
    ``-index``). A pretty-printed single JSON document is read whole.
    """
    with open(path, "rb") as fp:
        head = fp.read(4096).lstrip()
    if head.startswith(b"["):
        try:
            data = _decode(Path(path).read_bytes())
        except msgspec.DecodeError as exc:
            yield 1, BadRecord(f"invalid JSON array: {exc}")
            return
        for i, item in enumerate(data, 1):
            yield -i, item
        return
    with open(path, "rb") as fp:
        first = True
        for lineno, line in enumerate(fp, 1):
            if not line.strip():
                continue
            try:
                value = _decode(line)
            except msgspec.DecodeError as exc:
                if first and line.strip() == b"{":
                    # pretty-printed objects one after another (OpenTelemetry's ConsoleSpanExporter,
                    # json.dump(indent=...)): parse them as a stream of concatenated JSON values
                    yield from _iter_concatenated(path)
                    return
                if first:
                    try:  # a pretty-printed single document?
                        whole = _decode(Path(path).read_bytes())
                    except msgspec.DecodeError:
                        pass
                    else:
                        yield 1, whole
                        return
                yield lineno, BadRecord(f"invalid JSON: {exc}")
                first = False
                continue
            first = False
            yield lineno, value


def _iter_concatenated(path: Path, chunk: int = 1 << 20) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for JSON values written one after another, read in chunks.

    A malformed value is reported at the line it starts on; parsing resumes at the next line
    that starts with ``{``.
    """
    decoder = json.JSONDecoder()
    buf, pos, line, eof = "", 0, 1, False
    with open(path, encoding="utf-8", errors="replace") as fp:
        while True:
            start = pos
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            line += buf.count("\n", start, pos)
            if pos >= len(buf):
                if eof:
                    return
                data = fp.read(chunk)
                eof = not data
                buf, pos = buf[pos:] + data, 0
                continue
            try:
                value, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                if not eof:  # maybe the value continues in the next chunk
                    data = fp.read(chunk)
                    eof = not data
                    buf, pos = buf[pos:] + data, 0
                    continue
                yield line, BadRecord(f"invalid JSON: {exc.msg}")
                nxt = buf.find("\n{", pos + 1)
                if nxt < 0:
                    return
                line += buf.count("\n", pos, nxt + 1)
                pos = nxt + 1
                continue
            yield line, value
            line += buf.count("\n", pos, end)
            pos = end
            if pos > chunk:
                buf, pos = buf[pos:], 0


def where(path: Path, line: int) -> str:
    return f"{path}:{line}" if line > 0 else f"{path}: item {-line}"


# --- the neutral message form ------------------------------------------------------------------------------
# {"role": system|user|assistant|tool, "content": str, "calls": [{"id", "name", "arguments"}],
#  "reasoning": str, "tool_call_id": str, "name": str, "error": bool}


def _text(content: Any) -> str:
    """Text of a content value: a string, or a list of parts/blocks (text kept, others noted)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                kind = part.get("type", "text")
                if kind in ("text", "input_text", "output_text"):
                    out.append(str(part.get("text", part.get("content", ""))))
                elif kind in ("image", "image_url", "input_image"):
                    out.append("[image]")
                elif "text" in part:
                    out.append(str(part["text"]))
                elif "content" in part:
                    out.append(_text(part["content"]))
        return "\n".join(out)
    return json.dumps(content, ensure_ascii=False)


def _arguments(raw: Any) -> tuple[dict[str, Any], bool]:
    """Tool-call arguments as a dict; ``(value, invalid)``."""
    if raw is None or raw == "":
        return {}, False
    if isinstance(raw, dict):
        return raw, False
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return {"_raw": raw}, True
        if isinstance(value, dict):
            return value, False
        return {"_value": value}, True
    return {"_value": raw}, True


def trajectory_from_messages(
    messages: list[dict[str, Any]], tools: list[ToolSpec], *, task_id: str | None, meta: dict[str, Any]
) -> Trajectory:
    """Build a Trajectory from neutral messages (see the comment above)."""
    system: list[str] = []
    instruction: str | None = None
    extra_user: list[dict[str, Any]] = []
    steps: list[Step] = []
    pending: dict[str, Step] = {}
    unmatched = 0
    turn = -1
    for m in messages:
        role = m["role"]
        if role == "system":
            if m["content"]:
                system.append(m["content"])
        elif role == "user":
            if instruction is None:
                instruction = m["content"]
            else:
                extra_user.append({"after_step": len(steps), "content": m["content"]})
        elif role == "assistant":
            turn += 1
            calls = m.get("calls") or []
            thought = m.get("reasoning") or ""
            if calls:
                text = m.get("content") or ""
                first_thought = "\n\n".join(x for x in (thought, text) if x)
                for i, call in enumerate(calls):
                    args, invalid = _arguments(call.get("arguments"))
                    step = Step(ToolCall(str(call.get("name") or ""), args, str(call.get("id") or "")),
                                None, turn=turn, thought=first_thought if i == 0 else "", invalid=invalid)
                    steps.append(step)
                    pending[step.action.id or f"#{len(steps)}"] = step  # type: ignore[union-attr]
            elif m.get("content") or thought:
                steps.append(Step(Answer(m.get("content") or ""), None, turn=turn, thought=thought))
        elif role == "tool":
            key = m.get("tool_call_id") or ""
            step = pending.pop(key, None) if key else None
            if step is None:
                # no id (legacy function results): the oldest call without a result, by name if given
                name = m.get("name")
                for k, s in list(pending.items()):
                    if not name or s.action.name == name:  # type: ignore[union-attr]
                        step = pending.pop(k)
                        break
            if step is None:
                unmatched += 1
                continue
            step.observation = Observation(m.get("content") or "", error=bool(m.get("error")))
        else:
            raise BadRecord(f"message with unknown role {role!r}")
    if instruction is None:
        if not steps:
            raise BadRecord("no user message and no assistant step: nothing to import")
        instruction = ""
    meta = dict(meta)
    if extra_user:
        meta["user_turns"] = extra_user
    if unmatched:
        meta["unmatched_tool_results"] = unmatched
    missing = sum(1 for s in steps if isinstance(s.action, ToolCall) and s.observation is None)
    if missing:
        meta["tool_calls_without_result"] = missing
    if not task_id:
        task_id = "imported-" + hashlib.blake2b(instruction.encode(), digest_size=6).hexdigest()
    return Trajectory(task_id=task_id, instruction=instruction, steps=steps, tools=tools,
                      system_prompt="\n\n".join(system), metadata={"import": meta})


def _tool_specs(raw: Any) -> list[ToolSpec]:
    if not raw:
        return []
    if not isinstance(raw, list):
        raise BadRecord("'tools' must be a list")
    out = []
    for t in raw:
        if not isinstance(t, dict):
            raise BadRecord("a tool must be an object")
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise BadRecord("a tool has no name")
        params = fn.get("parameters") or fn.get("input_schema") or {"type": "object", "properties": {}}
        out.append(ToolSpec(name, str(fn.get("description") or ""), params))
    return out


def _record_meta(obj: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """Task id and extra fields a line may carry beside its messages."""
    meta: dict[str, Any] = {}
    md = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    task_id = obj.get("task_id") or md.get("task_id")
    if not task_id and isinstance(obj.get("id"), str) and not obj.get("id", "").startswith(("chatcmpl", "msg_")):
        task_id = obj["id"]
    for key in ("status", "passed", "reward", "model"):
        if key in obj:
            meta[key] = obj[key]
    if isinstance(obj.get("metadata"), dict):
        meta["metadata"] = obj["metadata"]
    return (str(task_id) if task_id else None), meta


def _usage(u: Any) -> dict[str, int] | None:
    if not isinstance(u, dict):
        return None
    p = u.get("prompt_tokens", u.get("input_tokens", 0)) or 0
    c = u.get("completion_tokens", u.get("output_tokens", 0)) or 0
    return {"prompt_tokens": int(p), "completion_tokens": int(c)}


# --- OpenAI --------------------------------------------------------------------------------------------------


def _no_anthropic_blocks(i: int, content: Any) -> None:
    """An Anthropic tool block in an OpenAI record would be dropped as "not text": refuse the record."""
    if isinstance(content, list):
        for j, b in enumerate(content):
            if isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "server_tool_use"):
                raise BadRecord(f"messages[{i}].content[{j}]: an Anthropic {b['type']} block in an OpenAI record "
                                "(import it with --format anthropic or auto)")


def openai_messages(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise BadRecord("'messages' must be a list")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or "role" not in m:
            raise BadRecord(f"messages[{i}]: expected an object with a 'role'")
        role = m["role"]
        _no_anthropic_blocks(i, m.get("content"))
        if role in ("system", "developer"):
            out.append({"role": "system", "content": _text(m.get("content"))})
        elif role == "user":
            out.append({"role": "user", "content": _text(m.get("content"))})
        elif role == "assistant":
            calls = []
            for j, tc in enumerate(m.get("tool_calls") or []):
                fn = tc.get("function") if isinstance(tc, dict) else None
                if not isinstance(fn, dict) or not fn.get("name"):
                    raise BadRecord(f"messages[{i}].tool_calls[{j}]: expected {{function: {{name, arguments}}}}")
                calls.append({"id": tc.get("id") or "", "name": fn["name"], "arguments": fn.get("arguments")})
            fc = m.get("function_call")
            if isinstance(fc, dict) and fc.get("name"):
                calls.append({"id": "", "name": fc["name"], "arguments": fc.get("arguments")})
            out.append({"role": "assistant", "content": _text(m.get("content")), "calls": calls,
                        "reasoning": _text(m.get("reasoning_content") or m.get("reasoning"))})
        elif role in ("tool", "function"):
            out.append({"role": "tool", "content": _text(m.get("content")), "tool_call_id": m.get("tool_call_id") or "",
                        "name": m.get("name") or ""})
        else:
            raise BadRecord(f"messages[{i}]: unknown role {role!r}")
    return out


def convert_openai(obj: Any) -> Trajectory:
    if not isinstance(obj, dict):
        raise BadRecord(f"expected a JSON object, got {type(obj).__name__}")
    task_id, meta = _record_meta(obj)
    request = obj
    for key in ("request", "body"):  # a request/response log, or a Batch API input line
        if isinstance(obj.get(key), dict) and "messages" in obj[key]:
            request = obj[key]
    if "messages" not in request:
        raise BadRecord("no 'messages' (expected {messages: [...]} or {request: {messages}, response: {...}})")
    if obj.get("custom_id"):
        meta["custom_id"] = obj["custom_id"]
    messages = openai_messages(request["messages"])
    response = obj.get("response")
    if isinstance(response, dict) and isinstance(response.get("body"), dict):  # Batch API output line
        response = response["body"]
    if isinstance(response, dict):
        choices = response.get("choices") or []
        if choices and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict):
            messages += openai_messages([{"role": "assistant", **choices[0]["message"]}])
        usage = _usage(response.get("usage"))
        if usage:
            meta["usage"] = usage
        if response.get("model"):
            meta.setdefault("model", response["model"])
    if request.get("model"):
        meta.setdefault("model", request["model"])
    return trajectory_from_messages(messages, _tool_specs(request.get("tools") or request.get("functions")),
                                    task_id=task_id, meta=meta)


# --- Anthropic -----------------------------------------------------------------------------------------------


def anthropic_messages(raw: Any, system: Any = None) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise BadRecord("'messages' must be a list")
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": _text(system)})
    for i, m in enumerate(raw):
        if isinstance(m, dict) and (m.get("role") in ("system", "developer", "tool", "function") or m.get("tool_calls")):
            what = "tool_calls" if m.get("tool_calls") else f"role {m['role']!r}"
            raise BadRecord(f"messages[{i}]: an OpenAI message ({what}) in an Anthropic record "
                            "(import it with --format openai or auto)")
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise BadRecord(f"messages[{i}]: expected an object with role user or assistant")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise BadRecord(f"messages[{i}].content: expected a string or a list of blocks")
        if m["role"] == "user":
            texts = []
            for j, b in enumerate(blocks):
                if not isinstance(b, dict):
                    raise BadRecord(f"messages[{i}].content[{j}]: expected a block object")
                if b.get("type") == "tool_result":
                    if not b.get("tool_use_id"):
                        raise BadRecord(f"messages[{i}].content[{j}]: tool_result without tool_use_id")
                    out.append({"role": "tool", "content": _text(b.get("content")), "tool_call_id": b["tool_use_id"],
                                "error": bool(b.get("is_error"))})
                else:
                    texts.append(_text([b]))
            if any(texts):
                out.append({"role": "user", "content": "\n".join(t for t in texts if t)})
        else:
            text, reasoning, calls = [], [], []
            for j, b in enumerate(blocks):
                if not isinstance(b, dict):
                    raise BadRecord(f"messages[{i}].content[{j}]: expected a block object")
                kind = b.get("type")
                if kind == "text":
                    text.append(str(b.get("text", "")))
                elif kind in ("thinking", "redacted_thinking"):
                    reasoning.append(str(b.get("thinking", "")))
                elif kind in ("tool_use", "server_tool_use"):
                    if not b.get("name"):
                        raise BadRecord(f"messages[{i}].content[{j}]: tool_use without a name")
                    calls.append({"id": b.get("id") or "", "name": b["name"], "arguments": b.get("input") or {}})
            out.append({"role": "assistant", "content": "\n".join(text), "calls": calls, "reasoning": "\n".join(reasoning)})
    return out


def convert_anthropic(obj: Any) -> Trajectory:
    if not isinstance(obj, dict):
        raise BadRecord(f"expected a JSON object, got {type(obj).__name__}")
    task_id, meta = _record_meta(obj)
    request = obj.get("request") if isinstance(obj.get("request"), dict) else obj
    if "messages" not in request:
        raise BadRecord("no 'messages' (expected {system, messages: [...], tools} or {request, response})")
    messages = anthropic_messages(request["messages"], request.get("system"))
    response = obj.get("response")
    if isinstance(response, dict) and isinstance(response.get("content"), list):
        messages += anthropic_messages([{"role": "assistant", "content": response["content"]}])
        usage = _usage(response.get("usage"))
        if usage:
            meta["usage"] = usage
        if response.get("model"):
            meta.setdefault("model", response["model"])
    if request.get("model"):
        meta.setdefault("model", request["model"])
    return trajectory_from_messages(messages, _tool_specs(request.get("tools")), task_id=task_id, meta=meta)


# --- OpenTelemetry GenAI -----------------------------------------------------------------------------------------


def _otlp_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_otlp_value(x) for x in (v["arrayValue"].get("values") or [])]
    if "kvlistValue" in v:
        return {kv["key"]: _otlp_value(kv.get("value")) for kv in (v["kvlistValue"].get("values") or [])}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attrs(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, list):
        return {a["key"]: _otlp_value(a.get("value")) for a in raw if isinstance(a, dict) and "key" in a}
    return {}


def otel_spans(obj: Any) -> Iterator[dict[str, Any]]:
    """Normalised spans ``{trace_id, span_id, parent_id, name, start, attrs, events}`` of one record."""
    if not isinstance(obj, dict):
        raise BadRecord(f"expected a JSON object, got {type(obj).__name__}")
    if "resourceSpans" in obj:
        for rs in obj["resourceSpans"] or []:
            for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
                for span in ss.get("spans") or []:
                    yield {
                        "trace_id": span.get("traceId", ""), "span_id": span.get("spanId", ""),
                        "parent_id": span.get("parentSpanId") or "", "name": span.get("name", ""),
                        "start": int(span.get("startTimeUnixNano") or 0), "attrs": _attrs(span.get("attributes")),
                        "events": [(e.get("name", ""), _attrs(e.get("attributes"))) for e in span.get("events") or []],
                    }
        return
    if "context" in obj or "traceId" in obj or "trace_id" in obj:
        ctx = obj.get("context") or {}
        yield {
            "trace_id": ctx.get("trace_id") or obj.get("traceId") or obj.get("trace_id") or "",
            "span_id": ctx.get("span_id") or obj.get("spanId") or obj.get("span_id") or "",
            "parent_id": obj.get("parent_id") or obj.get("parentSpanId") or "",
            "name": obj.get("name", ""),
            "start": obj.get("start_time") or obj.get("startTimeUnixNano") or "",
            "attrs": _attrs(obj.get("attributes")),
            "events": [(e.get("name", ""), _attrs(e.get("attributes"))) for e in obj.get("events") or []],
        }
        return
    raise BadRecord("not an OpenTelemetry span export (expected 'resourceSpans' or span objects with 'context')")


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _semconv_messages(raw: Any) -> list[dict[str, Any]]:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages``: ``[{role, parts: [...]}]``."""
    raw = _maybe_json(raw)
    if not isinstance(raw, list):
        return []
    out: list[dict[str, Any]] = []
    for m in raw:
        if not isinstance(m, dict):
            continue
        role = m.get("role", "user")
        parts = m.get("parts")
        if parts is None:  # some instrumentations write OpenAI-shaped messages here
            out += openai_messages([m]) if role in ("system", "user", "assistant", "tool") else []
            continue
        text, calls = [], []
        for p in parts:
            if not isinstance(p, dict):
                continue
            kind = p.get("type")
            if kind == "text":
                text.append(str(p.get("content", p.get("text", ""))))
            elif kind == "tool_call":
                calls.append({"id": p.get("id") or "", "name": p.get("name") or "", "arguments": p.get("arguments")})
            elif kind == "tool_call_response":
                resp = p.get("response", p.get("result", ""))
                out.append({"role": "tool", "content": resp if isinstance(resp, str) else json.dumps(resp),
                            "tool_call_id": p.get("id") or ""})
            elif kind == "reasoning":
                pass
        if role in ("assistant", "model"):
            out.append({"role": "assistant", "content": "\n".join(text), "calls": calls, "reasoning": ""})
        elif text and role in ("user", "system"):
            out.append({"role": role, "content": "\n".join(text)})
        elif text and role == "tool":
            out.append({"role": "tool", "content": "\n".join(text), "tool_call_id": ""})
    return out


def _flattened(attrs_: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenLLMetry-style ``gen_ai.prompt.0.role`` ... attributes as OpenAI messages."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs_.items():
        if not key.startswith(prefix):
            continue
        idx, _, rest = key[len(prefix):].partition(".")
        if not idx.isdigit():
            continue
        m = items.setdefault(int(idx), {})
        if rest.startswith("tool_calls."):
            j, _, field = rest[len("tool_calls."):].partition(".")
            if j.isdigit():
                calls = m.setdefault("_calls", {})
                calls.setdefault(int(j), {})[field] = value
        else:
            m[rest] = value
    out = []
    for _, m in sorted(items.items()):
        msg: dict[str, Any] = {"role": m.get("role", "assistant" if "completion" in prefix else "user"),
                               "content": m.get("content", "")}
        if "_calls" in m:
            msg["tool_calls"] = [{"id": c.get("id", ""), "type": "function",
                                  "function": {"name": c.get("name", ""), "arguments": c.get("arguments", "")}}
                                 for _, c in sorted(m["_calls"].items())]
        if m.get("tool_call_id"):
            msg["tool_call_id"] = m["tool_call_id"]
        out.append(msg)
    return openai_messages(out)


_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}


def _event_messages(events: list[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for name, a in events:
        if name in _EVENT_ROLES:
            body = _maybe_json(a.get("body", a.get("content", "")))
            msg = dict(body) if isinstance(body, dict) else {"content": body}
            msg["role"] = _EVENT_ROLES[name]
            if msg["role"] == "tool" and "id" in msg and "tool_call_id" not in msg:
                msg["tool_call_id"] = msg.pop("id")
            inputs += openai_messages([msg])
        elif name == "gen_ai.choice":
            body = _maybe_json(a.get("body", a.get("message", "")))
            msg = body.get("message", body) if isinstance(body, dict) else {"content": body}
            outputs += openai_messages([{**msg, "role": "assistant"}])
        elif name == "gen_ai.content.prompt":
            inputs += openai_messages(_maybe_json(a.get("gen_ai.prompt", "[]")) or [])
        elif name == "gen_ai.content.completion":
            outputs += openai_messages(_maybe_json(a.get("gen_ai.completion", "[]")) or [])
    return inputs, outputs


def _span_messages(span: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    a = span["attrs"]
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    if "gen_ai.system_instructions" in a:
        sys_parts = _maybe_json(a["gen_ai.system_instructions"])
        inputs.append({"role": "system", "content": _text(sys_parts) if not isinstance(sys_parts, list) else
                       "\n".join(str(p.get("content", p.get("text", ""))) for p in sys_parts if isinstance(p, dict))})
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        inputs += _semconv_messages(a.get("gen_ai.input.messages"))
        outputs += _semconv_messages(a.get("gen_ai.output.messages"))
    elif any(k.startswith("gen_ai.prompt.") for k in a):
        inputs += _flattened(a, "gen_ai.prompt.")
        outputs += _flattened(a, "gen_ai.completion.")
    else:
        ev_in, ev_out = _event_messages(span["events"])
        inputs += ev_in
        outputs += ev_out
    return inputs, outputs


def trajectory_from_trace(spans: list[dict[str, Any]]) -> Trajectory:
    spans = sorted(spans, key=lambda s: (str(s["start"]).zfill(32) if isinstance(s["start"], int) else str(s["start"])))
    best: tuple[int, list[dict[str, Any]]] | None = None
    tool_results: dict[str, dict[str, Any]] = {}
    tool_calls: list[dict[str, Any]] = []
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    models: list[str] = []
    tools: list[ToolSpec] = []
    task_id = None
    for span in spans:
        a = span["attrs"]
        task_id = task_id or a.get("agentsynth.task_id")
        op = a.get("gen_ai.operation.name", "")
        if op == "execute_tool" or "gen_ai.tool.name" in a and op != "chat":
            call_id = str(a.get("gen_ai.tool.call.id") or f"span-{span['span_id']}")
            tool_calls.append({"id": call_id, "name": a.get("gen_ai.tool.name") or span["name"],
                               "arguments": a.get("gen_ai.tool.call.arguments")})
            if "gen_ai.tool.call.result" in a:
                result = a["gen_ai.tool.call.result"]
                tool_results[call_id] = {"role": "tool", "tool_call_id": call_id,
                                         "content": result if isinstance(result, str) else json.dumps(result),
                                         "error": bool(a.get("error.type"))}
            continue
        inputs, outputs = _span_messages(span)
        if not inputs and not outputs:
            continue
        for key, field in (("gen_ai.usage.input_tokens", "prompt_tokens"), ("gen_ai.usage.prompt_tokens", "prompt_tokens"),
                           ("gen_ai.usage.output_tokens", "completion_tokens"),
                           ("gen_ai.usage.completion_tokens", "completion_tokens")):
            if isinstance(a.get(key), (int, float)):
                usage[field] += int(a[key])
        model = a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
        if model and model not in models:
            models.append(model)
        if not tools and a.get("gen_ai.tool.definitions"):
            defs = _maybe_json(a["gen_ai.tool.definitions"])
            if isinstance(defs, list):
                tools = _tool_specs(defs)
        conv = inputs + outputs
        if best is None or len(inputs) >= best[0]:
            best = (len(inputs), conv)
    trace_id = spans[0]["trace_id"] if spans else ""
    meta: dict[str, Any] = {"trace_id": trace_id}
    if usage["prompt_tokens"] or usage["completion_tokens"]:
        meta["usage"] = usage
    if models:
        meta["model"] = models[0]
    if best is not None:
        messages = best[1]
        answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
        # fill results the chat spans did not carry from the execute_tool spans
        filled: list[dict[str, Any]] = []
        for m in messages:
            filled.append(m)
            for call in m.get("calls") or ():
                if call.get("id") not in answered and call.get("id") in tool_results:
                    filled.append(tool_results[call["id"]])
        messages = filled
    elif tool_calls:
        messages = []
        for call in tool_calls:
            messages.append({"role": "assistant", "content": "", "calls": [call], "reasoning": ""})
            if call["id"] in tool_results:
                messages.append(tool_results[call["id"]])
    else:
        raise BadRecord(f"trace {trace_id or '?'}: no GenAI spans (no messages, no execute_tool spans)")
    return trajectory_from_messages(messages, tools, task_id=task_id, meta=meta)


# --- ShareGPT and ADP (this plugin's own export formats, and datasets published in them) --------------------

_SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "model": "assistant", "tool": "tool", "observation": "tool", "function_response": "tool",
                   "ipython": "tool", "function_call": "function_call"}


def _split_tool_calls(value: str) -> tuple[str, list[dict[str, Any]]]:
    """Text and Hermes-style ``<tool_call>{...}</tool_call>`` blocks of an assistant turn."""
    calls: list[dict[str, Any]] = []
    text: list[str] = []
    rest = value
    while "<tool_call>" in rest:
        before, _, rest = rest.partition("<tool_call>")
        body, found, rest = rest.partition("</tool_call>")
        if not found:
            raise BadRecord("<tool_call> without </tool_call>")
        text.append(before)
        try:
            call = json.loads(body)
        except json.JSONDecodeError as exc:
            raise BadRecord(f"<tool_call> body is not JSON: {exc.msg}") from None
        if not isinstance(call, dict) or not call.get("name"):
            raise BadRecord("<tool_call> body needs a 'name'")
        calls.append({"id": "", "name": call["name"], "arguments": call.get("arguments", call.get("parameters"))})
    text.append(rest)
    return "\n".join(t.strip("\n") for t in text if t.strip()), calls


def convert_sharegpt(obj: Any) -> Trajectory:
    if not isinstance(obj, dict):
        raise BadRecord(f"expected a JSON object, got {type(obj).__name__}")
    task_id, meta = _record_meta(obj)
    conv = obj.get("conversations")
    if not isinstance(conv, list):
        raise BadRecord("'conversations' must be a list of {from, value}")
    messages: list[dict[str, Any]] = []
    if isinstance(obj.get("system"), str) and obj["system"]:
        messages.append({"role": "system", "content": obj["system"]})
    counter = 0
    pending: list[str] = []
    for i, turn in enumerate(conv):
        if not isinstance(turn, dict) or "from" not in turn:
            raise BadRecord(f"conversations[{i}]: expected an object with 'from' and 'value'")
        role = _SHAREGPT_ROLES.get(str(turn["from"]))
        if role is None:
            raise BadRecord(f"conversations[{i}]: unknown role {turn['from']!r}")
        value = _text(turn.get("value"))
        if role in ("system", "user"):
            messages.append({"role": role, "content": value})
            continue
        if role == "tool":
            call_id = pending.pop(0) if pending else ""
            messages.append({"role": "tool", "content": value, "tool_call_id": call_id})
            continue
        if role == "function_call":  # LLaMA-Factory: the value is the call's JSON
            try:
                body = json.loads(value)
            except json.JSONDecodeError as exc:
                raise BadRecord(f"conversations[{i}]: function_call value is not JSON: {exc.msg}") from None
            bodies = body if isinstance(body, list) else [body]
            text, calls = "", [{"id": "", "name": b.get("name"), "arguments": b.get("arguments")} for b in bodies]
        else:
            try:
                text, calls = _split_tool_calls(value)
            except BadRecord as exc:
                raise BadRecord(f"conversations[{i}]: {exc}") from None
        for call in calls:
            counter += 1
            call["id"] = f"call_{counter}"
            pending.append(call["id"])
        messages.append({"role": "assistant", "content": text, "calls": calls, "reasoning": ""})
    tools = obj.get("tools")
    if isinstance(tools, str) and tools.strip():
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise BadRecord(f"'tools' is not JSON: {exc.msg}") from None
    return trajectory_from_messages(messages, _tool_specs(tools), task_id=task_id, meta=meta)


def convert_adp(obj: Any) -> Trajectory:
    """Agent Data Protocol trajectories (``content`` of typed actions and observations)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("content"), list):
        raise BadRecord("expected an ADP trajectory: {id, content: [...], details}")
    details = obj.get("details") if isinstance(obj.get("details"), dict) else {}
    meta: dict[str, Any] = {}
    for key in ("status", "passed", "reward"):
        if key in details:
            meta[key] = details[key]
    messages: list[dict[str, Any]] = []
    pending: list[str] = []
    counter = 0
    for i, item in enumerate(obj["content"]):
        if not isinstance(item, dict) or "class_" not in item:
            raise BadRecord(f"content[{i}]: expected an object with 'class_'")
        kind = item["class_"]
        if kind in ("text_observation", "TextObservation"):
            content = _text(item.get("content"))
            source = item.get("source", "user")
            if source == "environment" and item.get("name") == "system" and not messages:
                messages.append({"role": "system", "content": content})
            elif source == "environment" and pending:
                messages.append({"role": "tool", "content": content, "tool_call_id": pending.pop(0)})
            elif source in ("user", "environment"):
                messages.append({"role": "user", "content": content})
            else:  # the agent's own words
                messages.append({"role": "assistant", "content": content, "calls": [], "reasoning": ""})
        elif kind in ("api_action", "ApiAction"):
            if not item.get("function"):
                raise BadRecord(f"content[{i}]: api_action without 'function'")
            counter += 1
            call = {"id": f"call_{counter}", "name": item["function"], "arguments": item.get("kwargs") or {}}
            pending.append(call["id"])
            messages.append({"role": "assistant", "content": "", "calls": [call],
                             "reasoning": item.get("reasoning_content") or item.get("description") or ""})
        elif kind in ("message_action", "MessageAction"):
            messages.append({"role": "assistant", "content": _text(item.get("content")), "calls": [],
                             "reasoning": item.get("reasoning_content") or ""})
        elif kind in ("code_action", "CodeAction"):
            counter += 1
            call = {"id": f"call_{counter}", "name": f"execute_{item.get('language') or 'code'}",
                    "arguments": {"code": item.get("content", "")}}
            pending.append(call["id"])
            messages.append({"role": "assistant", "content": "", "calls": [call],
                             "reasoning": item.get("reasoning_content") or item.get("description") or ""})
        elif kind in ("web_observation", "WebObservation"):
            content = item.get("axtree") or item.get("html") or item.get("url") or ""
            if pending:
                messages.append({"role": "tool", "content": content, "tool_call_id": pending.pop(0)})
            else:
                messages.append({"role": "user", "content": content})
        else:
            raise BadRecord(f"content[{i}]: unknown class_ {kind!r}")
    task_id = details.get("task_id") or (obj.get("id") if isinstance(obj.get("id"), str) else None)
    traj = trajectory_from_messages(messages, _tool_specs(details.get("tools")), task_id=task_id, meta=meta)
    # ADP puts each call in its own action: calls stay one per turn, as written
    return traj


# --- importer classes -----------------------------------------------------------------------------------------


@attrs.define(kw_only=True)
class BaseImporter:
    """Reads one file; problems are ``file:line: message`` strings (kept up to MAX_PROBLEMS_KEPT)."""

    format_name = "base"
    on_error: str = "skip"
    problems: list[str] = attrs.field(factory=list, init=False)
    problem_count: int = attrs.field(default=0, init=False)
    on_problem: Callable[[str], None] | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self.on_error not in ("skip", "stop"):
            raise AgentsynthError(f"importer {self.format_name!r}: on_error: expected skip or stop, got {self.on_error!r}")

    def problem(self, message: str) -> None:
        if self.on_error == "stop":
            raise AgentsynthError(message)
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(message)
        if self.on_problem is not None:
            self.on_problem(message)

    def _open_check(self, path: Path) -> None:
        if not path.exists():
            raise AgentsynthError(f"{path}: file not found")
        if path.is_dir():
            raise AgentsynthError(f"{path}: is a directory, expected a trace file")

    def read(self, path: Path | str) -> Iterator[Trajectory]:
        path = Path(path)
        self._open_check(path)
        for line, obj in iter_json(path):
            traj = self._one(path, line, obj, self.format_name, self.convert)
            if traj is not None:
                yield traj

    def _one(self, path: Path, line: int, obj: Any, fmt: str, convert: Callable[[Any], Trajectory]) -> Trajectory | None:
        """One record converted, or None after reporting why it could not be (``file:line: why``)."""
        if isinstance(obj, BadRecord):
            self.problem(f"{where(path, line)}: {obj}")
            return None
        try:
            traj = convert(obj)
        except BadRecord as exc:
            self.problem(f"{where(path, line)}: {exc}")
            return None
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            self.problem(f"{where(path, line)}: malformed {fmt} record ({type(exc).__name__}: {exc})")
            return None
        traj.metadata["import"].update(source=str(path), line=line, format=fmt)
        return traj

    def convert(self, obj: Any) -> Trajectory:
        raise NotImplementedError


@attrs.define(kw_only=True)
class OpenAIImporter(BaseImporter):
    """OpenAI chat logs (messages + tool_calls), one conversation per line."""

    format_name = "openai"

    def convert(self, obj: Any) -> Trajectory:
        return convert_openai(obj)


@attrs.define(kw_only=True)
class AnthropicImporter(BaseImporter):
    """Anthropic Messages conversations (tool_use / tool_result blocks), one per line."""

    format_name = "anthropic"

    def convert(self, obj: Any) -> Trajectory:
        return convert_anthropic(obj)


@attrs.define(kw_only=True)
class OtelImporter(BaseImporter):
    """OpenTelemetry GenAI spans (OTLP JSON lines or console-exporter spans): one trajectory per trace.

    Spans are buffered per trace until the trace's root span has been seen and ``flush_spans``
    more spans have arrived (or the file ends), so memory is bounded by the traces in flight.
    """

    format_name = "otel"
    flush_spans: int = 10000

    def read(self, path: Path | str) -> Iterator[Trajectory]:
        path = Path(path)
        self._open_check(path)
        traces: dict[str, list[dict[str, Any]]] = {}
        first_line: dict[str, int] = {}
        complete: dict[str, int] = {}  # trace -> spans seen in the file when its root span arrived
        seen = 0
        buffered = 0
        for line, obj in iter_json(path):
            if isinstance(obj, BadRecord):
                self.problem(f"{where(path, line)}: {obj}")
                continue
            try:
                spans = list(otel_spans(obj))
            except BadRecord as exc:
                self.problem(f"{where(path, line)}: {exc}")
                continue
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                self.problem(f"{where(path, line)}: malformed span export ({type(exc).__name__}: {exc})")
                continue
            for span in spans:
                tid = str(span["trace_id"])
                traces.setdefault(tid, []).append(span)
                first_line.setdefault(tid, line)
                seen += 1
                buffered += 1
                if not span["parent_id"]:
                    complete[tid] = seen
            # a finished trace (root seen) is emitted once flush_spans more spans went by without
            # more of it, or at once when too much is buffered
            ready = [t for t, at in complete.items() if seen - at >= self.flush_spans or buffered > 10 * self.flush_spans]
            for tid in ready:
                del complete[tid]
                spans_of = traces.pop(tid)
                buffered -= len(spans_of)
                yield from self._emit(path, tid, spans_of, first_line.pop(tid))
        for tid in list(traces):
            yield from self._emit(path, tid, traces.pop(tid), first_line.pop(tid))

    def _emit(self, path: Path, tid: str, spans: list[dict[str, Any]], line: int) -> Iterator[Trajectory]:
        try:
            traj = trajectory_from_trace(spans)
        except BadRecord as exc:
            self.problem(f"{where(path, line)}: {exc}")
            return
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            self.problem(f"{where(path, line)}: trace {tid}: malformed GenAI spans ({type(exc).__name__}: {exc})")
            return
        traj.metadata["import"].update(source=str(path), line=line, format="otel")
        yield traj


def detect_format(obj: Any) -> str:
    """``openai``, ``anthropic``, ``otel``, ``sharegpt`` or ``adp`` for one decoded record (never raises:
    a malformed record gets a format whose converter then says what is wrong with it)."""
    if isinstance(obj, dict):
        if "resourceSpans" in obj or ("context" in obj and "attributes" in obj) or "traceId" in obj:
            return "otel"
        if isinstance(obj.get("conversations"), list):
            return "sharegpt"
        if isinstance(obj.get("content"), list) and any(isinstance(c, dict) and "class_" in c for c in obj["content"]):
            return "adp"
        request = obj.get("request") if isinstance(obj.get("request"), dict) else obj
        if isinstance(obj.get("response"), dict) and obj["response"].get("type") == "message":
            return "anthropic"
        messages = request.get("messages") if isinstance(request.get("messages"), list) else []
        if "system" in request and "messages" in request and not any(
            isinstance(m, dict) and m.get("role") == "system" for m in messages
        ):
            return "anthropic"
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking") for b in content
            ):
                return "anthropic"
            if isinstance(m, dict) and (m.get("tool_calls") or m.get("role") in ("tool", "system", "developer")):
                return "openai"
    return "openai"


@attrs.define(kw_only=True)
class ShareGPTImporter(BaseImporter):
    """ShareGPT conversations (human/gpt/tool turns, Hermes ``<tool_call>`` blocks or LLaMA-Factory
    ``function_call``/``observation`` turns), one per line."""

    format_name = "sharegpt"

    def convert(self, obj: Any) -> Trajectory:
        return convert_sharegpt(obj)


@attrs.define(kw_only=True)
class ADPImporter(BaseImporter):
    """Agent Data Protocol trajectories (api/code/message actions, text/web observations), one per line."""

    format_name = "adp"

    def convert(self, obj: Any) -> Trajectory:
        return convert_adp(obj)


IMPORTERS: dict[str, type[BaseImporter]] = {
    "openai": OpenAIImporter, "anthropic": AnthropicImporter, "otel": OtelImporter,
    "sharegpt": ShareGPTImporter, "adp": ADPImporter,
}


CONVERTERS: dict[str, Callable[[Any], Trajectory]] = {
    "openai": convert_openai, "anthropic": convert_anthropic, "sharegpt": convert_sharegpt, "adp": convert_adp,
}


@attrs.define(kw_only=True)
class AutoImporter(BaseImporter):
    """Detects the format of every record, so one file may mix OpenAI, Anthropic, ShareGPT and ADP records.

    A file whose first record is an OpenTelemetry span export is read by the otel importer as a whole
    (spans of one trace are spread over many records); a span among chat records is a problem.
    ``formats`` counts the records read per format; ``detected`` names them (``anthropic+openai``).
    """

    format_name = "auto"
    detected: str = attrs.field(default="", init=False)
    formats: dict[str, int] = attrs.field(factory=dict, init=False)

    def read(self, path: Path | str) -> Iterator[Trajectory]:
        path = Path(path)
        self._open_check(path)
        self.formats = {}
        first = "openai"
        for _, obj in iter_json(path):
            if not isinstance(obj, BadRecord):
                first = detect_format(obj)
                break
        self.detected = first
        if first == "otel":
            yield from self._read_otel(path)
            return
        formats = self.formats
        for line, obj in iter_json(path):
            fmt = "openai" if isinstance(obj, BadRecord) else detect_format(obj)
            if fmt == "otel":
                self.problem(f"{where(path, line)}: an OpenTelemetry span export among chat records "
                             "(import span files on their own, with --format otel)")
                continue
            traj = self._one(path, line, obj, fmt, CONVERTERS[fmt])
            if traj is not None:
                formats[fmt] = formats.get(fmt, 0) + 1
                self.detected = "+".join(sorted(formats))
                yield traj

    def _read_otel(self, path: Path) -> Iterator[Trajectory]:
        inner = OtelImporter(on_error=self.on_error)
        inner.on_problem = self.on_problem
        try:
            for traj in inner.read(path):
                self.formats["otel"] = self.formats.get("otel", 0) + 1
                yield traj
        finally:
            self.problems = inner.problems
            self.problem_count = inner.problem_count
