"""The embedded model server: an OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 over one GGUF.

Run by :mod:`agentsynth_local.manager` as ``python -m agentsynth_local.server --model FILE`` (also by
hand, for debugging: ``python -m agentsynth_local.server --model FILE --port 8081``). Standard library
HTTP over one of two runtimes: llama.cpp (``llama-cpp-python``, the default) or mistral.rs
(``mistralrs``, a prebuilt wheel; ``--runtime mistralrs``). On SmolLM2-135M both give the same
answers; llama.cpp decodes under a grammar ~4x faster (see the plugin's README).

What it adds over a plain llama.cpp server, for small models that are weak tool callers:

- **Tools in the prompt, calls parsed from the text.** Chat templates of small models (SmolLM2's is
  plain ChatML) know nothing of tools: the tools are described in the system message, an assistant
  tool call is written back as its JSON, a tool result becomes a user turn naming the tool.
- **Constrained calls.** With ``tool_choice: "required"`` (or a named function) the answer is decoded
  under a grammar built from the tools' JSON Schemas (``{"name": ..., "arguments": {...}}``), so it is
  always a call to a real tool with arguments of the right shape. ``response_format`` (``json_object``,
  ``json_schema``) is constrained the same way.
- **A clear 400** when the prompt does not fit the context, instead of a crash.

It stops when its stdin closes: the parent holds the other end, so the server ends with it even when
the parent is SIGKILLed (the kernel closes the pipe), whichever thread started it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import select
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL_PROMPT = (
    "You can call these tools. To call one, answer with only a JSON object "
    '{{"name": <tool name>, "arguments": <object>}} and nothing else.\n\nTools:\n{tools}'
)


def _tool_line(tool: dict[str, Any]) -> str:
    fn = tool.get("function", tool)
    params = fn.get("parameters") or {"type": "object", "properties": {}}
    props = ", ".join(
        f"{name}: {spec.get('type', 'any')}" if isinstance(spec, dict) else name
        for name, spec in (params.get("properties") or {}).items()
    )
    return f"- {fn.get('name')}({props}): {fn.get('description') or ''}".rstrip(": ")


def _call_text(call: dict[str, Any]) -> str:
    fn = call.get("function", {})
    args: Any = fn.get("arguments") or "{}"
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return json.dumps({"name": fn.get("name"), "arguments": args})


def to_template_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[dict[str, str]]:
    """OpenAI messages with tools -> plain role/content messages any chat template can render."""
    out: list[dict[str, str]] = []
    names: dict[str, str] = {}
    for msg in messages:
        role, content = msg.get("role", "user"), msg.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        content = content or ""
        if role == "assistant" and msg.get("tool_calls"):
            for call in msg["tool_calls"]:
                names[call.get("id", "")] = call.get("function", {}).get("name", "")
            calls = "\n".join(_call_text(c) for c in msg["tool_calls"])
            out.append({"role": "assistant", "content": f"{content}\n{calls}".strip()})
        elif role == "tool":
            name = names.get(msg.get("tool_call_id", ""), "the tool")
            out.append({"role": "user", "content": f"Result of {name}:\n{content}"})
        else:
            out.append({"role": role if role in ("system", "user", "assistant") else "user", "content": content})
    if tools:
        described = TOOL_PROMPT.format(tools="\n".join(_tool_line(t) for t in tools))
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{described}"}
        else:
            out.insert(0, {"role": "system", "content": described})
    return out


def _clean_schema(schema: Any) -> Any:
    """A tool's JSON Schema reduced to what the grammar converter handles (no formats, no $schema)."""
    if isinstance(schema, dict):
        return {k: _clean_schema(v) for k, v in schema.items() if k not in ("$schema", "format", "title", "examples")}
    if isinstance(schema, list):
        return [_clean_schema(v) for v in schema]
    return schema


