"""A real, scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks.

It speaks plain HTTP/1.1 with keep-alive (stdlib asyncio only) and serves
``POST /v1/chat/completions`` (and ``GET /v1/models``). What it answers is
scripted: a list of :class:`Reply` objects consumed in order, and/or a
``handler(request) -> Reply`` function that sees the decoded request body.
Every request is logged (:attr:`ScriptedLLMServer.requests`).

Use it as a context manager (it runs its own event loop on a daemon thread,
so sync and async tests alike can use it)::

    from agentsynth_kernel.testing import ScriptedLLMServer, reply, tool_calls, status

    with ScriptedLLMServer([status(429), tool_calls(("get", {"key": "a"})), reply("done")]) as server:
        client = LLMClient(api_base=server.base_url, api_key="test", cache=False)
        ...
        assert len(server.requests) == 3

or as a separate process (``python -m agentsynth_kernel.testing --latency 0.05``),
which benchmarks use so the server's CPU is not counted against the client.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import msgspec

# --- replies --------------------------------------------------------------------------------------


@attrs.define
class Reply:
    """One scripted answer. Build them with :func:`reply`, :func:`tool_calls`, :func:`status`,
    :func:`hang`, :func:`garbage` and :func:`disconnect` rather than directly.

    ``kind`` is ``message`` (a normal completion), ``status`` (an HTTP error with ``body``),
    ``hang`` (accept the request, never answer; the connection closes after ``delay``),
    ``garbage`` (HTTP 200 with ``body`` as is) or ``disconnect`` (close the connection).
    ``usage`` is ``(prompt_tokens, completion_tokens)``; ``None`` estimates them from the text.
    ``delay`` is added to the server's ``latency``.
    """

    kind: str = "message"
    content: str | None = None
    calls: list[tuple[str, str, str]] = attrs.field(factory=list)  # (id, name, raw JSON arguments)
    usage: tuple[int, int] | None = None
    status_code: int = 200
    body: bytes = b""
    headers: dict[str, str] = attrs.field(factory=dict)
    delay: float = 0.0
    finish_reason: str | None = None
    model: str | None = None


def reply(content: str = "done", *, usage: tuple[int, int] | None = None, delay: float = 0.0) -> Reply:
    """A final assistant message (no tool calls)."""
    return Reply("message", content=content, usage=usage, delay=delay)


def tool_calls(*calls: tuple[str, Any] | tuple[str, Any, str], content: str | None = None,
               usage: tuple[int, int] | None = None, delay: float = 0.0) -> Reply:
    """An assistant message with (parallel) tool calls.

    Each call is ``(name, arguments)`` or ``(name, arguments, id)``; ``arguments`` is a dict
    (JSON-encoded for you) or a string sent verbatim (so tests can send broken JSON).
    """
    out = []
    for i, call in enumerate(calls):
        name, args = call[0], call[1]
        call_id = call[2] if len(call) > 2 else f"call_{i}_{name}"
        raw = args if isinstance(args, str) else json.dumps(args)
        out.append((call_id, name, raw))
    return Reply("message", content=content, calls=out, usage=usage, delay=delay, finish_reason="tool_calls")


def status(code: int = 500, body: str | bytes | Mapping[str, Any] | None = None, *,
           headers: Mapping[str, str] | None = None, delay: float = 0.0) -> Reply:
    """An HTTP error, e.g. ``status(429, headers={"Retry-After": "0"})``."""
    if body is None:
        body = {"error": {"message": f"scripted error {code}", "type": "scripted", "code": code}}
    if isinstance(body, Mapping):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    return Reply("status", status_code=code, body=body, headers=dict(headers or {}), delay=delay)


def hang(seconds: float = 3600.0) -> Reply:
    """Read the request and never answer; the connection is closed after ``seconds``."""
    return Reply("hang", delay=seconds)


def garbage(body: str | bytes = b"<html>502 Bad Gateway</html>", *, code: int = 200) -> Reply:
    """A body that is not a chat completion (malformed JSON or the wrong shape) with HTTP ``code``."""
    return Reply("garbage", status_code=code, body=body.encode() if isinstance(body, str) else body)


def disconnect() -> Reply:
    """Close the connection without answering."""
    return Reply("disconnect")


# --- request log ----------------------------------------------------------------------------------


@attrs.define
class LoggedRequest:
    """One request the server received (``json`` is the decoded body, or None)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    received_at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.json or {}).get("messages", []))


