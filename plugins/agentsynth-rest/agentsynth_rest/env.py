"""The ``rest`` environment: every operation of an OpenAPI 3.x document is a tool, called over httpx.

A world is either an **external** API (``base_url``, with an optional ``reset`` request sent
before every episode) or an **app the pack ships** (``app: app.py:create_app``), built fresh per
episode over a seeded world directory and served on 127.0.0.1 (see :mod:`.server`).

What holds against a hostile agent:

- a call goes to the world's base URL and nowhere else: the URL is built from the operation's
  path template with every path argument percent-encoded (``/``, ``\\``, ``.`` and ``..`` are
  refused, so no traversal to a route the document does not list), redirects are not followed,
  proxies from the environment are ignored (``trust_env=False``), and an ``http(s)`` base URL
  off the loopback needs ``allow_remote: true``;
- only the document's operations (after the ``methods`` / ``operations`` / ``exclude_operations``
  filters) are tools; unknown arguments are refused (``additionalProperties: false``), header
  arguments may not carry CR/LF/NUL, and headers that redirect or authenticate a request
  (``Host``, ``Authorization``, ``Cookie``, ``X-Forwarded-*`` ...) are never the agent's;
- credentials come only from environment variables named in the world's spec (``auth:``), are
  masked in every observation and remembered by the kernel's redaction, so they never reach disk;
- a header the world sets (a credential, a fixed header) is never an argument, so the agent's
  value cannot replace it; a cut answer loses the bytes that could hold a cut credential;
- every call has a hard deadline (``call_seconds``, the whole exchange: a slow-loris reply is cut)
  and a cap on what is read (``max_response_bytes``: a huge reply is not read past it; one layer
  of gzip or deflate is inflated only up to it, stacked or unasked-for encodings are refused);
- an error status is an error observation; a transport failure is one too; so is an argument the
  wire cannot carry (a lone surrogate, non-ASCII in a header, NaN, a URL past 32 K characters,
  nesting past Python's limit); nothing raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib
import ipaddress
import json
import math
import os
import re
import shutil
import ssl
import sys
import tempfile
import threading
import urllib.parse
import weakref
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from agentsynth_kernel import Bounds, InvalidValue, Observation, ToolCall, ToolSpec

from . import server
from .openapi import (
    FORBIDDEN_HEADERS,
    OpenAPIError,
    Operation,
    load_document,
    operations,
    parse_document,
    security_header,
)

if TYPE_CHECKING:  # imported when a world starts: httpx pulls in rich and pygments, ~90 ms
    import httpx

_UNSAFE_HEADER = re.compile(r"[\r\n\x00]")
_SERVERS = ("thread", "subprocess")
SAFE_METHODS = frozenset({"get", "head", "options"})  # HTTP's safe methods: calling one changes nothing
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _bounds(**limits: float) -> Any:
    """An attrs validator from a :class:`Bounds` (the kernel checks ``Annotated`` bounds on factory
    parameters, not on the fields of a ``spec_cls``)."""
    bounds = Bounds(**limits)

    def check(instance: Any, attribute: Any, value: Any) -> None:
        problem = bounds.problem(value)
        if problem:
            raise InvalidValue(f"{attribute.name}: expected {problem}")
    return check


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(instance: Any, attribute: Any, value: str) -> None:
        if value not in choices:
            raise InvalidValue(f"{attribute.name}: expected one of {', '.join(choices)}, got {value!r}")
    return check


@attrs.frozen
class AuthSpec:
    """One credential header filled from an environment variable: ``{env: NAME, header: X-Api-Key}``
    or ``{env: NAME, scheme: bearerAuth}`` (a security scheme of the document). ``prefix`` is put
    before the value (``"Bearer "``; a scheme sets it)."""

    env: str
    header: str | None = None
    scheme: str | None = None
    prefix: str | None = None


@attrs.frozen
class ResetSpec:
    """The request that resets an external world before each episode (``{seed}`` in ``path`` or in
    a string of ``body`` becomes the episode's seed; a value that is just ``"{seed}"`` becomes the number). A status outside ``expect_status`` (default:
    any 2xx) fails the episode as an environment error."""

    path: str
    method: str = "POST"
    body: Any = None
    expect_status: list[int] = attrs.field(factory=list)


@attrs.frozen
class RestEnvSpec:
    """Parameters of ``environment: {type: rest, ...}`` (see the README for each)."""

    openapi: str | None = None
    base_url: str | None = None
    app: str | None = None
    app_args: dict[str, Any] = attrs.field(factory=dict)
    files: str | None = None
    server: str = attrs.field(default="thread", validator=_one_of(_SERVERS))
    reset: ResetSpec | None = None
    methods: list[str] = attrs.field(factory=list)
    operations: list[str] = attrs.field(factory=list)
    exclude_operations: list[str] = attrs.field(factory=list)
    auth: list[AuthSpec] = attrs.field(factory=list)
    headers: dict[str, str] = attrs.field(factory=dict)
    state_dir: str | None = None
    intro: str = ""
    allow_remote: bool = False
    shared: bool = False
    call_seconds: float = attrs.field(default=10.0, validator=_bounds(above=0, high=600))
    start_seconds: float = attrs.field(default=20.0, validator=_bounds(above=0, high=600))
    max_response_bytes: int = attrs.field(default=65_536, validator=_bounds(low=256, high=64 * 2**20))
    max_request_bytes: int = attrs.field(default=1_048_576, validator=_bounds(low=256, high=64 * 2**20))
    max_check_bytes: int = attrs.field(default=8 * 2**20, validator=_bounds(low=256, high=256 * 2**20))


def is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_doc_cache: dict[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], tuple[dict[str, Any],
                                                                                             list[Operation]]] = {}


_in_use: dict[str, weakref.ref[Any]] = {}  # external base URLs held by a running episode (see RestEnvironment._claim)
_in_use_lock = threading.Lock()
MAX_DOCUMENTS = 32  # parsed documents kept per process (an API may serve a new one every episode)


def _cache(key: Any, value: tuple[dict[str, Any], list[Operation]]) -> tuple[dict[str, Any], list[Operation]]:
    while len(_doc_cache) >= MAX_DOCUMENTS:
        _doc_cache.pop(next(iter(_doc_cache)))  # the oldest
    _doc_cache[key] = value
    return value


class RestEnvironment:
    """One episode's HTTP world (see the module docstring)."""

    def __init__(self, spec: RestEnvSpec | None = None, base_dir: Path | None = None, **params: Any) -> None:
        if spec is None:  # built directly (not from a spec file): the same structuring and errors
            from agentsynth_kernel import structure

            spec = structure(params, RestEnvSpec, source="environment")
        self.spec = spec
        self.base_dir = Path(base_dir) if base_dir is not None else Path.cwd()
        s = self.spec
        if (s.app is None) == (s.base_url is None):
            raise InvalidValue("give exactly one of 'app' (an ASGI app the pack ships) and 'base_url' (an API)")
        if s.app is None and s.openapi is None:
            raise InvalidValue("openapi: the document of the API at base_url is needed (a file or a loopback URL)")
        if s.base_url is not None:
            if not s.base_url.startswith(("http://", "https://")):
                raise InvalidValue(f"base_url: expected an http(s):// URL, got {s.base_url!r}")
            if not s.allow_remote and not is_loopback(s.base_url):
                raise InvalidValue(f"base_url: {s.base_url} is not on the loopback (set allow_remote: true to "
                                   "call a remote API)")
        if s.openapi is not None and s.openapi.startswith(("http://", "https://")) and not is_loopback(s.openapi):
            raise InvalidValue(f"openapi: a document URL must be on the loopback, got {s.openapi}")
        if s.app_args and s.app is None:
            raise InvalidValue("app_args: arguments of an app factory; this world has no 'app'")
        if s.reset is not None and s.app is not None:
            raise InvalidValue("reset: an app world is built fresh per episode; 'reset' is for base_url worlds")
        from agentsynth_kernel import is_secret_key

        for name in s.headers:
            if name.lower() in FORBIDDEN_HEADERS or is_secret_key(name) or _UNSAFE_HEADER.search(name + s.headers[name]):
                raise InvalidValue(f"headers.{name}: not a header a world may set (credentials go in 'auth:', "
                                   "read from an environment variable)")
        self.factory: Any = None
        if s.app is not None:
            from agentsynth_kernel import import_object

            try:
                self.factory = import_object(s.app, base_dir=self.base_dir)
            except Exception as exc:
                raise InvalidValue(f"app: {exc}") from None
        self.files = (self.base_dir / s.files) if s.files else None
        if self.files is not None and not self.files.is_dir():
            raise InvalidValue(f"files: {self.files} is not a directory")
        self.world: Path | None = None
        self.base_url = ""
        self.doc: dict[str, Any] = {}
        self.ops: dict[str, Operation] = {}
        self.secrets: list[str] = []
        self._masks: list[str] = []  # every form of a secret an answer may carry (raw, JSON-escaped, URL-encoded)
        self.auth_headers: dict[str, str] = {}
        self.client: httpx.AsyncClient | None = None
        self._slot: server.Slot | None = None
        self._proc: server.Subprocess | None = None
        self._root: Path | None = None
        self._claimed: str | None = None
        self.seed = 0

    # --- Environment protocol (async: every call runs under one deadline on the engine's loop) ------

    async def reset(self, seed: int) -> Observation:
        await self.close()
        self.seed = seed
        s = self.spec
        self.auth_headers, self.secrets = self._credentials()
        if s.app is not None:
            await self._start_app(seed)
        else:
            assert s.base_url is not None
            self.base_url = s.base_url.rstrip("/")
            if not s.shared:
                self._claim(self.base_url)
        await _load_http_backend()
        self.client = self._client()
        self.doc, ops = await self._document()
        for auth in s.auth:  # now that the document is known, a scheme names its header
            if auth.scheme is not None:
                header, prefix = security_header(self.doc, auth.scheme, s.openapi or "the app's document")
                value = os.environ[auth.env]
                self.auth_headers[header] = (auth.prefix if auth.prefix is not None else prefix) + value
        self.client.headers.update(self.auth_headers)
        self._masks = _mask_forms(self.secrets)
        # a header the world sets (a credential, a tenant) is never an argument: the agent's value
        # would replace the world's on the request
        reserved = {name.lower() for name in (*s.headers, *self.auth_headers)}
        self.ops = {op.tool: _without_headers(op, reserved) for op in ops}
        if s.reset is not None:  # with every credential: a reset endpoint is an operator's
            await self._reset_hook(s.reset, seed)
        info = self.doc.get("info") or {}
        title = str(info.get("title") or "an HTTP API")
        lines = [f"{title}: {len(self.ops)} operation(s) as tools."]
        if info.get("description"):
            lines.append(str(info["description"]).strip())
        lines += [f"- {op.tool}: {op.summary}" for op in self.ops.values()]
        text = "\n".join(lines)
        if s.intro:
            text = f"{s.intro}\n\n{text}"
        return Observation(text, data={"tools": sorted(self.ops)})

    def tools(self) -> list[ToolSpec]:
        # GET / HEAD / OPTIONS only read (HTTP's safe methods): judges may believe it
        return [ToolSpec(op.tool, op.summary, op.parameters, read_only=op.method.lower() in SAFE_METHODS)
                for op in self.ops.values()]

    async def step(self, call: ToolCall) -> Observation:
        if self.client is None:
            return Observation("error: the world is not running (reset first)", error=True)
        op = self.ops.get(call.name)
        if op is None:
            return Observation(f"error: unknown tool {call.name!r}; the tools are the API's operations: "
                               f"{', '.join(sorted(self.ops))}", error=True)
        try:
            request = build_request(op, call.arguments, self.spec.max_request_bytes)
        except ValueError as exc:
            return Observation(f"error: {op.tool}: {exc}", error=True)
        except TypeError as exc:  # a value JSON has no form for (a policy's own Python object)
            return Observation(f"error: {op.tool}: the arguments are not JSON: {exc}", error=True)
        except RecursionError:
            return Observation(f"error: {op.tool}: the arguments are nested too deeply", error=True)
        return await self.send(self.client, *request)

    def _claim(self, url: str) -> None:
        """An external API is one shared state: two episodes of this process in it at once would
        see, pass on and undo each other's work (eight concurrent samples of a task: one does it,
        seven pass by doing nothing). The second is refused, loudly, unless ``shared: true``."""
        with _in_use_lock:
            ref = _in_use.get(url)
            holder = ref() if ref is not None else None  # a world dropped without close holds nothing
            if holder is not None and holder is not self:
                raise server.WorldStartError(
                    f"base_url: {url} is in use by another episode of this run: an external API is one shared "
                    "state, so overlapping episodes would see and undo each other's work. Run with concurrency: 1, "
                    "serve a world per episode with 'app:', or set 'shared: true' if episodes cannot interfere")
            _in_use[url] = weakref.ref(self)
            self._claimed = url

    async def close(self) -> None:
        if self._claimed is not None:
            with _in_use_lock:
                ref = _in_use.get(self._claimed)
                if ref is not None and ref() is self:
                    del _in_use[self._claimed]
            self._claimed = None
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.aclose()
            self.client = None
        if self._slot is not None:
            slot, self._slot = self._slot, None
            await asyncio.to_thread(server.release, slot)  # waits for the server's loop to turn over
        if self._proc is not None:
            await asyncio.to_thread(self._proc.kill)
            self._proc = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
        self.world = None

    # --- starting the world ---------------------------------------------------------------------

    def _credentials(self) -> tuple[dict[str, str], list[str]]:
        headers: dict[str, str] = {}
        values: list[str] = []
        for i, auth in enumerate(self.spec.auth):
            value = os.environ.get(auth.env)
            if not value:
                raise server.WorldStartError(f"auth[{i}].env: the environment variable {auth.env} is not set "
                                             "(credentials are read from the environment only)")
            if _UNSAFE_HEADER.search(value):
                raise server.WorldStartError(f"auth[{i}].env: {auth.env} holds a line break; not a header value")
            values.append(value)
            if auth.header is not None:
                headers[auth.header] = (auth.prefix or "") + value
            elif auth.scheme is None:
                raise server.WorldStartError(f"auth[{i}]: give 'header' or 'scheme' (a securityScheme of the document)")
        from agentsynth_kernel import remember

        remember(*values)
        return headers, values

    async def _start_app(self, seed: int) -> None:
        s = self.spec
        self._root = Path(tempfile.mkdtemp(prefix="agentsynth-rest-"))
        self.world = self._root / "world"
        if self.files is not None:
            shutil.copytree(self.files, self.world, symlinks=False)
        else:
            self.world.mkdir()
        if s.server == "thread":
            app = await asyncio.to_thread(server.build_app, self.factory, self.world, seed, s.app_args)
            self._slot = await asyncio.to_thread(server.acquire, app)
            port = self._slot.port
        else:
            assert s.app is not None
            from agentsynth_kernel import absolute_code_ref

            ref = absolute_code_ref(s.app, self.base_dir)
            self._proc = await asyncio.to_thread(server.Subprocess, ref, self.base_dir, self.world, seed,
                                                 s.start_seconds, s.app_args)
            port = self._proc.port
        self.base_url = f"http://127.0.0.1:{port}"

    def _client(self) -> httpx.AsyncClient:
        import httpx

        timeout = httpx.Timeout(self.spec.call_seconds, connect=min(5.0, self.spec.call_seconds))
        headers = {"user-agent": "agentsynth-rest", "accept-encoding": ACCEPT_ENCODING, **self.spec.headers,
                   **self.auth_headers}
        return httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout, trust_env=False,
                                 follow_redirects=False, limits=httpx.Limits(max_connections=8), verify=_ssl_context())

    async def _reset_hook(self, hook: ResetSpec, seed: int) -> None:
        import httpx

        assert self.client is not None
        path = hook.path.replace("{seed}", str(seed))
        body = _with_seed(hook.body, seed)
        content = json.dumps(body).encode() if body is not None else None
        try:
            status, text, _ = await self._read_whole(hook.method.upper(), path, content, 65_536)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise server.WorldStartError(f"reset: {hook.method.upper()} {path} failed: "
                                         f"{type(exc).__name__}: {self._mask(str(exc))}") from None
        ok = status in hook.expect_status if hook.expect_status else 200 <= status < 300
        if not ok:
            raise server.WorldStartError(f"reset: {hook.method.upper()} {path} answered {status}: "
                                         f"{self._mask(text.decode(errors='replace')[:300])}")

    async def _read_whole(self, method: str, url: str, content: bytes | None, limit: int) -> tuple[int, bytes, bool]:
        """(status, body up to ``limit``, cut) of a request the world's starting makes (its reset,
        its document), under ``start_seconds``: read as a tool call's answer is, never whole (a
        gzip bomb served as the document was inflated whole)."""
        assert self.client is not None
        async with asyncio.timeout(self.spec.start_seconds):
            request = self.client.build_request(method, url, content=content)
            if content is not None:
                request.headers["content-type"] = "application/json"
            response = await self.client.send(request, stream=True)
            try:
                body, cut = await _read_capped(response, limit)
            finally:
                await response.aclose()
        return response.status_code, body, cut

    async def _document(self) -> tuple[dict[str, Any], list[Operation]]:
        s = self.spec
        source = s.openapi or "/openapi.json"
        filters = (tuple(s.methods), tuple(s.operations), tuple(s.exclude_operations))
        if source.startswith(("http://", "https://")) or s.openapi is None:
            raw = await self._fetch_document(source)
            where = source if s.openapi else "the app's /openapi.json"
            key = (where, hashlib.sha256(raw).hexdigest(), *filters)
            cached = _doc_cache.get(key)
            if cached is None:
                doc = parse_document(raw, where)
                cached = _cache(key, (doc, operations(doc, where, methods=filters[0], include=filters[1],
                                                      exclude=filters[2])))
            return cached
        path = Path(source) if Path(source).is_absolute() else self.base_dir / source
        try:
            stamp = str(path.stat().st_mtime_ns)
        except OSError as exc:
            raise OpenAPIError(f"openapi: {path}: {exc.strerror or exc}") from None
        key = (f"{path}@{stamp}", "", *filters)
        cached = _doc_cache.get(key)
        if cached is None:
            doc, where = load_document(source, base_dir=self.base_dir)
            cached = _cache(key, (doc, operations(doc, where, methods=filters[0], include=filters[1],
                                                  exclude=filters[2])))
        return cached

    async def _fetch_document(self, url: str) -> bytes:
        import httpx

        limit = self.spec.max_check_bytes
        try:
            status, raw, cut = await self._read_whole("GET", url, None, limit)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise OpenAPIError(f"openapi: fetching {url} failed: {type(exc).__name__}: {exc}") from None
        if status != 200:
            raise OpenAPIError(f"openapi: {url} answered {status}")
        if cut:
            raise OpenAPIError(f"openapi: {url} is longer than {limit:,} bytes (max_check_bytes)")
        return raw

    # --- calls ----------------------------------------------------------------------------------

    def _mask(self, text: str) -> str:
        for value in self._masks or self.secrets:
            if value and value in text:
                text = text.replace(value, "<redacted>")
        return text

    async def send(self, client: httpx.AsyncClient, method: str, path: str, params: list[tuple[str, Any]],
                   headers: dict[str, str], content: bytes | None, *, limit: int | None = None) -> Observation:
        """One request under the world's deadline and read cap (``limit``, default
        ``max_response_bytes``), as an observation."""
        import httpx

        limit = limit or self.spec.max_response_bytes
        label = f"{method} {path}"
        try:
            async with asyncio.timeout(self.spec.call_seconds):
                request = client.build_request(method, path, params=params, headers=headers, content=content)
                if (request.url.scheme, request.url.host, request.url.port) != (
                        client.base_url.scheme, client.base_url.host, client.base_url.port):
                    # paths come from the document and start with '/', so this never happens; if a
                    # change let one through, the world's credentials would go with it elsewhere
                    return Observation(f"error: {label}: {request.url.host}:{request.url.port} is not this world's "
                                       "server; the request was not sent", error=True, data={"status": None})
                if content is not None:
                    request.headers["content-type"] = "application/json"
                response = await client.send(request, stream=True)
                try:
                    body, cut = await _read_capped(response, limit)
                finally:
                    await response.aclose()
        except TimeoutError:
            return Observation(f"error: {label}: no complete answer within {self.spec.call_seconds:g} s "
                               "(call_seconds); the request was abandoned", error=True, data={"status": None})
        except httpx.HTTPError as exc:
            return Observation(f"error: {label}: the request failed: {type(exc).__name__}: "
                               f"{self._mask(str(exc))[:300]}", error=True, data={"status": None})
        except Exception as exc:  # noqa: BLE001 - httpx.InvalidURL, an encoding error: this call fails, not the episode
            return Observation(f"error: {label}: the request could not be sent: {type(exc).__name__}: "
                               f"{self._mask(str(exc))[:300]}", error=True, data={"status": None})
        if cut and self._masks:
            body = _without_cut_secret(body, [m.encode() for m in self._masks])
        return render(response, body, cut, limit, self._mask)

    def state_path(self, relative: str) -> Path:
        """A file of the world's backend state: in the app's world directory (or ``state_dir``),
        never outside it."""
        if self.world is not None:
            root = self.world
        elif self.spec.state_dir is not None:
            root = Path(self.spec.state_dir) if Path(self.spec.state_dir).is_absolute() else \
                self.base_dir / self.spec.state_dir
        else:
            raise RuntimeError("this rest world has no backend state to read (no app, no state_dir)")
        path = (root / relative).resolve()
        if not path.is_relative_to(root.resolve()):
            raise RuntimeError(f"{relative!r} is outside the world's state directory")
        return path

    def checker_client(self) -> httpx.AsyncClient:
        """A client of the checker's own (never the agent's), with the world's credentials."""
        if not self.base_url:
            raise RuntimeError("the rest world is not running")
        return self._client()


