"""One MCP client session, owned by one dedicated background task.

The SDK's ``Client`` is built on anyio task groups and cancel scopes, which must
be entered and exited by the same task. The engine, however, calls an
environment's ``reset`` / ``step`` / ``close`` from whichever task it likes (the
episode task, then a cleanup task after a timeout). So :class:`McpSession`
starts a runner task that opens the transport, connects, discovers the
server, serves requests handed to it through a queue (each answered on an
asyncio future), and closes everything itself. Callers never touch a context
manager.

Failure handling: a call that does not answer within its timeout, or a
server that closes the connection (crashed, exited), ends the session: the
runner closes the transport (the SDK stops the server process: stdin closed,
then SIGTERM / SIGKILL of its whole process group) and only *then* fails the
pending call with :class:`McpServerError`, whose message carries the tail of
the server's stderr. When an episode fails, its server is already gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import anyio
import attrs

from agentsynth_kernel import AgentsynthError

_STOP = object()

# The SDK logs transport failures (a crashed server) with tracebacks; those are reported as one
# clear episode error instead. A NullHandler keeps them off stderr unless the application
# configures logging itself (records still propagate to its handlers).
logging.getLogger("mcp").addHandler(logging.NullHandler())

TRANSPORTS = ("stdio", "streamable-http", "sse")


class McpServerError(AgentsynthError):
    """The MCP server could not be started or reached, crashed, hung, or broke the protocol.

    Raised by environment methods, so the engine fails that episode (``error_kind``
    ``environment``, also when a checker's call hit the broken server) with this message;
    tool-level errors are observations instead.
    """

    agentsynth_error_kind = "environment"


@attrs.define
class Endpoint:
    """Where and how to reach one MCP server (placeholders already substituted)."""

    transport: str  # stdio | streamable-http | sse
    command: str | None = None
    args: list[str] = attrs.field(factory=list)
    env: dict[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = attrs.field(factory=dict)
    inherit_env: bool = False
    protocol: str = "auto"  # Client mode: auto (discover, else initialize) or legacy
    max_file_bytes: int = 0  # RLIMIT_FSIZE of a launched process (0: none)
    writable: list[str] | None = None  # Landlock: the only places a launched process may write (None: anywhere)

    def argv(self) -> list[str]:
        """The launched command line, wrapped by the launcher (parent-death signal, limits, confinement)."""
        from .launcher import launch_argv

        assert self.command is not None
        return launch_argv([self.command, *self.args], max_file_bytes=self.max_file_bytes, writable=self.writable)

    @property
    def launches(self) -> bool:
        """Whether this session starts the server process itself."""
        return self.command is not None

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command or "", *self.args]).strip()
        if self.command:
            return f"{self.url} (started with: {' '.join([self.command, *self.args])})"
        return str(self.url)

    def process_env(self) -> dict[str, str]:
        from mcp.client.stdio import get_default_environment

        base = dict(os.environ) if self.inherit_env else get_default_environment()
        return {**base, **self.env}


@attrs.define
class ServerInfo:
    """What a server offers, discovered once right after connecting."""

    name: str = ""
    version: str = ""
    protocol_version: str = ""
    instructions: str = ""
    tools: list[Any] = attrs.field(factory=list)  # mcp_types.Tool
    resources: list[Any] = attrs.field(factory=list)  # mcp_types.Resource
    resource_templates: list[Any] = attrs.field(factory=list)  # mcp_types.ResourceTemplate
    prompts: list[Any] = attrs.field(factory=list)  # mcp_types.Prompt

    def summary(self) -> dict[str, Any]:
        """Plain data for observations and reports (no pydantic objects)."""
        return {
            "server": {"name": self.name, "version": self.version, "protocol_version": self.protocol_version},
            "tools": [t.name for t in self.tools],
            "resources": [
                {"uri": r.uri, "name": r.name, "description": r.description or "", "mime_type": r.mime_type}
                for r in self.resources
            ],
            "resource_templates": [
                {"uri_template": r.uri_template, "name": r.name, "description": r.description or ""}
                for r in self.resource_templates
            ],
            "prompts": [
                {
                    "name": p.name,
                    "description": p.description or "",
                    "arguments": [a.name for a in (p.arguments or [])],
                }
                for p in self.prompts
            ],
        }


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (for ``{port}`` in a launched HTTP server's args)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def read_tail(path: Path | None, max_lines: int = 12, max_chars: int = 1500) -> str:
    """The last lines of a log file (the server's stderr), for error messages."""
    if path is None or not path.is_file():
        return ""
    try:
        with open(path, "rb") as fp:
            fp.seek(0, os.SEEK_END)
            size = fp.tell()
            fp.seek(max(0, size - 16384))
            text = fp.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    tail = "\n".join(lines[-max_lines:])
    return tail[-max_chars:]


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def root_cause(exc: BaseException) -> BaseException:
    """The most informative exception inside (possibly nested) exception groups."""
    leaves = _leaves(exc)
    for leaf in leaves:
        if not isinstance(leaf, (asyncio.CancelledError, anyio.get_cancelled_exc_class())):
            return leaf
    return leaves[0]


def _describe_exc(exc: BaseException) -> str:
    exc = root_cause(exc)
    text = str(exc).strip().rstrip(".")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_connection_closed(exc: BaseException) -> bool:
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    exc = root_cause(exc)
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream,
                        ConnectionError, EOFError)):
        return True
    # httpx2 transport errors (RemoteProtocolError "Server disconnected", ReadError, ConnectError)
    return type(exc).__module__.startswith(("httpx", "httpcore")) and type(exc).__name__ in (
        "RemoteProtocolError", "ReadError", "ConnectError", "WriteError", "CloseError")