Handler = Callable[[dict[str, Any]], "Reply | None"]


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, Mapping):
        return sum(_words(v) for v in value.values())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    return 0


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


class ScriptedLLMServer:
    """An OpenAI-compatible chat-completions server with scripted answers.

    ``script``: replies served in order. ``handler(request_body) -> Reply | None`` decides when the
    script is empty (``None`` falls through to ``default``). ``default``: the reply once both are
    exhausted (by default an HTTP 400 saying so, which clients do not retry). ``latency``: seconds
    added before every answer. ``port=0`` picks a free port.
    """

    def __init__(self, script: Iterable[Reply] = (), *, handler: Handler | None = None,
                 default: Reply | None = None, latency: float = 0.0, host: str = "127.0.0.1",
                 port: int = 0, model: str = "scripted-model", log_requests: bool = True) -> None:
        self._script: collections.deque[Reply] = collections.deque(script)
        self.handler = handler
        self.default = default
        self.latency = latency
        self.host, self.port = host, port
        self.model = model
        self.log_requests = log_requests
        self.requests: list[LoggedRequest] = []
        self.count = 0  # requests answered or attempted (also when not logged)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._counter = 0

    # --- script ---------------------------------------------------------------------------------

    def add(self, *replies: Reply) -> ScriptedLLMServer:
        """Append replies to the script (thread-safe)."""
        self._script.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not served yet."""
        return len(self._script)

    def clear(self) -> None:
        """Forget the request log and the remaining script."""
        self._script.clear()
        self.requests.clear()
        self.count = 0

    @property
    def base_url(self) -> str:
        """What clients use as ``api_base`` (ends in ``/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        try:
            return self._script.popleft()
        except IndexError:
            pass
        if self.handler is not None:
            result = self.handler(body)
            if result is not None:
                return result
        if self.default is not None:
            return self.default
        return status(400, {"error": {"message": "scripted server: script exhausted", "type": "scripted"}})

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        """Start serving on a daemon thread; returns when the port is bound."""
        ready = threading.Event()
        error: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(self._bind())
            except BaseException as exc:  # reported to start()
                error.append(exc)
                ready.set()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="scripted-llm-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if error:
            raise error[0]
        return self

    async def _bind(self) -> asyncio.base_events.Server:
        server = await asyncio.start_server(self._serve, self.host, self.port, backlog=1024, reuse_address=True)
        self.port = server.sockets[0].getsockname()[1]
        return server

    def stop(self) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None or loop.is_closed():
            return

        async def shutdown() -> None:
            server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(5)
        except Exception:
            pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = self._server = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def serve_forever(self) -> None:
        """Serve on the current event loop until cancelled (the ``python -m`` entry point)."""
        self._server = await self._bind()
        async with self._server:
            await self._server.serve_forever()

    # --- HTTP -----------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line or not request_line.strip():
                    return
                method, path, _version = request_line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    key, _, value = line.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(length) if length else b""
                keep_alive = headers.get("connection", "").lower() != "close"
                if not await self._respond(method, path, headers, body, writer):
                    return
                if not keep_alive:
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            return
        except asyncio.CancelledError:
            return
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _respond(self, method: str, path: str, headers: dict[str, str], body: bytes,
                       writer: asyncio.StreamWriter) -> bool:
        """Write one response; ``False`` closes the connection."""
        try:
            data = msgspec.json.decode(body) if body else None
        except msgspec.DecodeError:
            data = None
        with self._lock:
            self.count += 1
            self._counter += 1
            serial = self._counter
            if self.log_requests:
                self.requests.append(LoggedRequest(method, path, headers, body, data, time.time()))
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route.endswith("/models"):
            payload = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "agentsynth"}]}
            self._write(writer, 200, json.dumps(payload).encode())
            return True
        if method != "POST" or not route.endswith("/chat/completions"):
            self._write(writer, 404, b'{"error": {"message": "not found"}}')
            return True
        if not isinstance(data, dict):
            self._write(writer, 400, b'{"error": {"message": "request body is not a JSON object"}}')
            return True
        reply_ = self._next_reply(data)
        wait = self.latency + reply_.delay
        if reply_.kind == "hang":
            await asyncio.sleep(reply_.delay)
            return False
        if wait > 0:
            await asyncio.sleep(wait)
        if reply_.kind == "disconnect":
            return False
        if reply_.kind in ("status", "garbage"):
            self._write(writer, reply_.status_code, reply_.body, reply_.headers)
            return True
        completion = self._completion(reply_, data, serial)
        if data.get("stream"):  # OpenAI streaming: the same completion as chat.completion.chunk events
            self._write(writer, 200, _sse(completion, bool((data.get("stream_options") or {}).get("include_usage"))),
                        {"Content-Type": "text/event-stream", **reply_.headers})
            return True
        self._write(writer, 200, msgspec.json.encode(completion), reply_.headers)
        return True

    def _completion(self, reply_: Reply, request: dict[str, Any], serial: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply_.content}
        if reply_.calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": raw}}
                for cid, name, raw in reply_.calls
            ]
        if reply_.usage is not None:
            prompt, completion = reply_.usage
        else:
            prompt = max(1, _words(request.get("messages")))
            completion = max(1, _words(reply_.content) + sum(_words(n) + _words(a) for _, n, a in reply_.calls))
        finish = reply_.finish_reason or "stop"
        cap = request.get("max_tokens") or request.get("max_completion_tokens")
        if isinstance(cap, int) and completion > cap:  # a real server stops generating at the cap
            completion, finish = cap, "length"
        return {
            "id": f"chatcmpl-{serial}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply_.model or request.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }

    @staticmethod
    def _write(writer: asyncio.StreamWriter, code: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        headers = dict(headers or {})
        head = [f"HTTP/1.1 {code} {_REASONS.get(code, 'Status')}",
                f"Content-Type: {headers.pop('Content-Type', 'application/json')}",
                f"Content-Length: {len(body)}", "Connection: keep-alive"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)


def _sse(completion: dict[str, Any], include_usage: bool) -> bytes:
    """A chat completion as the server-sent events a streaming server sends: the role, the content,
    each tool call (whole), the finish reason, the usage when asked, then ``[DONE]``."""
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        events.append(chunk({"content": message["content"]}))
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, **call}]}))
    events.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        events.append({**base, "choices": [], "usage": completion["usage"]})
    return b"".join(b"data: " + msgspec.json.encode(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def echo_handler(content: str = "done") -> Handler:
    """A handler that always answers ``content`` (useful as a benchmark or load server)."""
    fixed = reply(content)
    return lambda request: fixed


def conversation_handler(turns: Iterable[Reply], *, after: Reply | None = None) -> Handler:
    """A handler that answers by conversation position: turn ``k`` (the number of assistant messages
    already in the request) gets ``turns[k]``, then ``after`` (default ``reply("done")``).

    Unlike a script, this is safe with many conversations in flight at once: every episode
    sees the same sequence.
    """
    replies = list(turns)
    final = after or reply("done")

    def handle(request: dict[str, Any]) -> Reply:
        k = sum(1 for m in request.get("messages", []) if isinstance(m, Mapping) and m.get("role") == "assistant")
        return replies[k] if k < len(replies) else final

    return handle