async def _load_http_backend() -> None:
    """httpcore loads anyio's asyncio backend on a process's first request (~0.3 s of CPU, seconds
    on a busy machine): loaded here, at reset and off the loop, it is not charged to the agent's
    first call, whose deadline (``call_seconds``) it could exceed."""
    if "anyio._backends._asyncio" not in sys.modules:
        with contextlib.suppress(ImportError):
            await asyncio.to_thread(importlib.import_module, "anyio._backends._asyncio")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying TLS context per process: httpx builds (and loads the CA bundle into) a new one
    for every client otherwise, which was most of the cost of a checker's own client."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _with_seed(value: Any, seed: int) -> Any:
    if value == "{seed}":
        return seed  # the whole value: the number itself
    if isinstance(value, str):
        return value.replace("{seed}", str(seed))
    if isinstance(value, list):
        return [_with_seed(v, seed) for v in value]
    if isinstance(value, dict):
        return {k: _with_seed(v, seed) for k, v in value.items()}
    return value


# what the client asks for: the encodings _read_capped inflates only up to the cap (httpx would
# also ask for br and zstd when their packages are installed, and inflate those unbounded)
ACCEPT_ENCODING = "gzip, deflate"
_COMPRESSIONS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress"})


class _Inflater:
    """gzip or deflate inflated at most ``room`` bytes at a time (zlib's ``max_length``): what is
    past the cap is never decompressed. httpx inflates every wire chunk whole, so a 50 KB gzip
    bomb cost 50 MB of memory and ~0.2 s of CPU, which under load ran past ``call_seconds``."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.zlib = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS)
        self.started = False

    def feed(self, data: bytes, room: int) -> bytes:
        try:
            out = self.zlib.decompress(data, room)
        except zlib.error:
            if self.encoding != "deflate" or self.started:
                raise
            self.zlib = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, without the zlib header
            out = self.zlib.decompress(data, room)
        self.started = True
        return out

    def flush(self) -> bytes:
        """The end of the stream (every input byte was consumed below the cap: little is left)."""
        return self.zlib.flush()


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the (decoded) body; True when there was more (not read). A gzip
    or deflate body is inflated only up to the cap; other encodings are decoded by httpx."""
    import httpx

    encodings = [e.strip().lower() for e in response.headers.get("content-encoding", "").split(",")]
    encodings = [e for e in encodings if e and e != "identity"]
    if not any(e in _COMPRESSIONS for e in encodings):
        # nothing to inflate (httpx passes an encoding it does not know through as is): the raw
        # bytes, never httpx's decoders
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > limit:
                return bytes(body[:limit]), True
        return bytes(body), False
    if len(encodings) != 1 or encodings[0] not in ("gzip", "x-gzip", "deflate"):
        # httpx would inflate stacked layers (483 bytes of 'gzip, gzip' were 450 MB at peak) and
        # br / zstd (with their packages installed) whole, past any cap
        raise httpx.DecodingError(f"the answer is encoded as {', '.join(encodings)!r}; this client asked for "
                                  f"{ACCEPT_ENCODING} and inflates one layer of gzip or deflate only")
    inflater = _Inflater(encodings[0])
    body = bytearray()
    try:
        async for raw in response.aiter_raw():
            body += inflater.feed(raw, limit + 1 - len(body))
            if len(body) > limit:
                return bytes(body[:limit]), True
        body += inflater.flush()
    except zlib.error as exc:
        raise httpx.DecodingError(f"the {encodings[0]} body does not decode: {exc}") from None
    if len(body) > limit:
        return bytes(body[:limit]), True
    return bytes(body), False


