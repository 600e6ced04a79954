"""A stand-in for the providers' batch APIs: a real HTTP server on 127.0.0.1, for tests.

OpenAI's and Anthropic's batch endpoints cannot run here, so this server speaks their wire
formats (as documented by the providers) with scripted behaviour:

- OpenAI: ``POST /v1/files`` (multipart, purpose ``batch``), ``POST /v1/batches``,
  ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/files/{id}/content``.
- Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
  ``GET /v1/messages/batches/{id}/results``, ``POST /v1/messages/batches/{id}/cancel``.

A batch stays in progress for ``polls_to_finish`` status polls (or while ``hold`` is set), then
ends as ``outcome`` says: ``completed`` (every request answered by ``answer``, except those
``fail_item`` names), ``failed`` (validation failure), ``expired`` (the first
``expire_after`` requests answered, the rest expired) or ``never`` (stays in progress even when
cancelled). Everything it received is logged (``uploads``, ``created``, ``polls``, ``log``).
Use it as a context manager::

    with BatchStandIn(polls_to_finish=2) as server:
        client = LLMClient("openai/m", api_base=server.base_url, api_key="k", batch={"poll_s": 0.01})
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from typing import Any

CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # Anthropic's rule (OpenAI accepts these too)


def echo_answer(body: dict[str, Any]) -> str:
    """The default answer: ``echo: <last user text>``, so a test can tell which request got which."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return f"echo: {content}"
    return "echo: "


