"""Serving a pack's web application on 127.0.0.1, one server per episode.

A pack's app is a WSGI callable (see :mod:`agentsynth_browser.webapp` for a small
helper); it is served by a threading stdlib server on a free port, on daemon
threads, so a browser's parallel requests are answered and nothing outlives the
episode.

The server also bounds what the agent can make the app do, whatever the app is: a request
body over ``max_body_bytes`` is answered 413 without reaching the app, and once the app's
database (with its journal) is over ``max_db_bytes`` every request that could write (anything
but GET/HEAD) is answered 507, so a form posted in a loop cannot grow the world without end.
A redirect to another origin is answered 502 instead (an app's open redirect cannot take the
browser off the site; Chromium follows redirects without asking the request filter again).
It records the GET targets it answered below 400 (``served``): the ``url`` checker accepts only
a final URL the server really served, not one a page made up on the client side.
"""

from __future__ import annotations

import mimetypes
import os
import socketserver
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


MAX_SERVED = 5000  # distinct GET targets remembered per episode (URLs are capped at 4 KB by the tools)


def db_bytes(db_path: str | os.PathLike[str] | None) -> int:
    """The database's size on disk with its journal / WAL (what the agent could grow)."""
    if db_path is None:
        return 0
    total = 0
    for suffix in ("", "-journal", "-wal"):
        try:
            total += os.stat(f"{os.fspath(db_path)}{suffix}").st_size
        except OSError:
            pass
    return total


def _refuse(start_response: Callable[..., Any], status: str, text: str) -> Iterable[bytes]:
    body = f"<!doctype html><title>{status}</title><h1>{status}</h1><p>{text}</p>".encode()
    start_response(status, [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))])
    return [body]


def _drain(stream: Any, size: int) -> None:
    while size > 0:
        chunk = stream.read(min(size, 65536))
        if not chunk:
            return
        size -= len(chunk)


class AppServer:
    """``start()`` serves ``app`` on 127.0.0.1:<free port> and returns the base URL; ``stop()`` ends it."""

    def __init__(self, app: WSGIApp, host: str = "127.0.0.1", *, db_path: str | os.PathLike[str] | None = None,
                 max_body_bytes: int = 256 * 1024, max_db_bytes: int = 64 * 1024 * 1024) -> None:
        self.app = app
        self.host = host
        self.db_path = db_path
        self.max_body_bytes = max_body_bytes
        self.max_db_bytes = max_db_bytes
        self.served: set[str] = set()
        self.refused: list[str] = []  # why requests were refused (the environment reports them)
        self.full = False
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None
        self.base_url = ""

    def _guarded(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET").upper()
        try:
            size = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0
        if size > self.max_body_bytes:
            self.refused.append(f"a {size}-byte request body (limit {self.max_body_bytes})")
            _drain(environ["wsgi.input"], min(size, 8 * 2**20))  # so the browser reads the answer, not a reset
            return _refuse(start_response, "413 Payload Too Large",
                           f"Request bodies are limited to {self.max_body_bytes} bytes.")
        if method not in ("GET", "HEAD") and self.db_path is not None:
            if not self.full and db_bytes(self.db_path) > self.max_db_bytes:
                self.full = True
            if self.full:
                self.refused.append(f"the app's database is full (limit {self.max_db_bytes} bytes)")
                return _refuse(start_response, "507 Insufficient Storage",
                               f"The site's database reached its limit of {self.max_db_bytes} bytes.")
        status_seen: list[int] = []
        off_site: list[str] = []

        def recording(status: str, headers: Any, exc_info: Any = None) -> Any:
            location = next((v for k, v in headers if k.lower() == "location"), None)
            if location is not None and self._leaves(location):
                off_site.append(location)  # an open redirect would take the browser elsewhere
                return lambda data: None
            status_seen.append(int(status.split(" ", 1)[0]))
            return start_response(status, headers, exc_info) if exc_info else start_response(status, headers)

        result = self.app(environ, recording)
        if off_site:
            getattr(result, "close", lambda: None)()
            self.refused.append(f"a redirect off the site (to {off_site[0][:80]!r})")
            return _refuse(start_response, "502 Bad Gateway", "A redirect to another site was refused.")
        if method == "GET" and status_seen and status_seen[0] < 400 and len(self.served) < MAX_SERVED:
            query = environ.get("QUERY_STRING", "")
            self.served.add(environ.get("PATH_INFO", "/") + (f"?{query}" if query else ""))
        return result

    def _leaves(self, location: str) -> bool:
        """A redirect target on another origin (relative targets stay on the site)."""
        parts = urlsplit(location.strip())
        if not parts.scheme and not parts.netloc:
            return False
        here = urlsplit(self.base_url)
        return (parts.scheme or here.scheme).lower() != here.scheme or parts.netloc.lower() != here.netloc.lower()

    def start(self) -> str:
        server = _Server((self.host, 0), _QuietHandler)
        server.set_app(self._guarded)
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                                       name="agentsynth-browser-app", daemon=True)
        self.thread.start()
        self.base_url = f"http://{self.host}:{server.server_address[1]}"
        return self.base_url

    def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self.thread is not None:
            self.thread.join(timeout=5)


def static_app(root: Path) -> WSGIApp:
    """Serve the files under ``root`` (``/`` -> ``index.html``)."""
    root = root.resolve()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        rel = environ.get("PATH_INFO", "/").lstrip("/") or "index.html"
        path = (root / rel).resolve()
        if path.is_dir():
            path = path / "index.html"
        if root not in path.parents and path != root or not path.is_file():
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found"]
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        data = path.read_bytes()
        start_response("200 OK", [("Content-Type", kind), ("Content-Length", str(len(data)))])
        return [data]

    return app