_SHOWN_HEADERS = ("content-type", "location", "retry-after")


def render(response: httpx.Response, body: bytes, cut: bool, limit: int, mask: Any) -> Observation:
    status = response.status_code
    lines = [f"HTTP {status} {response.reason_phrase}".rstrip()]
    for name in _SHOWN_HEADERS:
        if name in response.headers:
            lines.append(f"{name}: {response.headers[name]}")
    text = mask(body.decode("utf-8", errors="replace"))  # the JSON too is read from the masked text
    parsed: Any = None
    if not cut and "json" in response.headers.get("content-type", ""):
        with contextlib.suppress(ValueError, RecursionError):  # nested past Python's limit: not JSON to us
            parsed = json.loads(text)
    if text:
        lines += ["", text]
    if cut:
        lines.append(f"[... the response is longer than {limit:,} bytes (max_response_bytes); the rest was not read]")
    data: dict[str, Any] = {"status": status}
    if parsed is not None:
        data["json"] = parsed
    return Observation(mask("\n".join(lines)), error=status >= 400, data=data)  # headers masked too


def _mask_forms(secrets: list[str]) -> list[str]:
    """Each secret as an answer may spell it: raw, JSON-escaped (ASCII or not) and URL-encoded;
    longest first, so a longer form is masked before a shorter one inside it."""
    forms = {f for value in secrets if value for f in (
        value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
        urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value))}
    return sorted(forms, key=len, reverse=True)


