"""Serving a pack's web application on 127.0.0.1, one server per episode.

A pack's app is a WSGI callable (see :mod:`agentsynth_browser.webapp` for a small
helper); it is served by a threading stdlib server on a free port, on daemon
threads, so a browser's parallel requests are answered and nothing outlives the
episode.
"""

from __future__ import annotations

import mimetypes
import socketserver
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


class AppServer:
    """``start()`` serves ``app`` on 127.0.0.1:<free port> and returns the base URL; ``stop()`` ends it."""

    def __init__(self, app: WSGIApp, host: str = "127.0.0.1") -> None:
        self.app = app
        self.host = host
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None
        self.base_url = ""

    def start(self) -> str:
        server = _Server((self.host, 0), _QuietHandler)
        server.set_app(self.app)
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