class McpSession:
    """A connected MCP client, usable from any task on one event loop.

    ``await start()`` launches/connects and returns the :class:`ServerInfo`;
    ``call_tool`` / ``read_resource`` / ``get_prompt`` forward one request each;
    ``close()`` shuts everything down (safe to call twice, from any task).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        connect_timeout: float = 20.0,
        call_timeout: float = 30.0,
        log_dir: Path | None = None,
        close_timeout: float = 10.0,
        log_name: str = "server-stderr.log",
    ) -> None:
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.close_timeout = close_timeout
        self._own_log_dir: tempfile.TemporaryDirectory[str] | None = None
        if log_dir is None:
            self._own_log_dir = tempfile.TemporaryDirectory(prefix=f"agentsynth-mcp-log-{os.getpid()}-")
            log_dir = Path(self._own_log_dir.name)
        self.log_path = Path(log_dir) / log_name
        self.info: ServerInfo | None = None
        self.pid: int | None = None  # the launched HTTP server's pid (stdio pids stay inside the SDK)
        self.connect_s = 0.0
        self._task: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._ready: asyncio.Future[ServerInfo] | None = None
        self._scope: anyio.CancelScope | None = None
        self._busy: str | None = None
        self._current: tuple[asyncio.Future[Any], str] | None = None
        self._failure: McpServerError | None = None
        self._closed = False
        self._process: Any = None

    # --- caller side ------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done() and self._failure is None

    @property
    def failure(self) -> McpServerError | None:
        return self._failure

    async def start(self) -> ServerInfo:
        """Launch (if needed) and connect; raise McpServerError with the server's stderr on failure."""
        if self._task is not None:
            raise RuntimeError("McpSession.start() called twice")
        _import_sdk()  # once per process, before the connect clock starts (it takes a second)
        loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._ready = loop.create_future()
        started = time.perf_counter()
        self._task = loop.create_task(self._main(), name=f"agentsynth-mcp {self.endpoint.describe()[:60]}")
        try:
            info = await asyncio.wait_for(asyncio.shield(self._ready), timeout=self.connect_timeout)
        except TimeoutError:
            await self._shutdown(graceful=False)
            raise self._error(
                f"MCP server {self.endpoint.describe()!r} did not connect within {self.connect_timeout:g}s"
                " (connect_timeout)"
            ) from None
        except McpServerError:
            await self._shutdown(graceful=False)
            raise
        except asyncio.CancelledError:
            await asyncio.shield(self._shutdown(graceful=False))
            raise
        self.connect_s = time.perf_counter() - started
        return info

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        """``tools/call``; returns the SDK's CallToolResult. JSON-RPC errors raise ``mcp.MCPError``."""
        return await self._request(f"tools/call {name!r}", lambda c: c.call_tool(name, arguments or {}), timeout)

    async def read_resource(self, uri: str, *, timeout: float | None = None) -> Any:
        """``resources/read``; returns the SDK's ReadResourceResult (uncached)."""
        return await self._request(
            f"resources/read {uri!r}", lambda c: c.read_resource(uri, cache_mode="bypass"), timeout
        )

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None, *, timeout: float | None = None) -> Any:
        return await self._request(f"prompts/get {name!r}", lambda c: c.get_prompt(name, arguments), timeout)

    async def close(self) -> None:
        """Stop the session and the server; never raises. Idempotent."""
        await self._shutdown(graceful=True)
        if self._own_log_dir is not None:
            self._own_log_dir.cleanup()
            self._own_log_dir = None

    async def _request(self, label: str, fn: Callable[[Any], Awaitable[Any]], timeout: float | None) -> Any:
        if self._failure is not None:
            raise self._failure
        if self._task is None or self._queue is None or self._closed or self._task.done():
            raise McpServerError(f"MCP session to {self.endpoint.describe()!r} is not open (cannot {label})")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        limit = self.call_timeout if timeout is None else timeout
        self._queue.put_nowait((future, label, fn, limit))
        return await future

    def _error(self, message: str) -> McpServerError:
        code = getattr(self._process, "returncode", None)
        if code is not None:
            message += f"; the server process exited with code {code}"
        tail = read_tail(self.log_path)
        if tail:
            message += "\n  server stderr (last lines):\n    " + tail.replace("\n", "\n    ")
        return McpServerError(message)

    async def _shutdown(self, *, graceful: bool) -> None:
        task = self._task
        if task is None or task.done():
            self._closed = True
            if task is not None and not task.cancelled():
                task.exception()  # retrieved, so asyncio does not log it
            return
        if graceful and self.info is not None and self._busy is None and self._queue is not None:
            self._queue.put_nowait(_STOP)
        else:
            self._cancel_runner()
        done, _ = await asyncio.wait({task}, timeout=self.close_timeout)
        if not done:
            self._cancel_runner()
            done, _ = await asyncio.wait({task}, timeout=self.close_timeout)
        if not done:  # last resort: native cancellation
            task.cancel()
            await asyncio.wait({task}, timeout=self.close_timeout)
        self._closed = True
        if task.done() and not task.cancelled():
            task.exception()

    def _cancel_runner(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
        elif self._task is not None:
            self._task.cancel()

    # --- runner side (everything below runs in the runner task) -------------------------------------

    async def _main(self) -> None:
        pending: list[tuple[asyncio.Future[Any], str]] = []
        failure: str | None = None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    info = await self._discover(client)
                    self.info = info
                    if self._ready is not None and not self._ready.done():
                        self._ready.set_result(info)
                    failure = await self._serve(client, pending)
        except BaseException as exc:  # noqa: BLE001 - everything becomes a clear episode error
            if failure is None:
                failure = self._connect_failure(exc)
            if isinstance(exc, asyncio.CancelledError):
                self._finish(failure, pending)
                raise
        self._finish(failure, pending)

    def _connect_failure(self, exc: BaseException) -> str:
        desc = self.endpoint.describe()
        where = "while connecting" if self.info is None else (
            f"during {self._current[1]}" if self._current is not None else "during the session")
        if isinstance(root_cause(exc), (asyncio.CancelledError, anyio.get_cancelled_exc_class())):
            return f"MCP session to {desc!r} was cancelled {where}"
        if _is_connection_closed(exc):
            if self.info is None:
                return (f"MCP server {desc!r} closed the connection before the handshake finished"
                        " (it crashed or exited at start-up)")
            return f"MCP server {desc!r} closed the connection {where} (it crashed or exited): {_describe_exc(exc)}"
        return f"MCP server {desc!r} failed {where}: {_describe_exc(exc)}"

    def _finish(self, failure: str | None, pending: list[tuple[asyncio.Future[Any], str]]) -> None:
        """After the server is stopped: fail whatever still waits, with the server's stderr."""
        self._closed = True
        self._scope = None
        if self._current is not None:  # a call interrupted by close()
            pending.append(self._current)
            self._current = None
        error = self._error(failure) if failure else None
        if error is not None and self._failure is None:
            self._failure = error
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error or McpServerError("MCP session closed before it connected"))
            self._ready.exception()  # mark retrieved: start() may already have given up on it
        while self._queue is not None and not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not _STOP:
                pending.append((item[0], item[1]))
        for future, label in pending:
            if not future.done():
                future.set_exception(
                    error or McpServerError(f"MCP session to {self.endpoint.describe()!r} closed before {label}")
                )
                future.exception()

    async def _serve(self, client: Any, pending: list[tuple[asyncio.Future[Any], str]]) -> str | None:
        """Answer requests until told to stop; returns a failure message if the server broke."""
        from mcp import MCPError

        assert self._queue is not None
        while True:
            item = await self._queue.get()
            if item is _STOP:
                return None
            future, label, fn, limit = item
            if future.done():  # the caller gave up (cancelled) before we got to it
                continue
            self._busy, self._current = label, (future, label)
            failure: str | None = None
            try:
                with anyio.fail_after(limit):
                    result = await fn(client)
            except TimeoutError:
                failure = (f"MCP server {self.endpoint.describe()!r} did not answer {label} within {limit:g}s"
                           " (call_timeout); the server was stopped")
            except MCPError as exc:
                if not _is_connection_closed(exc):  # a JSON-RPC error answer: the caller decides
                    self._busy, self._current = None, None
                    if not future.done():
                        future.set_exception(exc)
                    continue
                failure = (f"MCP server {self.endpoint.describe()!r} closed the connection during {label}"
                           " (it crashed or exited)")
            except Exception as exc:  # transport failures, invalid results: the session is unusable
                if _is_connection_closed(exc):
                    failure = (f"MCP server {self.endpoint.describe()!r} closed the connection during {label}"
                               " (it crashed or exited)")
                else:
                    failure = f"MCP server {self.endpoint.describe()!r} failed during {label}: {_describe_exc(exc)}"
            # (a BaseException, e.g. cancellation by the transport's task group, leaves _current set for _finish)
            if failure is not None:
                return failure  # _finish fails self._current once the server is stopped
            self._busy, self._current = None, None
            if not future.done():
                future.set_result(result)

    async def _connect(self, stack: AsyncExitStack) -> Any:
        from mcp import Client

        ep = self.endpoint
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log: IO[str] = stack.enter_context(open(self.log_path, "a", encoding="utf-8", errors="replace"))
        if ep.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            if not ep.command:
                raise McpServerError("stdio transport needs a 'command'")
            argv = ep.argv()
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=ep.process_env(), cwd=ep.cwd)
            transport: Any = stdio_client(params, errlog=log)
        else:
            if ep.command:
                await self._launch_http_server(stack, log)
            transport = self._http_transport(stack)
        return await stack.enter_async_context(Client(transport, cache=None, mode=ep.protocol))

    def _http_transport(self, stack: AsyncExitStack) -> Any:
        ep = self.endpoint
        assert ep.url is not None
        if ep.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(ep.url, headers=dict(ep.headers), timeout=self.connect_timeout,
                              sse_read_timeout=max(self.call_timeout * 2, 300.0))
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(
            headers=dict(ep.headers),
            timeout=httpx2.Timeout(self.connect_timeout, read=max(self.call_timeout * 2, 300.0)),
        )
        stack.push_async_callback(http.aclose)
        return streamable_http_client(ep.url, http_client=http)

    async def _launch_http_server(self, stack: AsyncExitStack, log: IO[str]) -> None:
        """Start a per-session HTTP server process and wait until it accepts connections."""
        ep = self.endpoint
        assert ep.command is not None and ep.url is not None
        try:
            process = await anyio.open_process(
                ep.argv(), env=ep.process_env(), cwd=ep.cwd,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
        except OSError as exc:
            raise McpServerError(f"cannot start MCP server {ep.command!r}: {exc}") from exc
        self.pid, self._process = process.pid, process
        stack.push_async_callback(_stop_process_group, process)
        parts = urlsplit(ep.url)
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        while True:
            if process.returncode is not None:
                raise McpServerError(
                    f"MCP server {ep.describe()!r} exited with code {process.returncode} before accepting connections"
                )
            try:
                conn = await anyio.connect_tcp(host, port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await conn.aclose()
            return

    async def _discover(self, client: Any) -> ServerInfo:
        from mcp import MCPError

        caps = client.server_capabilities
        server = client.server_info
        info = ServerInfo(
            name=getattr(server, "name", "") or "",
            version=getattr(server, "version", "") or "",
            protocol_version=client.protocol_version or "",
            instructions=client.instructions or "",
        )
        info.tools = await _all_pages(client.list_tools, "tools")
        if getattr(caps, "resources", None) is not None:
            with contextlib.suppress(MCPError):
                info.resources = await _all_pages(client.list_resources, "resources")
            with contextlib.suppress(MCPError):
                info.resource_templates = await _all_pages(client.list_resource_templates, "resource_templates")
        if getattr(caps, "prompts", None) is not None:
            with contextlib.suppress(MCPError):
                info.prompts = await _all_pages(client.list_prompts, "prompts")
        return info


def _import_sdk() -> None:
    import mcp  # noqa: F401
    import mcp.client.sse  # noqa: F401
    import mcp.client.stdio  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401


async def _all_pages(method: Callable[..., Awaitable[Any]], field: str, max_pages: int = 100) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = await method(cursor=cursor, cache_mode="bypass")
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


async def _stop_process_group(process: Any, grace: float = 2.0) -> None:
    """SIGTERM the launched server's process group, SIGKILL after ``grace`` seconds; shielded."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            if sys.platform == "win32":  # pragma: no cover
                process.terminate()
            else:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGTERM)
            with anyio.move_on_after(grace):
                await process.wait()
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if sys.platform == "win32":  # pragma: no cover
                        process.kill()
                    else:
                        os.killpg(process.pid, signal.SIGKILL)
                with anyio.move_on_after(grace):
                    await process.wait()
        elif sys.platform != "win32":  # the leader is gone; make sure its children are too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await process.aclose()