def _without_cut_secret(body: bytes, forms: list[bytes]) -> bytes:
    """A cut answer without the bytes that could hold the beginning of a secret cut by the cap.

    The cap may fall inside a credential the answer echoes: its first characters were shown (and
    stored), and padding moved the cut to show every prefix, so the key leaked a character at a
    time. A cut secret starts in the last ``longest - 1`` bytes, which are dropped whatever they
    hold (dropping them only on a match would tell the agent its guess of a prefix was right);
    a whole secret across that line is kept, to be masked whole."""
    end = max(0, len(body) - max(map(len, forms)) + 1)
    moved = True
    while moved:  # until no whole secret of any form crosses the line
        moved = False
        for form in forms:
            start = body.find(form, max(0, end - len(form) + 1))
            while 0 <= start < end:
                end, moved = start + len(form), True
                start = body.find(form, start + 1)
    return body[:end]


def _without_headers(op: Operation, reserved: set[str]) -> Operation:
    """``op`` without its header arguments named in ``reserved`` (case-insensitively)."""
    dropped = [a for a in op.arguments if a.location == "header" and a.name.lower() in reserved]
    if not dropped:
        return op
    keys = {a.key for a in dropped}
    params = dict(op.parameters)
    params["properties"] = {k: v for k, v in params.get("properties", {}).items() if k not in keys}
    if "required" in params:
        params["required"] = [k for k in params["required"] if k not in keys]
        if not params["required"]:
            del params["required"]
    return attrs.evolve(op, arguments=tuple(a for a in op.arguments if a.key not in keys), parameters=params)