def call_schema(tools: list[dict[str, Any]], only: str | None = None) -> dict[str, Any]:
    """The JSON Schema of one call to one of ``tools`` (or to the tool named ``only``)."""
    options = []
    for tool in tools:
        fn = tool.get("function", tool)
        if only is not None and fn.get("name") != only:
            continue
        params = _clean_schema(fn.get("parameters") or {"type": "object", "properties": {}})
        if params.get("type") != "object":
            params = {"type": "object"}
        options.append({"type": "object", "properties": {"name": {"const": fn.get("name")}, "arguments": params},
                        "required": ["name", "arguments"], "additionalProperties": False})
    if not options:
        raise ValueError(f"tool_choice names {only!r}, which is not among the tools")
    return options[0] if len(options) == 1 else {"anyOf": options}


def parse_calls(text: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls written as JSON objects in ``text`` (one or several), for tools that exist."""
    known = {t.get("function", t).get("name") for t in tools}
    decoder, i = json.JSONDecoder(), 0
    calls: list[dict[str, Any]] = []
    while True:
        start = text.find("{", i)
        if start < 0:
            return calls
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        i = end
        if isinstance(obj, dict) and obj.get("name") in known:
            args = obj.get("arguments", obj.get("parameters", {}))
            calls.append({"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                          "function": {"name": obj["name"],
                                       "arguments": args if isinstance(args, str) else json.dumps(args)}})


def close_truncated(text: str) -> Any:
    """A JSON value cut off mid-way, closed: an open string and the open brackets are closed, a key
    without its value or a trailing comma dropped. None when that still does not parse."""
    closers: list[str] = []
    in_string = escaped = key = False
    start, last = 0, ""
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                last = '"'
            continue
        if ch == '"':
            in_string, start = True, i
            key = bool(closers) and closers[-1] == "}" and last in ("{", ",")
        elif ch in "{[":
            closers.append("}" if ch == "{" else "]")
        elif ch in "}]" and closers:
            closers.pop()
        if not ch.isspace():
            last = ch
    out = text
    if in_string:
        out = text[:start] if key else (text[:-1] if escaped else text) + '"'
    for closer in reversed(closers):
        out = out.rstrip()
        if out.endswith(","):
            out = out[:-1]
        elif out.endswith(":"):
            out += " null"
        out += closer
    try:
        return json.loads(out)
    except ValueError:
        return None


def default_threads() -> int:
    """Threads for decoding and for the prompt: half the cores, fewer when the machine is busy.

    llama.cpp's threads wait for each other at every step: on a loaded machine one descheduled
    thread stalls the rest, and llama-cpp-python's default (all cores for the prompt) was measured
    10-30x slower than one thread on 2 shared cores at load 18 (86 s against 5 s for one answer)."""
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return max(1, min(cores // 2, cores - math.ceil(load)))


LOOP_TOKENS = 48  # above what a bounded string (a judge's 80-character rationale) can hold
PROMPT_CHUNK = 64  # prompt tokens evaluated between two checks that the client is still there


def looping(tokens: list[int]) -> bool:
    """The answer ends in a loop: one block of 1-32 tokens repeated back to back, at least 3 times and
    over at least LOOP_TOKENS tokens. Greedy decoding of a small model often ends so (the same sentence
    inside a JSON string until max_tokens); stopping there saves most of the answer's time."""
    n = len(tokens)
    for k in range(1, 33):
        reps = max(3, -(-LOOP_TOKENS // k))
        if n < reps * k:
            break
        block = tokens[n - k:]
        if all(tokens[n - (i + 1) * k:n - i * k] == block for i in range(1, reps)):
            return True
    return False


class Abandoned(Exception):
    """The client went away (Ctrl-C, a timeout, a killed run) before its answer was ready."""


def never() -> bool:
    return False


class Stats:
    """What the server is doing, for ``/health``: a run that was interrupted must leave it idle."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting = self.busy = self.served = 0
        self.abandoned_waiting = self.abandoned_generating = self.loops_stopped = 0

    def add(self, **deltas: int) -> None:
        with self.lock:
            for key, delta in deltas.items():
                setattr(self, key, getattr(self, key) + delta)

    def to_dict(self) -> dict[str, int]:
        with self.lock:
            return {"waiting": self.waiting, "busy": self.busy, "served": self.served,
                    "abandoned_waiting": self.abandoned_waiting, "abandoned_generating": self.abandoned_generating,
                    "loops_stopped": self.loops_stopped}


class LlamaCppEngine:
    """llama-cpp-python: one request at a time (a llama.cpp context is not shared); GBNF grammars.

    A request whose client has gone is dropped while it waits for its turn, between two chunks of
    its prompt's evaluation, and at the next token while it is decoded (a stopping criterion), so an
    interrupted run does not leave the model busy with answers nobody reads."""

    name = "llama.cpp"

    def __init__(self, path: str, n_ctx: int, threads: int | None) -> None:
        from llama_cpp import Llama

        threads = threads or default_threads()
        self.threads = threads
        self.llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False)
        self.n_ctx = self.llm.n_ctx()
        self.lock = threading.Lock()
        self.grammars: dict[str, Any] = {}
        self.stats = Stats()

    def _turn(self, abandoned: Callable[[], bool]) -> None:
        """Wait for the model; give up (Abandoned) as soon as the client has gone."""
        self.stats.add(waiting=1)
        try:
            while not self.lock.acquire(timeout=0.05):
                if abandoned():
                    self.stats.add(abandoned_waiting=1)
                    raise Abandoned("the client went away while waiting")
        finally:
            self.stats.add(waiting=-1)

    def generate(self, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                 params: dict[str, Any], abandoned: Callable[[], bool] = never) -> tuple[str, str, int, int]:
        from llama_cpp import LlamaGrammar, StoppingCriteriaList

        kwargs: dict[str, Any] = {"messages": messages, **params}
        self._turn(abandoned)
        self.stats.add(busy=1)
        try:
            if abandoned():
                self.stats.add(abandoned_waiting=1)
                raise Abandoned("the client went away while waiting")
            if schema is not None:
                key = json.dumps(schema, sort_keys=True)  # the cache key only: the grammar keeps the
                if key not in self.grammars:           # schema's key order, so "name" comes before "arguments"
                    self.grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
                kwargs["grammar"] = self.grammars[key]
            gone, looped, start = [False], [False], [-1]

            def stop_if_gone(ids: Any, _logits: Any) -> bool:
                if start[0] < 0:
                    start[0] = len(ids) - 1  # the prompt; what follows is the answer
                gone[0] = gone[0] or abandoned()
                looped[0] = looped[0] or looping(ids[start[0]:].tolist())
                return gone[0] or looped[0]

            # the chat handler calls create_completion with its own stopping criteria (if any): add ours.
            # Safe as an instance attribute: we hold the lock, one request at a time
            plain = self.llm.create_completion

            def create_completion(*args: Any, stopping_criteria: Any = None, **kw: Any) -> Any:
                criteria = StoppingCriteriaList([*(stopping_criteria or []), stop_if_gone])
                return plain(*args, stopping_criteria=criteria, **kw)

            # the prompt is evaluated in chunks, so a long one is given up between two of them too
            plain_eval = self.llm.eval

            def chunked_eval(tokens: Any) -> None:
                for i in range(0, len(tokens), PROMPT_CHUNK):
                    if i and abandoned():
                        gone[0] = True
                        raise Abandoned("the client went away during the prompt")
                    plain_eval(tokens[i:i + PROMPT_CHUNK])

            self.llm.create_completion = create_completion  # type: ignore[method-assign]
            self.llm.eval = chunked_eval  # type: ignore[method-assign]
            try:
                result = self.llm.create_chat_completion(**kwargs)
            except Abandoned:
                self.stats.add(abandoned_generating=1)
                raise
            finally:
                del self.llm.create_completion, self.llm.eval
            if gone[0] or abandoned():
                self.stats.add(abandoned_generating=1)
                raise Abandoned("the client went away during decoding")
            self.stats.add(served=1, loops_stopped=int(looped[0]))
        finally:
            self.stats.add(busy=-1)
            self.lock.release()
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        finish = "length" if looped[0] else choice.get("finish_reason") or "stop"
        return (choice["message"].get("content") or "", finish,
                usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))


class MistralRsEngine:
    """mistral.rs (prebuilt wheel): batches concurrent requests itself; JSON-Schema constraints (llguidance).
    Its runner cannot stop a request once sent: an abandoned one is dropped only before it starts."""

    name = "mistral.rs"

    def __init__(self, path: str, n_ctx: int, threads: int | None) -> None:
        if threads:
            os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
        from mistralrs import Runner, Which

        folder, filename = os.path.split(os.path.abspath(path))
        self.runner = Runner(which=Which.GGUF(quantized_model_id=folder, quantized_filename=filename),
                             token_source="none", max_seqs=8)
        self.n_ctx = min(n_ctx, self.runner.max_sequence_length() or n_ctx)
        self.stats = Stats()

    def generate(self, messages: list[dict[str, str]], schema: dict[str, Any] | None,
                 params: dict[str, Any], abandoned: Callable[[], bool] = never) -> tuple[str, str, int, int]:
        from mistralrs import ChatCompletionRequest

        if abandoned():
            self.stats.add(abandoned_waiting=1)
            raise Abandoned("the client went away")

        text = "".join(m["content"] for m in messages)
        prompt = len(self.runner.tokenize_text(text, False, None)) + 8 * len(messages)
        if prompt + params["max_tokens"] > self.n_ctx:
            raise ValueError(f"Requested tokens ({prompt} prompt + {params['max_tokens']} max_tokens) exceed "
                             f"context window of {self.n_ctx}")
        stop = params.get("stop")
        request = ChatCompletionRequest(
            model="default", messages=messages, max_tokens=params["max_tokens"], temperature=params["temperature"],
            top_p=params.get("top_p"), stop_seqs=[stop] if isinstance(stop, str) else stop,
            grammar=json.dumps(schema) if schema is not None else None,
            grammar_type="json_schema" if schema is not None else None,
        )
        self.stats.add(busy=1)
        try:
            result = self.runner.send_chat_completion_request(request)
        finally:
            self.stats.add(busy=-1)
        self.stats.add(served=1)
        choice = result.choices[0]
        return (choice.message.content or "", choice.finish_reason or "stop", result.usage.prompt_tokens,
                result.usage.completion_tokens)


ENGINES: dict[str, type[LlamaCppEngine] | type[MistralRsEngine]] = {"llama_cpp": LlamaCppEngine,
                                                                    "mistralrs": MistralRsEngine}


def pick_engine(wanted: str | None = None) -> str:
    """The runtime to use: ``wanted``, else the first installed of llama-cpp-python and mistral.rs."""
    import importlib.util

    if wanted:
        if wanted not in ENGINES:
            raise ValueError(f"unknown runtime {wanted!r}: use one of {', '.join(ENGINES)}")
        return wanted
    for name in ENGINES:
        if importlib.util.find_spec(name) is not None:
            return name
    raise ValueError("no runtime installed: pip install llama-cpp-python (or mistralrs)")


class Model:
    """One GGUF behind the OpenAI chat shapes, on the chosen runtime."""

    def __init__(self, path: str, n_ctx: int, threads: int | None, name: str, engine: str | None = None) -> None:
        self.name, self.path = name, path
        self.engine_name = pick_engine(engine)
        self.engine = ENGINES[self.engine_name](path, n_ctx, threads)
        self.n_ctx = self.engine.n_ctx

    def chat(self, body: dict[str, Any], abandoned: Callable[[], bool] = never) -> dict[str, Any]:
        """One chat completion; ``abandoned()`` says the client has gone (the work is then dropped)."""
        tools = body.get("tools") or []
        choice = body.get("tool_choice", "auto" if tools else "none")
        if choice == "none":
            tools = []
        messages = to_template_messages(body.get("messages") or [], tools)
        schema = None
        forced = None
        if tools and (choice == "required" or isinstance(choice, dict)):
            forced = choice["function"]["name"] if isinstance(choice, dict) else None
            schema = call_schema(tools, forced)
        fmt = body.get("response_format") or {}
        if schema is None and fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema") or {"type": "object"}
        elif schema is None and fmt.get("type") == "json_object":
            schema = {"type": "object"}
        params: dict[str, Any] = {
            "max_tokens": int(body.get("max_tokens") or body.get("max_completion_tokens") or 512),
            "temperature": float(body.get("temperature") or 0.0), "top_p": float(body.get("top_p") or 1.0),
            "stop": body.get("stop"),
        }
        text, finish, prompt_tokens, completion_tokens = self.engine.generate(
            messages, _clean_schema(schema) if schema is not None else None, params, abandoned)
        finish = "length" if finish == "length" else "stop"
        if schema is not None and not tools and finish == "length":
            closed = close_truncated(text)  # constrained JSON cut off: closed, so the client sees what is missing
            text = json.dumps(closed) if closed is not None else text
        message: dict[str, Any] = {"role": "assistant", "content": text}
        calls = parse_calls(text, tools) if tools else []
        if calls:
            message = {"role": "assistant", "content": "", "tool_calls": calls if schema is None else calls[:1]}
            finish = "tool_calls"
        elif tools and schema is not None:
            # cut off inside the constrained call (max_tokens; a small model loops inside a string): the
            # call closed where it was cut, so the tool runs with what the model wrote; else the raw text
            named = re.search(r'"name"\s*:\s*"([^"]+)"', text)
            name = forced or (named.group(1) if named else next((t.get("function", t).get("name") for t in tools), ""))
            closed = close_truncated(text)
            args = closed.get("arguments") if isinstance(closed, dict) else None
            message = {"role": "assistant", "content": "", "tool_calls": [
                {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args) if isinstance(args, dict) else text}}]}
            finish = "length" if finish == "length" else "tool_calls"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}", "object": "chat.completion", "created": int(time.time()),
            "model": self.name, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client pools connections
    model: Model

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the parent shows what matters
        pass

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, code: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send(code, {"error": {"message": message, "type": kind}})

    def _client_gone(self) -> bool:
        """The client closed its connection (it never sends more while it waits for an answer, so a
        readable socket means EOF or a reset)."""
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            return sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [
                {"id": self.model.name, "object": "model", "owned_by": "agentsynth-local",
                 "context_length": self.model.n_ctx}]})
        elif self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send(200, {"status": "ok", "model": self.model.name, "context_length": self.model.n_ctx,
                             **self.model.engine.stats.to_dict()})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        try:
            body = json.loads(raw)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("body must be a JSON object with a 'messages' list")
        except ValueError as exc:
            self._error(400, f"invalid request: {exc}")
            return
        if body.get("stream"):
            self._error(400, "stream=true is not supported by the embedded server")
            return
        try:
            self._send(200, self.model.chat(body, self._client_gone))
        except Abandoned:  # nobody to answer: drop the connection
            self.close_connection = True
        except ValueError as exc:  # llama-cpp-python: "Requested tokens (N) exceed context window of M"
            self._error(400, f"{exc} (model {self.model.name}, context {self.model.n_ctx} tokens)")
        except Exception as exc:  # keep serving; the client retries 5xx
            self._error(500, f"{type(exc).__name__}: {exc}", "server_error")


def _exit_when_stdin_closes() -> None:
    try:
        while sys.stdin.buffer.read(65536):
            pass
    except (OSError, ValueError):
        pass
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentsynth_local.server", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="path of a .gguf file")
    parser.add_argument("--name", default=None, help="model name the server answers to (default: file stem)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed as 'READY <port>')")
    parser.add_argument("--ctx", type=int, default=4096, help="context size in tokens")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--watch-stdin", action="store_true", help="exit when stdin closes (the parent died)")
    parser.add_argument("--runtime", choices=sorted(ENGINES), default=None,
                        help="default: llama_cpp if installed, else mistralrs")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.model):
        parser.error(f"no model file {args.model}")
    if args.watch_stdin:
        threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    name = args.name or os.path.basename(args.model).removesuffix(".gguf")
    try:
        Handler.model = Model(args.model, args.ctx, args.threads, name, args.runtime)
    except ValueError as exc:
        parser.error(str(exc))
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"READY {server.server_address[1]} {Handler.model.n_ctx} {Handler.model.engine_name}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
