"""Provider batch APIs: many requests in one job, at the providers' batch price (about half).

Turned on per client (``LLMClient(batch=...)``), per call (``complete(..., batch=...)``) or for a
whole process (``AGENTSYNTH_LLM_BATCH``). Requests that arrive within ``collect_s`` of each other
(for the same provider, endpoint, model and key) go out as one batch:

- **openai** (and OpenAI-compatible servers that implement it): the requests as a JSONL file
  uploaded to ``/files`` (purpose ``batch``), ``POST /batches``, ``GET /batches/{id}`` until it
  ends, then the output and error files from ``/files/{id}/content``, matched by ``custom_id``.
- **anthropic**: ``POST /v1/messages/batches`` with the requests translated to Messages params,
  ``GET /v1/messages/batches/{id}`` until ``processing_status`` is ``ended``, then the results
  JSONL, matched by ``custom_id``.

Each batch id is written to a journal (SQLite, in the run directory or beside the LLM cache) the
moment the provider returns it, with the request hash and spend-journal entry of every item. A
run killed while a batch runs re-makes the same requests when resumed; those find their items in
the journal and wait on the same batch (polling, never resubmitting). Budget and cache work as for
direct calls: the worst case is reserved before submission, the real usage settled per item.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import msgspec

from ..errors import AgentsynthError
from ..secrets import redact_bytes, redact_text
from .anthropic_wire import from_anthropic_message, to_anthropic_params
from .errors import Fatal, LLMError, Retryable
from .fast import import_off_loop
from .records import LLMResponse
from .routing import Route
from .wire import Malformed, WireResponse, normalize, retry_after_seconds, snippet

PROTOCOLS = ("openai", "anthropic")
ANTHROPIC_BASE = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
OPENAI_TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
ENV = "AGENTSYNTH_LLM_BATCH"


@attrs.frozen
class BatchSettings:
    """How requests are batched.

    ``provider``: ``auto`` (OpenAI-compatible routes use the OpenAI protocol, ``anthropic/``
    models Anthropic's; other routes are sent directly), ``openai`` or ``anthropic`` (a route that
    cannot be batched that way is an error). ``poll_s``: seconds between status polls.
    ``max_wait_s``: after this long (from submission, across resumes) the batch is cancelled and
    its unfinished requests fail. ``collect_s``: how long the first request of a batch waits for
    others. ``max_requests``: a batch is sent as soon as it has this many. ``api_base``: the batch
    endpoint when it is not the model's. ``journal``: the journal file (default: the run
    directory's ``llm-batches.sqlite``, else ``batches.sqlite`` beside the LLM cache).
    """

    provider: str = "auto"
    poll_s: float = 30.0
    max_wait_s: float = 26 * 3600.0
    collect_s: float = 2.0
    max_requests: int = 10_000
    api_base: str | None = None
    journal: str | None = None

    @classmethod
    def parse(cls, value: Any, where: str = "batch") -> BatchSettings | None:
        """``None``/``False``/``"off"`` -> off; ``True``/``"auto"``/a provider name -> defaults; a mapping
        of the fields above (or a BatchSettings). Bad values raise AgentsynthError naming ``where``."""
        if value is None or value is False:
            return None
        if isinstance(value, BatchSettings):
            return value
        if value is True:
            return cls()
        if isinstance(value, str):
            text = value.strip()
            if text.lower() in ("", "0", "off", "false", "no"):
                return None
            if text.startswith("{"):
                try:
                    value = msgspec.json.decode(text)
                except msgspec.DecodeError as exc:
                    raise AgentsynthError(f"{where}: not a JSON object: {exc}") from None
            else:
                value = {"provider": "auto" if text.lower() in ("1", "on", "true", "yes") else text}
        if not isinstance(value, Mapping):
            raise AgentsynthError(f"{where}: expected true, a provider name (openai, anthropic) or a mapping, "
                                  f"got {type(value).__name__}")
        fields = {a.name: a for a in attrs.fields(cls)}
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise AgentsynthError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; expected "
                                  f"{', '.join(fields)}")
        out: dict[str, Any] = {}
        for key, raw in value.items():
            if key == "provider":
                if raw not in ("auto", *PROTOCOLS):
                    raise AgentsynthError(f"{where}.provider: expected auto, openai or anthropic, got {raw!r}")
                out[key] = raw
            elif key in ("poll_s", "max_wait_s", "collect_s"):
                if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw >= 0 or raw != raw:
                    raise AgentsynthError(f"{where}.{key}: expected a number of seconds >= 0, got {raw!r}")
                out[key] = float(raw)
            elif key == "max_requests":
                if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
                    raise AgentsynthError(f"{where}.max_requests: expected an integer >= 1, got {raw!r}")
                out[key] = raw
            else:
                if raw is not None and not isinstance(raw, str):
                    raise AgentsynthError(f"{where}.{key}: expected a string, got {type(raw).__name__}")
                out[key] = raw
        return cls(**out)

    @classmethod
    def from_env(cls) -> BatchSettings | None:
        value = os.environ.get(ENV)
        return cls.parse(value, f"${ENV}") if value is not None else None


def protocol_for(route: Route, settings: BatchSettings) -> str | None:
    """The batch protocol of ``route`` under ``settings`` (None: send it directly)."""
    native = "openai" if route.transport == "openai" else ("anthropic" if route.provider == "anthropic" else None)
    if settings.provider == "auto":
        return native
    if native != settings.provider and not (settings.provider == "openai" and settings.api_base):
        raise AgentsynthError(f"batch.provider is {settings.provider!r} but model {route.model!r} is not served "
                              f"that way; use provider: auto, or give batch.api_base")
    return settings.provider


# --- the journal ----------------------------------------------------------------------------------


class BatchJournal:
    """Batch ids and their items on disk (SQLite, one file): what a resumed run polls instead of
    resubmitting. Items are found by request hash; a finished item keeps its response."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.db = sqlite3.connect(":memory:" if path is None else str(path), isolation_level=None,
                                  check_same_thread=False, timeout=10)
        try:
            if path is not None:
                self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript("""
                CREATE TABLE IF NOT EXISTS batches(id TEXT PRIMARY KEY, protocol TEXT NOT NULL, base TEXT NOT NULL,
                    model TEXT NOT NULL, submitted_at REAL NOT NULL, state TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS items(n INTEGER PRIMARY KEY, batch_id TEXT NOT NULL, custom_id TEXT NOT NULL,
                    key TEXT NOT NULL, spend_store TEXT, spend_entry INTEGER, tokens INTEGER NOT NULL DEFAULT 0,
                    pico INTEGER NOT NULL DEFAULT 0, response BLOB, error TEXT, settled INTEGER NOT NULL DEFAULT 0);
                CREATE INDEX IF NOT EXISTS items_key ON items(key);
            """)
        except sqlite3.DatabaseError as exc:
            raise AgentsynthError(f"{path}: not a usable batch journal: {exc}") from None

    @classmethod
    def open(cls, path: Path | None) -> BatchJournal:
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise AgentsynthError(f"{path}: cannot create the batch journal's directory: {exc}") from None
        return cls(path)

    def record(self, batch_id: str, protocol: str, base: str, model: str, items: list[BatchItem]) -> None:
        """The batch and its items, in one transaction, as soon as the provider named the batch."""
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?, 'running')",
                            (batch_id, protocol, base, model, time.time()))
            self.db.executemany(
                "INSERT INTO items(batch_id, custom_id, key, spend_store, spend_entry, tokens, pico) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(batch_id, i.custom_id, i.key, i.spend_store, i.spend_entry, i.tokens, i.pico) for i in items])
            self.db.execute("COMMIT")

    def finish(self, batch_id: str, outcomes: Mapping[str, LLMResponse | LLMError]) -> None:
        rows: list[tuple[bytes | None, str | None, str, str]] = []
        for custom_id, outcome in outcomes.items():
            if isinstance(outcome, LLMResponse):
                rows.append((redact_bytes(msgspec.json.encode(outcome)), None, batch_id, custom_id))
            else:
                rows.append((None, str(outcome), batch_id, custom_id))
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany("UPDATE items SET response = ?, error = ? WHERE batch_id = ? AND custom_id = ?", rows)
            self.db.execute("UPDATE batches SET state = 'ended' WHERE id = ?", (batch_id,))
            self.db.execute("COMMIT")

    def settled(self, batch_id: str, custom_id: str) -> None:
        """The item's spend-journal entry now holds its real cost (a later resume must not refund it)."""
        with self._lock:
            self.db.execute("UPDATE items SET settled = 1 WHERE batch_id = ? AND custom_id = ?", (batch_id, custom_id))

    def find(self, key: str, skip: set[int]) -> Resumed | None:
        """The first item for request ``key`` that can still answer (a running batch, or a stored
        response), not in ``skip`` (items this process already handed out)."""
        with self._lock:
            rows = self.db.execute(
                "SELECT i.n, i.batch_id, i.custom_id, i.spend_store, i.spend_entry, i.tokens, i.pico, i.response, i.settled, "
                "b.protocol, b.base, b.model, b.submitted_at, b.state FROM items i JOIN batches b ON b.id = i.batch_id "
                "WHERE i.key = ? ORDER BY i.n", (key,)).fetchall()
        for n, batch_id, custom_id, store, entry, tokens, pico, response, settled, protocol, base, model, at, state \
                in rows:
            if n in skip or (state != "running" and response is None):
                continue
            return Resumed(n, batch_id, custom_id, store, entry, int(tokens), int(pico), response, bool(settled),
                           protocol, base, model, float(at))
        return None

    def close(self) -> None:
        with self._lock:
            self.db.close()


@attrs.define(eq=False)
class BatchItem:
    """One request waiting for its batch."""

    custom_id: str
    key: str
    body: dict[str, Any]
    future: asyncio.Future[tuple[LLMResponse, bool]]
    spend_store: str | None = None
    spend_entry: int | None = None
    tokens: int = 0  # the reservation (worst case)
    pico: int = 0
    batch_id: str = ""  # once submitted


@attrs.frozen
class Resumed:
    """An item of an earlier session's batch, found in the journal."""

    n: int
    batch_id: str
    custom_id: str
    spend_store: str | None
    spend_entry: int | None
    tokens: int
    pico: int
    response: bytes | None
    settled: bool
    protocol: str
    base: str
    model: str
    submitted_at: float


# --- HTTP -----------------------------------------------------------------------------------------


class _Http:
    """One pooled aiohttp session for the batch endpoints of a loop (requests are few and small)."""

    def __init__(self, timeout: float, connect_timeout: float) -> None:
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self.session: Any = None
        self.aiohttp: Any = None

    async def request(self, method: str, url: str, headers: Mapping[str, str], *, body: bytes | None = None,
                      form: list[tuple[str, bytes | str, str | None, str | None]] | None = None,
                      ) -> tuple[int, bytes]:
        if self.aiohttp is None:
            self.aiohttp = await import_off_loop("aiohttp")
        aiohttp = self.aiohttp
        if self.session is None or self.session.closed:
            self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(
                total=self.timeout, sock_connect=self.connect_timeout))
        data: Any = body
        if form is not None:
            data = aiohttp.FormData()
            for name, value, filename, content_type in form:
                data.add_field(name, value, filename=filename, content_type=content_type)
        try:
            async with self.session.request(method, url, data=data, headers=dict(headers)) as response:
                content = await response.read()
                code = response.status
                retry_after = response.headers.get("retry-after")
        except TimeoutError:
            raise Retryable("timeout", f"{method} {url}: no response within {self.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise Retryable("connection", f"{method} {url}: connection error ({type(exc).__name__}: {exc})") from None
        if 200 <= code < 300:
            return code, content
        detail = f"{method} {url}: HTTP {code}: {snippet(content)}"
        if code in (408, 409, 429) or code >= 500:
            raise Retryable(str(code), detail, code, retry_after_seconds(retry_after))
        raise Fatal(detail, code)

    async def aclose(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            try:
                await session.close()
            except Exception:
                pass


def _json(content: bytes, what: str) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(content)
    except msgspec.DecodeError:
        raise Retryable("malformed", f"{what}: the answer is not JSON: {snippet(content, 120)}", 200) from None
    if not isinstance(value, dict):
        raise Retryable("malformed", f"{what}: the answer is not a JSON object", 200)
    return value


def _lines(content: bytes) -> list[dict[str, Any]]:
    out = []
    for line in content.splitlines():
        if line.strip():
            try:
                value = msgspec.json.decode(line)
            except msgspec.DecodeError:
                continue  # one broken line fails only the request it was for (it stays unanswered)
            if isinstance(value, dict):
                out.append(value)
    return out


# --- the two protocols ----------------------------------------------------------------------------


@attrs.frozen
class Status:
    """A batch as the provider reports it: ``done`` when it ended; ``reason`` for an end without
    results for every request (failed, expired, cancelled)."""

    done: bool
    state: str
    reason: str = ""


class Protocol:
    name = ""

    def __init__(self, http: _Http, base: str, api_key: str | None, headers: Mapping[str, str] | None) -> None:
        self.http, self.base, self.api_key = http, base.rstrip("/"), api_key
        self.extra_headers = dict(headers or {})

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    async def submit(self, model: str, items: list[BatchItem], default_max_tokens: int) -> str:
        raise NotImplementedError

    async def status(self, batch_id: str) -> tuple[Status, dict[str, Any]]:
        raise NotImplementedError

    async def results(self, batch_id: str, info: dict[str, Any]) -> dict[str, tuple[LLMResponse, bool] | LLMError]:
        raise NotImplementedError

    async def cancel(self, batch_id: str) -> None:
        raise NotImplementedError

    def same_host(self, url: str) -> bool:
        """Only follow a URL the provider returned to the host we talk to (our key goes with it)."""
        ours, theirs = urllib.parse.urlsplit(self.base), urllib.parse.urlsplit(url)
        return (ours.scheme, ours.netloc) == (theirs.scheme, theirs.netloc)


class OpenAIBatches(Protocol):
    name = "openai"

    def headers(self) -> dict[str, str]:
        headers = {"accept": "application/json", **self.extra_headers}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    async def submit(self, model: str, items: list[BatchItem], default_max_tokens: int) -> str:
        encode = msgspec.json.encode
        lines = [encode({"custom_id": i.custom_id, "method": "POST", "url": "/v1/chat/completions",
                         "body": {"model": model, **i.body}}) for i in items]
        _, content = await self.http.request("POST", f"{self.base}/files", self.headers(), form=[
            ("purpose", "batch", None, None),
            ("file", b"\n".join(lines) + b"\n", "agentsynth-batch.jsonl", "application/jsonl"),
        ])
        file_id = _json(content, "upload").get("id")
        if not isinstance(file_id, str) or not file_id:
            raise Retryable("malformed", "upload: the answer has no file id", 200)
        body = encode({"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h",
                       "metadata": {"source": "agentsynth"}})
        _, content = await self.http.request("POST", f"{self.base}/batches",
                                             {**self.headers(), "content-type": "application/json"}, body=body)
        batch_id = _json(content, "create batch").get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise Retryable("malformed", "create batch: the answer has no batch id", 200)
        return batch_id

    async def status(self, batch_id: str) -> tuple[Status, dict[str, Any]]:
        _, content = await self.http.request("GET", f"{self.base}/batches/{batch_id}", self.headers())
        info = _json(content, "batch status")
        state = str(info.get("status", ""))
        reason = ""
        if state == "failed":
            errors = (info.get("errors") or {}).get("data") if isinstance(info.get("errors"), dict) else None
            first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
            reason = f"the batch failed: {first.get('message') or first.get('code') or 'no reason given'}"
        elif state in ("expired", "cancelled"):
            reason = f"the batch {state} before this request ran"
        return Status(state in OPENAI_TERMINAL, state, reason), info

    async def _file(self, file_id: Any) -> list[dict[str, Any]]:
        if not isinstance(file_id, str) or not file_id:
            return []
        _, content = await self.http.request("GET", f"{self.base}/files/{urllib.parse.quote(file_id)}/content",
                                             self.headers())
        return _lines(content)

    async def results(self, batch_id: str, info: dict[str, Any]) -> dict[str, tuple[LLMResponse, bool] | LLMError]:
        out: dict[str, tuple[LLMResponse, bool] | LLMError] = {}
        for line in await self._file(info.get("output_file_id")) + await self._file(info.get("error_file_id")):
            custom_id = line.get("custom_id")
            if not isinstance(custom_id, str) or custom_id in out:
                continue
            raw = line.get("response")
            response: dict[str, Any] = raw if isinstance(raw, dict) else {}
            code = response.get("status_code")
            body = response.get("body")
            if code == 200 and isinstance(body, dict):
                try:
                    out[custom_id] = normalize(msgspec.convert(body, WireResponse, strict=False))
                except (msgspec.ValidationError, Malformed) as exc:
                    out[custom_id] = LLMError(f"batch {batch_id}: malformed result ({exc})", status=200,
                                              reason="batch_malformed")
                continue
            error = line.get("error") if isinstance(line.get("error"), dict) else None
            if error is None and isinstance(body, dict) and isinstance(body.get("error"), dict):
                error = body["error"]
            message = (error or {}).get("message") or (error or {}).get("code") or f"HTTP {code}"
            out[custom_id] = LLMError(f"batch {batch_id}: request failed: {message}",
                                      status=code if isinstance(code, int) else None, reason="batch_item")
        return out

    async def cancel(self, batch_id: str) -> None:
        await self.http.request("POST", f"{self.base}/batches/{batch_id}/cancel", self.headers())


class AnthropicBatches(Protocol):
    name = "anthropic"

    def headers(self) -> dict[str, str]:
        headers = {"accept": "application/json", "anthropic-version": ANTHROPIC_VERSION, **self.extra_headers}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return headers

    async def submit(self, model: str, items: list[BatchItem], default_max_tokens: int) -> str:
        requests = [{"custom_id": i.custom_id, "params": to_anthropic_params(model, i.body, default_max_tokens)}
                    for i in items]
        _, content = await self.http.request("POST", f"{self.base}/messages/batches",
                                             {**self.headers(), "content-type": "application/json"},
                                             body=msgspec.json.encode({"requests": requests}))
        batch_id = _json(content, "create batch").get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise Retryable("malformed", "create batch: the answer has no batch id", 200)
        return batch_id

    async def status(self, batch_id: str) -> tuple[Status, dict[str, Any]]:
        _, content = await self.http.request("GET", f"{self.base}/messages/batches/{batch_id}", self.headers())
        info = _json(content, "batch status")
        state = str(info.get("processing_status", ""))
        return Status(state == "ended", state), info

    async def results(self, batch_id: str, info: dict[str, Any]) -> dict[str, tuple[LLMResponse, bool] | LLMError]:
        url = info.get("results_url")
        if not isinstance(url, str) or not self.same_host(url):
            url = f"{self.base}/messages/batches/{batch_id}/results"
        _, content = await self.http.request("GET", url, self.headers())
        out: dict[str, tuple[LLMResponse, bool] | LLMError] = {}
        for line in _lines(content):
            custom_id, result = line.get("custom_id"), line.get("result")
            if not isinstance(custom_id, str) or not isinstance(result, dict) or custom_id in out:
                continue
            kind = result.get("type")
            if kind == "succeeded":
                try:
                    out[custom_id] = from_anthropic_message(result.get("message"))
                except Malformed as exc:
                    out[custom_id] = LLMError(f"batch {batch_id}: malformed result ({exc})", reason="batch_malformed")
            elif kind == "errored":
                raw = result.get("error")
                error: dict[str, Any] = raw if isinstance(raw, dict) else {}
                nested = error.get("error")
                inner: dict[str, Any] = nested if isinstance(nested, dict) else error
                message = inner.get("message") or inner.get("type") or "errored"
                out[custom_id] = LLMError(f"batch {batch_id}: request failed: {message}", reason="batch_item")
            else:  # canceled, expired
                out[custom_id] = LLMError(f"batch {batch_id}: the request was {kind} before it ran",
                                          reason=f"batch_{kind}")
        return out

    async def cancel(self, batch_id: str) -> None:
        await self.http.request("POST", f"{self.base}/messages/batches/{batch_id}/cancel", self.headers())


PROTOCOL_CLASSES: dict[str, type[Protocol]] = {"openai": OpenAIBatches, "anthropic": AnthropicBatches}


# --- the batcher ----------------------------------------------------------------------------------


@attrs.define(eq=False)
class _Group:
    protocol: Protocol
    model: str
    items: list[BatchItem] = attrs.field(factory=list)
    timer: asyncio.TimerHandle | None = None


class Batcher:
    """Collects requests of one event loop into batches and watches them until they end."""

    def __init__(self, settings: BatchSettings, journal: BatchJournal, *, max_retries: int,
                 backoff: Callable[[int, float | None], float], timeout: float, connect_timeout: float,
                 default_max_tokens: int, on_submit: Callable[[int], None] | None = None) -> None:
        self.settings, self.journal = settings, journal
        self.max_retries, self.backoff = max_retries, backoff
        self.default_max_tokens = default_max_tokens
        self.http = _Http(timeout, connect_timeout)
        self.groups: dict[tuple[str, str, str, str], _Group] = {}
        self.watchers: dict[str, asyncio.Future[dict[str, tuple[LLMResponse, bool] | LLMError]]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.claimed: set[int] = set()
        self.on_submit = on_submit
        self.submitted = 0

    def protocol(self, name: str, base: str, api_key: str | None, headers: Mapping[str, str] | None) -> Protocol:
        return PROTOCOL_CLASSES[name](self.http, base, api_key, headers)

    # --- new requests -----------------------------------------------------------------------------

    def add(self, protocol: Protocol, model: str, item: BatchItem) -> None:
        """Queue ``item``; its future resolves with (response, usage present?) or an LLMError."""
        group_key = (protocol.name, protocol.base, model, protocol.api_key or "")
        group = self.groups.get(group_key)
        if group is None:
            group = self.groups[group_key] = _Group(protocol, model)
        taken = {i.custom_id for i in group.items}
        if item.custom_id in taken:  # the same request twice in one batch: a distinct custom_id each
            n = 1
            while f"{item.key[:58]}-{n:05d}" in taken:
                n += 1
            item.custom_id = f"{item.key[:58]}-{n:05d}"
        group.items.append(item)
        loop = asyncio.get_running_loop()
        if len(group.items) >= self.settings.max_requests:
            self._flush(group_key)
        elif group.timer is None:
            group.timer = loop.call_later(self.settings.collect_s, self._flush, group_key)

    def _flush(self, group_key: tuple[str, str, str, str]) -> None:
        group = self.groups.pop(group_key, None)
        if group is None:
            return
        if group.timer is not None:
            group.timer.cancel()
        items = [i for i in group.items if not i.future.done()]  # cancelled while collecting: not sent
        if items:
            self._spawn(self._run(group.protocol, group.model, items))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _retrying(self, what: Callable[[], Any]) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await what()
            except Retryable as exc:
                if attempt > self.max_retries:
                    raise
                await asyncio.sleep(self.backoff(attempt - 1, exc.retry_after))

    async def _run(self, protocol: Protocol, model: str, items: list[BatchItem]) -> None:
        secrets = [protocol.api_key] if protocol.api_key else []
        try:
            batch_id: str = await self._retrying(
                lambda: protocol.submit(model, items, self.default_max_tokens))
        except (Retryable, Fatal) as exc:
            error = LLMError(redact_text(f"{model}: batch not submitted: {exc.detail}", secrets), status=exc.status,
                             reason="batch_submit", model=model)
            for item in items:
                if not item.future.done():
                    item.future.set_exception(error)
            return
        self.journal.record(batch_id, protocol.name, protocol.base, model, items)
        for item in items:
            item.batch_id = batch_id
        self.submitted += 1
        if self.on_submit is not None:
            self.on_submit(len(items))
        watcher = self.watch(protocol, batch_id, time.time())
        outcomes = await asyncio.shield(watcher)
        for item in items:
            if item.future.done():
                continue
            outcome = outcomes.get(item.custom_id) or outcomes.get("*") or _missing(batch_id, model)
            if isinstance(outcome, LLMError):
                item.future.set_exception(outcome)
            else:
                item.future.set_result(outcome)

    # --- watching -----------------------------------------------------------------------------------

    def watch(self, protocol: Protocol, batch_id: str, submitted_at: float,
              ) -> asyncio.Future[dict[str, tuple[LLMResponse, bool] | LLMError]]:
        """The outcomes of ``batch_id`` by custom_id, from one poller per batch (shared by all waiters)."""
        future = self.watchers.get(batch_id)
        if future is None:
            future = self.watchers[batch_id] = asyncio.ensure_future(self._watch(protocol, batch_id, submitted_at))
            self.tasks.add(future)
            future.add_done_callback(self.tasks.discard)
        return future

    async def _watch(self, protocol: Protocol, batch_id: str, submitted_at: float,
                     ) -> dict[str, tuple[LLMResponse, bool] | LLMError]:
        secrets = [protocol.api_key] if protocol.api_key else []
        settings = self.settings
        deadline = submitted_at + settings.max_wait_s
        cancel_deadline: float | None = None
        failures = 0
        status = Status(False, "")
        info: dict[str, Any] = {}
        while True:
            try:
                status, info = await protocol.status(batch_id)
                failures = 0
            except Retryable as exc:
                failures += 1
                if failures > max(self.max_retries, 3) * 4:  # the endpoint is gone for good
                    return self._fail(batch_id, f"status polls keep failing: {exc.detail}", secrets, "batch_poll")
            except Fatal as exc:
                return self._fail(batch_id, f"status poll rejected: {exc.detail}", secrets, "batch_poll")
            if status.done:
                break
            now = time.time()
            if cancel_deadline is None and now >= deadline:
                try:
                    await protocol.cancel(batch_id)
                except (Retryable, Fatal):
                    pass
                cancel_deadline = now + max(settings.poll_s * 3, min(60.0, settings.max_wait_s))
            elif cancel_deadline is not None and now >= cancel_deadline:
                return self._fail(batch_id, f"not done after max_wait_s={settings.max_wait_s:g}s (cancelled)",
                                  secrets, "batch_timeout", billed_unknown=True)
            await asyncio.sleep(settings.poll_s)
        try:
            raw = await self._retrying(lambda: protocol.results(batch_id, info))
        except (Retryable, Fatal) as exc:
            return self._fail(batch_id, f"results not downloaded: {exc.detail}", secrets, "batch_results",
                              billed_unknown=True)
        outcomes: dict[str, tuple[LLMResponse, bool] | LLMError] = {}
        for custom_id, value in raw.items():
            outcomes[custom_id] = value
        if status.reason:  # requests without a result line ended with the batch
            outcomes["*"] = LLMError(f"batch {batch_id}: {status.reason}",
                                     reason=f"batch_{status.state or 'failed'}")
        self.journal.finish(batch_id, {k: v if isinstance(v, LLMError) else v[0] for k, v in outcomes.items()
                                       if k != "*"})
        return outcomes

    def _fail(self, batch_id: str, detail: str, secrets: list[str], reason: str, *,
              billed_unknown: bool = False) -> dict[str, tuple[LLMResponse, bool] | LLMError]:
        return {"*": LLMError(redact_text(f"batch {batch_id}: {detail}", secrets), reason=reason,
                              billed_unknown=billed_unknown)}

    # --- resumed requests ---------------------------------------------------------------------------

    def claim(self, key: str) -> Resumed | None:
        """An item of an earlier session's batch for request ``key`` (each handed out once per process)."""
        found = self.journal.find(key, self.claimed)
        if found is not None:
            self.claimed.add(found.n)
        return found

    async def resume(self, found: Resumed, api_key: str | None, headers: Mapping[str, str] | None,
                     ) -> tuple[LLMResponse, bool]:
        if found.response is not None:
            return msgspec.json.decode(found.response, type=LLMResponse), True
        protocol = self.protocol(found.protocol, found.base, api_key, headers)
        outcomes = await asyncio.shield(self.watch(protocol, found.batch_id, found.submitted_at))
        outcome = outcomes.get(found.custom_id) or outcomes.get("*") or _missing(found.batch_id, found.model)
        if isinstance(outcome, LLMError):
            raise outcome
        return outcome

    async def aclose(self) -> None:
        for group_key in list(self.groups):
            group = self.groups.pop(group_key)
            if group.timer is not None:
                group.timer.cancel()
            for item in group.items:
                if not item.future.done():
                    item.future.cancel()
        for task in list(self.tasks):
            task.cancel()
        await self.http.aclose()


def _missing(batch_id: str, model: str) -> LLMError:
    return LLMError(f"batch {batch_id}: the provider returned no result for this request", reason="batch_missing",
                    model=model)