# --- building a request from a tool call ----------------------------------------------------------

MAX_URL_CHARS = 32_768  # path and query of one call, encoded (httpx refuses past 65,536; servers far earlier)
_ASCII_INTEGER = re.compile(r"-?[0-9]+")
_HEADER_TEXT = re.compile(r"[\t\x20-\x7e]*")  # printable ASCII (httpx encodes header values as ASCII)


def _scalar(value: Any, schema: dict[str, Any], where: str) -> str:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if isinstance(value, bool):
        if "boolean" not in kinds and kind is not None and "string" not in kinds:
            raise ValueError(f"{where}: expected {kind}, got a boolean")
        return "true" if value else "false"
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: expected a finite number, got {value!r}")
        if "integer" in kinds and isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{where}: expected an integer, got {value!r}")
        return str(int(value)) if "integer" in kinds else str(value)
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where}: not valid Unicode text (a lone surrogate)") from None
        if "integer" in kinds and not _ASCII_INTEGER.fullmatch(value.strip()):  # ASCII: \d takes any script's digits
            raise ValueError(f"{where}: expected an integer, got {value[:80]!r}")
        if "number" in kinds:
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"{where}: expected a number, got {value[:80]!r}") from None
            if not math.isfinite(number) or not value.isascii():
                raise ValueError(f"{where}: expected a finite number, got {value[:80]!r}")
        return value
    raise ValueError(f"{where}: expected a string, number or boolean, got {type(value).__name__}")


