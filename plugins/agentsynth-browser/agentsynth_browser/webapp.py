"""A very small WSGI toolkit for the web applications packs ship (stdlib only).

Example (a pack's ``app.py``)::

    from agentsynth_browser.webapp import App, html_page, redirect

    def make_app(db_path):
        app = App(db_path)

        @app.route("/")
        def home(req):
            n = req.db.execute("select count(*) from items").fetchone()[0]
            return html_page("Home", f"<h1>{n} items</h1>")

        return app

``make_app(db_path)`` (or ``make_app(db_path, seed)``) is called once per episode
with a fresh copy of the pack's database.
"""

from __future__ import annotations

import html
import re
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

esc = html.escape


class Response:
    def __init__(self, body: str | bytes = "", status: int = 200, headers: list[tuple[str, str]] | None = None,
                 content_type: str = "text/html; charset=utf-8") -> None:
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.status = status
        self.headers = list(headers or [])
        self.content_type = content_type


def redirect(location: str) -> Response:
    """A 303 See Other (post/redirect/get)."""
    return Response("", 303, [("Location", location)])


_REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error"}


class Request:
    def __init__(self, environ: dict[str, Any], db: sqlite3.Connection, params: dict[str, str]) -> None:
        self.environ = environ
        self.method = environ.get("REQUEST_METHOD", "GET").upper()
        self.path = environ.get("PATH_INFO", "/") or "/"
        self.query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}
        self.form: dict[str, str] = {}
        if self.method == "POST":
            try:
                size = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                size = 0
            body = environ["wsgi.input"].read(size).decode("utf-8", "replace") if size else ""
            self.form = {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
        self.db = db
        self.params = params


Handler = Callable[[Request], Response | str]


class App:
    """Routes (``/product/<sku>``) to handlers; each request gets its own SQLite connection
    (``req.db``), committed when the handler returns."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self.routes: list[tuple[re.Pattern[str], tuple[str, ...], Handler]] = []

    def route(self, pattern: str, methods: Iterable[str] = ("GET",)) -> Callable[[Handler], Handler]:
        regex = re.compile("^" + re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", pattern) + "$")

        def decorate(fn: Handler) -> Handler:
            self.routes.append((regex, tuple(m.upper() for m in methods), fn))
            return fn

        return decorate

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/") or "/"
        method = environ.get("REQUEST_METHOD", "GET").upper()
        response: Response | None = None
        allowed = False
        for regex, methods, fn in self.routes:
            match = regex.match(path)
            if not match:
                continue
            allowed = True
            if method not in methods:
                continue
            db = sqlite3.connect(self.db_path, timeout=10)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA synchronous = OFF")  # a throw-away per-episode database
            try:
                result = fn(Request(environ, db, match.groupdict()))
                db.commit()
            except Exception as exc:  # the app's bug is shown as a 500 page, like a real server
                db.rollback()
                result = Response(html_page("Error", f"<h1>Server error</h1><p>{esc(str(exc))}</p>"), 500)
            finally:
                db.close()
            response = result if isinstance(result, Response) else Response(result)
            break
        if response is None:
            response = Response(html_page("Not found", "<h1>Not found</h1>"), 405 if allowed else 404)
        headers = [("Content-Type", response.content_type), ("Content-Length", str(len(response.body))),
                   ("Cache-Control", "no-store"), *response.headers]
        start_response(f"{response.status} {_REASONS.get(response.status, 'OK')}", headers)
        return [response.body]


def html_page(title: str, body: str, *, head: str = "") -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title>{head}</head><body>{body}</body></html>"
    )
