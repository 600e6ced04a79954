"""Streaming in front of the kernel's ScriptedLLMServer, for verifiers' chat loop.

verifiers' harness always asks for ``stream: true``; ScriptedLLMServer answers whole chat
completions. This adapter (a real HTTP server on 127.0.0.1) forwards each request to the scripted
server with ``stream: false`` and sends its completion back as OpenAI ``chat.completion.chunk``
server-sent events. It decides nothing: the scripted server's answer is what the model says.
(A stand-in until ScriptedLLMServer streams itself; see the plugin's report.)
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from aiohttp import ClientSession, web


def chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """The completion as the chunks a streaming server sends: role, content, tool calls, finish, usage."""
    base = {"id": completion.get("id", "chatcmpl-scripted"), "object": "chat.completion.chunk",
            "created": completion.get("created", 0), "model": completion.get("model", "scripted-model")}
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    out = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    if message.get("content"):
        out.append({**base, "choices": [{"index": 0, "delta": {"content": message["content"]}, "finish_reason": None}]})
    for i, call in enumerate(message.get("tool_calls") or []):
        out.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
            {"index": i, "id": call["id"], "type": "function",
             "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}}]}}]})
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}]})
    if completion.get("usage"):
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


class SSEAdapter:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.base_url = ""
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        stream = bool(body.pop("stream", False))
        body.pop("stream_options", None)
        async with ClientSession() as session:
            async with session.post(f"{self.upstream}/chat/completions", json=body,
                                    headers={"Authorization": request.headers.get("Authorization", "")}) as resp:
                status, payload = resp.status, await resp.read()
        if status != 200 or not stream:
            return web.Response(status=status, body=payload, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in chunks(json.loads(payload)):
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.base_url = f"http://{host}:{port}/v1"

    def __enter__(self) -> SSEAdapter:
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