class BatchStandIn:
    """The batch stand-in server (runs its own event loop on a daemon thread)."""

    def __init__(self, *, polls_to_finish: int = 1, outcome: str = "completed", api_key: str | None = None,
                 answer: Callable[[dict[str, Any]], str] = echo_answer,
                 fail_item: Callable[[str, dict[str, Any]], str | None] | None = None,
                 expire_after: int = 0, usage: tuple[int, int] = (11, 5), results_url: str | None = None) -> None:
        if outcome not in ("completed", "failed", "expired", "never"):
            raise ValueError(f"outcome must be completed, failed, expired or never, got {outcome!r}")
        self.polls_to_finish, self.outcome, self.api_key = polls_to_finish, outcome, api_key
        self.answer, self.fail_item, self.expire_after, self.usage = answer, fail_item, expire_after, usage
        self.results_url = results_url  # a results_url to hand out instead of our own (attack tests)
        self.hold = threading.Event()  # while set, batches stay in progress
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.uploads: list[str] = []
        self.created: list[str] = []
        self.cancelled: list[str] = []
        self.polls: dict[str, int] = {}
        self.log: list[tuple[str, str]] = []
        self.unauthorized = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: Any = None
        self.port = 0

    # --- lifecycle --------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> BatchStandIn:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = self._loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # noqa: BLE001 - reported to start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=main, name="batch-stand-in", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]

    async def _serve(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)
        r = app.router
        r.add_post("/v1/files", self._upload)
        r.add_get("/v1/files/{id}/content", self._content)
        r.add_post("/v1/batches", self._create_openai)
        r.add_get("/v1/batches/{id}", self._get_openai)
        r.add_post("/v1/batches/{id}/cancel", self._cancel)
        r.add_post("/v1/messages/batches", self._create_anthropic)
        r.add_get("/v1/messages/batches/{id}", self._get_anthropic)
        r.add_get("/v1/messages/batches/{id}/results", self._results_anthropic)
        r.add_post("/v1/messages/batches/{id}/cancel", self._cancel)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    # --- helpers ----------------------------------------------------------------------------------

    def _json(self, data: Any, status: int = 200) -> Any:
        from aiohttp import web

        return web.json_response(data, status=status)

    def _authorized(self, request: Any, anthropic: bool) -> bool:
        if self.api_key is None:
            return True
        if anthropic:
            ok = request.headers.get("x-api-key") == self.api_key and bool(request.headers.get("anthropic-version"))
        else:
            ok = request.headers.get("authorization") == f"Bearer {self.api_key}"
        if not ok:
            self.unauthorized += 1
        return ok

    def _error(self, status: int, message: str) -> Any:
        return self._json({"error": {"message": message, "type": "invalid_request_error"}}, status)

    def _result_for(self, custom_id: str, body: dict[str, Any], index: int, batch: dict[str, Any]) -> tuple[str, Any]:
        """("ok", content) | ("error", message) | ("expired", None) for one request of an ended batch."""
        if batch["state"] == "cancelled":
            return "cancelled", None
        if self.outcome == "expired" and index >= self.expire_after:
            return "expired", None
        if self.fail_item is not None:
            message = self.fail_item(custom_id, body)
            if message:
                return "error", message
        return "ok", self.answer(body)

    def _advance(self, batch: dict[str, Any]) -> None:
        """One status poll: in progress for ``polls_to_finish`` polls (or while held), then ended."""
        batch["polls"] += 1
        self.polls[batch["id"]] = batch["polls"]
        if batch["state"] in ("ended", "cancelled", "failed"):
            return
        if batch["state"] == "cancelling" and self.outcome != "never":
            batch["state"] = "cancelled"
            self._finish(batch)
            return
        if self.outcome == "never" or self.hold.is_set() or batch["polls"] < self.polls_to_finish:
            if batch["state"] == "validating":
                batch["state"] = "in_progress"
            return
        batch["state"] = "ended"
        self._finish(batch)

    def _finish(self, batch: dict[str, Any]) -> None:
        if batch["protocol"] != "openai":
            return
        out, err = [], []
        for index, (custom_id, body) in enumerate(batch["items"]):
            kind, value = self._result_for(custom_id, body, index, batch)
            line: dict[str, Any] = {"id": f"batch_req_{index}", "custom_id": custom_id}
            if kind == "ok":
                line["response"] = {"status_code": 200, "request_id": f"req_{index}", "body": {
                    "id": f"chatcmpl-{index}", "object": "chat.completion", "model": body.get("model", ""),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": value},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": self.usage[0], "completion_tokens": self.usage[1],
                              "total_tokens": sum(self.usage)}}}
                line["error"] = None
                out.append(line)
            elif kind == "error":
                line["response"] = {"status_code": 400, "request_id": f"req_{index}",
                                    "body": {"error": {"message": value, "type": "invalid_request_error"}}}
                line["error"] = None
                err.append(line)
            else:
                line["response"] = None
                line["error"] = {"code": f"batch_{kind}", "message": f"This request could not be executed "
                                 f"before the batch was {kind}."}
                err.append(line)
        for name, lines in (("output_file_id", out), ("error_file_id", err)):
            if lines:
                file_id = f"file-{batch['id']}-{name[:3]}"
                self.files[file_id] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                batch[name] = file_id

    # --- OpenAI -----------------------------------------------------------------------------------

    async def _upload(self, request: Any) -> Any:
        self.log.append(("POST", "/v1/files"))
        if not self._authorized(request, False):
            return self._error(401, "Incorrect API key provided")
        form = await request.post()
        if form.get("purpose") != "batch":
            return self._error(400, f"purpose must be 'batch', got {form.get('purpose')!r}")
        upload = form.get("file")
        if upload is None or not hasattr(upload, "file"):
            return self._error(400, "no file")
        data = upload.file.read()
        with self._lock:
            file_id = f"file-in-{len(self.files) + 1}"
            self.files[file_id] = data
            self.uploads.append(file_id)
        return self._json({"id": file_id, "object": "file", "bytes": len(data), "purpose": "batch",
                           "filename": upload.filename, "created_at": 0})

    async def _content(self, request: Any) -> Any:
        from aiohttp import web

        self.log.append(("GET", request.path))
        if not self._authorized(request, False):
            return self._error(401, "Incorrect API key provided")
        data = self.files.get(request.match_info["id"])
        if data is None:
            return self._error(404, "No such file")
        return web.Response(body=data, content_type="application/octet-stream")

    def _openai_object(self, batch: dict[str, Any]) -> dict[str, Any]:
        state = {"ended": "completed" if self.outcome != "expired" else "expired"}.get(batch["state"], batch["state"])
        total = len(batch["items"])
        return {"id": batch["id"], "object": "batch", "endpoint": "/v1/chat/completions", "errors": batch.get("errors"),
                "input_file_id": batch["input_file_id"], "completion_window": "24h", "status": state,
                "output_file_id": batch.get("output_file_id"), "error_file_id": batch.get("error_file_id"),
                "created_at": 0, "request_counts": {"total": total, "completed": 0, "failed": 0}, "metadata": {}}

    async def _create_openai(self, request: Any) -> Any:
        self.log.append(("POST", "/v1/batches"))
        if not self._authorized(request, False):
            return self._error(401, "Incorrect API key provided")
        body = await request.json()
        if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return self._error(400, "endpoint must be /v1/chat/completions and completion_window 24h")
        data = self.files.get(body.get("input_file_id", ""))
        if data is None:
            return self._error(400, "input_file_id does not exist")
        items, errors, models = [], [], set()
        for n, raw in enumerate(data.decode().splitlines(), 1):
            try:
                line = json.loads(raw)
            except ValueError:
                errors.append({"code": "invalid_json_line", "line": n, "message": "not JSON"})
                continue
            if line.get("method") != "POST" or line.get("url") != "/v1/chat/completions" or \
                    not isinstance(line.get("body"), dict) or not isinstance(line.get("custom_id"), str):
                errors.append({"code": "invalid_request", "line": n, "message": "bad request line"})
                continue
            items.append((line["custom_id"], line["body"]))
            models.add(line["body"].get("model"))
        if len({c for c, _ in items}) != len(items):
            errors.append({"code": "duplicate_custom_id", "line": None, "message": "custom_id values must be unique"})
        if len(models) > 1:
            errors.append({"code": "mismatched_model", "line": None, "message": "one model per batch"})
        with self._lock:
            batch_id = f"batch_{len(self.batches) + 1:04d}"
            batch = {"id": batch_id, "protocol": "openai", "items": items, "state": "validating", "polls": 0,
                     "input_file_id": body["input_file_id"]}
            if errors or self.outcome == "failed":
                batch["state"] = "failed"
                batch["errors"] = {"object": "list", "data": errors or [
                    {"code": "invalid_request", "line": 1, "message": "The stand-in was told to fail this batch."}]}
            self.batches[batch_id] = batch
            self.created.append(batch_id)
        return self._json(self._openai_object(batch))

    async def _get_openai(self, request: Any) -> Any:
        self.log.append(("GET", request.path))
        if not self._authorized(request, False):
            return self._error(401, "Incorrect API key provided")
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch["protocol"] != "openai":
            return self._error(404, "No such batch")
        with self._lock:
            self._advance(batch)
        return self._json(self._openai_object(batch))

    async def _cancel(self, request: Any) -> Any:
        self.log.append(("POST", request.path))
        anthropic = "/messages/" in request.path
        if not self._authorized(request, anthropic):
            return self._error(401, "unauthorized")
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return self._error(404, "No such batch")
        with self._lock:
            self.cancelled.append(batch["id"])
            if batch["state"] in ("validating", "in_progress"):
                batch["state"] = "cancelling"
        return self._json(self._openai_object(batch) if not anthropic else self._anthropic_object(batch))

    # --- Anthropic --------------------------------------------------------------------------------

    def _anthropic_object(self, batch: dict[str, Any]) -> dict[str, Any]:
        ended = batch["state"] in ("ended", "cancelled")
        status = "ended" if ended else ("canceling" if batch["state"] == "cancelling" else "in_progress")
        url = self.results_url or f"{self.base_url}/messages/batches/{batch['id']}/results"
        n = len(batch["items"])
        return {"id": batch["id"], "type": "message_batch", "processing_status": status,
                "request_counts": {"processing": 0 if ended else n, "succeeded": n if ended else 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "ended_at": "2026-01-01T00:00:00Z" if ended else None, "created_at": "2026-01-01T00:00:00Z",
                "expires_at": "2026-01-02T00:00:00Z", "cancel_initiated_at": None,
                "results_url": url if ended else None}

    async def _create_anthropic(self, request: Any) -> Any:
        self.log.append(("POST", "/v1/messages/batches"))
        if not self._authorized(request, True):
            return self._json({"type": "error", "error": {"type": "authentication_error",
                                                          "message": "invalid x-api-key"}}, 401)
        body = await request.json()
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return self._error(400, "requests: expected a non-empty list")
        items = []
        for i, entry in enumerate(requests):
            custom_id, params = entry.get("custom_id"), entry.get("params")
            if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
                return self._error(400, f"requests.{i}.custom_id: must match {CUSTOM_ID.pattern}")
            if not isinstance(params, dict) or not all(k in params for k in ("model", "max_tokens", "messages")):
                return self._error(400, f"requests.{i}.params: model, max_tokens and messages are required")
            roles = [m.get("role") for m in params["messages"]]
            if any(r not in ("user", "assistant") for r in roles) or any(a == b for a, b in zip(roles, roles[1:],
                                                                                                strict=False)):
                return self._error(400, f"requests.{i}.params.messages: roles must alternate user/assistant")
            items.append((custom_id, params))
        if len({c for c, _ in items}) != len(items):
            return self._error(400, "custom_id values must be unique within a batch")
        with self._lock:
            batch_id = f"msgbatch_{len(self.batches) + 1:04d}"
            batch = {"id": batch_id, "protocol": "anthropic", "items": items, "state": "in_progress", "polls": 0}
            self.batches[batch_id] = batch
            self.created.append(batch_id)
        return self._json(self._anthropic_object(batch))

    async def _get_anthropic(self, request: Any) -> Any:
        self.log.append(("GET", request.path))
        if not self._authorized(request, True):
            return self._error(401, "unauthorized")
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch["protocol"] != "anthropic":
            return self._error(404, "No such batch")
        with self._lock:
            self._advance(batch)
        return self._json(self._anthropic_object(batch))

    async def _results_anthropic(self, request: Any) -> Any:
        from aiohttp import web

        self.log.append(("GET", request.path))
        if not self._authorized(request, True):
            return self._error(401, "unauthorized")
        batch = self.batches.get(request.match_info["id"])
        if batch is None or batch["state"] not in ("ended", "cancelled"):
            return self._error(404, "results are not available yet")
        lines = []
        for index, (custom_id, params) in enumerate(batch["items"]):
            kind, value = self._result_for(custom_id, params, index, batch)
            if kind == "ok":
                result: dict[str, Any] = {"type": "succeeded", "message": {
                    "id": f"msg_{index}", "type": "message", "role": "assistant", "model": params["model"],
                    "content": [{"type": "text", "text": value}], "stop_reason": "end_turn", "stop_sequence": None,
                    "usage": {"input_tokens": self.usage[0], "output_tokens": self.usage[1]}}}
            elif kind == "error":
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": value}}}
            else:
                result = {"type": "canceled" if kind == "cancelled" else "expired"}
            lines.append(json.dumps({"custom_id": custom_id, "result": result}) + "\n")
        return web.Response(body="".join(lines).encode(), content_type="application/binary")
