"""A hostile (or just badly behaved) HTTP API for the world's tests: huge, endless, slow and
compressed answers (a bomb, and small ones), redirects elsewhere, a crash, header echo, and a
counter with a reset hook."""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import sys
import time
import urllib.parse
import zlib
from pathlib import Path
from typing import Any

DOC = (Path(__file__).parent / "hostile.yaml").read_text()
BOMB = gzip.compress(b"0" * 50_000_000, compresslevel=9)


@functools.cache
def double_bomb() -> bytes:
    """'gzip, gzip': ~300 bytes on the wire, 100 MB after both layers (httpx inflated a layer per
    chunk, whole: 200 MB at peak). Built streaming, never held inflated."""
    inner = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = b"0" * 1_000_000
    packed = b"".join(inner.compress(zeros) for _ in range(100)) + inner.flush()
    return gzip.compress(packed, compresslevel=9)


DEEP = b"[" * 200_000 + b"]" * 200_000  # valid JSON, nested past Python's recursion limit


async def _json(send: Any, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(payload, sort_keys=True).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def create_app(world: Path, seed: int = 0) -> Any:
    state = {"counter": seed}
    store: dict[str, Any] = {}
    (world / "counter.json").write_text(json.dumps(state))

    def save() -> None:
        (world / "counter.json").write_text(json.dumps(state))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path, method = scope["path"], scope["method"]
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if path == "/openapi.yaml":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/yaml")]})
            await send({"type": "http.response.body", "body": DOC.encode()})
        elif path == "/huge":  # 100 MB, streamed
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            chunk = b"A" * 65536
            for _ in range(1600):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        elif path == "/drip":  # headers at once, then one byte every 0.2 s, forever
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            while True:
                await send({"type": "http.response.body", "body": b".", "more_body": True})
                await asyncio.sleep(0.2)
        elif path == "/linger":  # answers at once, then its handler takes a while to return
            await _json(send, 200, {"value": state["counter"]})
            await asyncio.sleep(0.5)
        elif path == "/block-after":  # answers at once, then blocks its server's loop (sync work after the reply)
            await _json(send, 200, {"value": state["counter"]})
            time.sleep(float(urllib.parse.parse_qs(scope["query_string"].decode()).get("s", ["1.5"])[0]))
        elif path == "/big-headers":  # 8 MB of response headers
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(f"x-h{i}".encode(), b"v" * 8000) for i in range(1000)]})
            await send({"type": "http.response.body", "body": b"{}"})
        elif path == "/chatty":  # an app that prints: 200 KB to stdout and to stderr per call
            print("x" * 200_000, flush=True)
            print("y" * 200_000, file=sys.stderr, flush=True)
            await _json(send, 200, {"value": state["counter"]})
        elif path == "/openapi-varying.json":  # a new document every time it is asked
            state["documents"] = state.get("documents", 0) + 1
            await _json(send, 200, {"openapi": "3.1.0", "info": {"title": "Varying", "version": str(state["documents"])},
                                    "paths": {"/counter": {"get": {"operationId": "getCounter"}}}})
        elif path == "/stall":  # never answers
            await asyncio.sleep(3600)
        elif path == "/gzip":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain"), (b"content-encoding", b"gzip")]})
            await send({"type": "http.response.body", "body": BOMB})
        elif path == "/compressed":  # a small JSON answer, gzip, deflate (zlib) or raw deflate
            encoding = urllib.parse.parse_qs(scope["query_string"].decode()).get("encoding", ["gzip"])[0]
            raw = json.dumps({"value": state["counter"], "note": "z" * 3000}).encode()
            packed = {"gzip": lambda: gzip.compress(raw), "deflate": lambda: zlib.compress(raw),
                      "raw-deflate": lambda: zlib.compress(raw, wbits=-zlib.MAX_WBITS)}[encoding]()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-encoding", b"gzip" if encoding == "gzip" else b"deflate")]})
            await send({"type": "http.response.body", "body": packed})
        elif path == "/gzip2":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"content-encoding", b"gzip, gzip")]})
            await send({"type": "http.response.body", "body": double_bomb()})
        elif path == "/encoded":  # a Content-Encoding the client never asked for, or one it does not know
            encoding = urllib.parse.parse_qs(scope["query_string"].decode()).get("as", ["br"])[0]
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json"), (b"content-encoding", encoding.encode())]})
            await send({"type": "http.response.body", "body": b'{"value": 1}'})
        elif path == "/deep":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": DEEP})
        elif path.startswith("/store/"):  # a key-value store: whatever JSON is PUT is served back
            key = path.removeprefix("/store/")
            if method == "PUT":
                store[key] = json.loads(body)
                (world / "store.json").write_text(json.dumps(store))
            await _json(send, 200 if key in store else 404, store.get(key))
        elif path == "/redirect":
            to = urllib.parse.parse_qs(scope["query_string"].decode()).get("to", ["/"])[0]
            await send({"type": "http.response.start", "status": 302, "headers": [(b"location", to.encode())]})
            await send({"type": "http.response.body", "body": b""})
        elif path == "/boom":
            raise RuntimeError("the app fell over")
        elif path == "/echo":
            (world / "echo.json").write_text(json.dumps(headers))  # what really arrived
            await _json(send, 200, {"headers": headers, "query": scope["query_string"].decode(),
                                    "body": body.decode(), "raw_path": scope.get("raw_path", b"").decode()})
        elif path.startswith("/items/"):
            await _json(send, 200, {"raw_path": scope.get("raw_path", b"").decode(), "path": path})
        elif path == "/counter" and method == "GET":
            await _json(send, 200, {"value": state["counter"], "items": [{"id": 1, "tag": "a"}, {"id": 2, "tag": "b"}]})
        elif path == "/counter/increment" and method == "POST":
            by = json.loads(body or b"{}").get("by", 1)
            state["counter"] += by
            save()
            await _json(send, 201, {"value": state["counter"]})
        elif path == "/reset" and method == "POST":
            (world / "reset.json").write_text(json.dumps(headers))
            state["counter"] = json.loads(body or b"{}").get("start", 0)
            save()
            await _json(send, 200, {"value": state["counter"]})
        elif path == "/teapot":
            await _json(send, 418, {"detail": "I'm a teapot"})
        else:
            await _json(send, 404, {"detail": f"no route {path}"})

    return app


def failing_app(world: Path, seed: int = 0) -> Any:
    raise RuntimeError("database seed file missing")


def noisy_app(world: Path, seed: int = 0) -> Any:
    """An app whose factory prints (200 KB, more than a pipe holds) before its server listens."""
    print("starting the noisy app " + "x" * 200_000, flush=True)
    return create_app(world, seed)