def build_request(op: Operation, arguments: Any, max_bytes: int
                  ) -> tuple[str, str, list[tuple[str, Any]], dict[str, str], bytes | None]:
    """(method, path, query params, headers, JSON body) for a call; ValueError says what is wrong."""
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be an object")
    known = {a.key: a for a in op.arguments}
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        raise ValueError(f"unknown argument(s) {', '.join(map(repr, unknown))}; expected "
                         f"{', '.join(known) or 'none'}")
    missing = [a.key for a in op.arguments if a.required and arguments.get(a.key) is None]
    if missing:
        raise ValueError(f"missing required argument(s) {', '.join(missing)}")
    path = op.path
    params: list[tuple[str, Any]] = []
    headers: dict[str, str] = {}
    body: dict[str, Any] = {}
    whole: Any = None
    for key, value in arguments.items():
        arg = known[key]
        if value is None and not arg.required:
            continue
        if arg.location == "path":
            text = _scalar(value, arg.schema, key)
            if text in ("", ".", "..") or "/" in text or "\\" in text or _CONTROL.search(text):
                raise ValueError(f"{key}: {text[:80]!r} is not a path segment (no '/', '\\', '.', '..' or "
                                 "control characters)")
            path = path.replace("{" + arg.name + "}", urllib.parse.quote(text, safe=""))
        elif arg.location == "query":
            values = value if isinstance(value, list) else [value]
            params += [(arg.name, _scalar(v, arg.schema.get("items", {}) if isinstance(value, list) else arg.schema,
                                          key)) for v in values]
        elif arg.location == "header":
            text = _scalar(value, arg.schema, key)
            if _UNSAFE_HEADER.search(text) or len(text) > 8192:
                raise ValueError(f"{key}: a header value may not hold CR, LF or NUL, nor exceed 8192 characters")
            if not _HEADER_TEXT.fullmatch(text):
                raise ValueError(f"{key}: a header value must be printable ASCII, got {text[:80]!r}")
            headers[arg.name] = text
        elif arg.location == "body":
            body[arg.name] = value
        else:
            whole = value
    content = None
    if op.has_body and (body or whole is not None):
        try:  # standard JSON only: NaN and Infinity are not JSON, and a server may read them as anything
            text = json.dumps(whole if whole is not None else body, ensure_ascii=False, allow_nan=False)
        except ValueError as exc:
            raise ValueError(f"the JSON body: {exc}") from None
        try:
            content = text.encode()
        except UnicodeEncodeError:
            raise ValueError("the JSON body: not valid Unicode text (a lone surrogate)") from None
        if len(content) > max_bytes:
            raise ValueError(f"the JSON body is {len(content):,} bytes; at most {max_bytes:,} (max_request_bytes)")
    for key, value in params:
        if len(value) > max_bytes:
            raise ValueError(f"{key}: {len(value):,} characters; at most {max_bytes:,}")
    url = len(path) + len(urllib.parse.urlencode(params))
    if url > MAX_URL_CHARS:
        raise ValueError(f"the URL (path and query) is {url:,} characters encoded; at most {MAX_URL_CHARS:,}")
    return op.method.upper(), path, params, headers, content
