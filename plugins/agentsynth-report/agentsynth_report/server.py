"""``agentsynth serve``: a local web app (starlette + uvicorn) over run directories.

Pages: the runs (live), one run or a comparison (the report's app, fed by the API, following a
running run), the per-pack leaderboard, the playground. Safety: it binds 127.0.0.1 unless told
``--public``; requests whose Host header is not the server's own are refused (DNS rebinding);
writes need ``Content-Type: application/json`` (no cross-site form posts); runs are addressed
by an opaque key of a directory found under the roots, never by a path from the request; static
files come from a fixed list; every page is rendered by the browser with text nodes only, under
a Content-Security-Policy that allows scripts from this server alone.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agentsynth_kernel import STORE_FILE, AgentsynthError, SpecError, session_state, to_builtins

from .html import asset, build_report, script_json
from .model import compare_if_paired, digest_store, find_run_dirs, leaderboard, open_store
from .playground import Playground, pack_list

STATIC = {
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
    "app.css": ("app.css", "text/css; charset=utf-8"),
    "uPlot.iife.min.js": ("vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    "uPlot.min.css": ("vendor/uPlot.min.css", "text/css; charset=utf-8"),
}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
MAX_BODY = 16_000


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, public: bool) -> None:
    if not is_loopback(host) and not public:
        raise click.UsageError(
            f"--host {host}: not a loopback address; the server shows every trajectory and runs episodes "
            "(the playground): add --public to bind it anyway"
        )


class Runs:
    """The run directories under the roots, each known by an opaque key; digests cached by file state."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = [Path(r) for r in roots]
        # key -> (file stamp, digest, when computed (monotonic), seconds it took)
        self._cache: dict[str, tuple[tuple[Any, ...], dict[str, Any], float, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(path: Path) -> str:
        return hashlib.sha256(str(path).encode()).hexdigest()[:16]

    def scan(self) -> dict[str, Path]:
        return {self.key(p): p for p in find_run_dirs(self.roots)}

    def path(self, key: str) -> Path | None:
        return self.scan().get(key)

    @staticmethod
    def _stamp(path: Path) -> tuple[Any, ...]:
        out: list[Any] = []
        for name in (STORE_FILE, STORE_FILE + "-wal"):
            try:
                st = (path / name).stat()
                out += [st.st_mtime_ns, st.st_size]
            except OSError:
                out += [0, 0]
        return tuple(out)

    def digest(self, key: str, path: Path) -> dict[str, Any]:
        """The run's digest, recomputed when its store changed; while a big run is being written,
        at most every ``5 x`` the time a digest takes (so following it live costs at most ~20 % of a
        core), with the state (running or not) checked on every call."""
        stamp = self._stamp(path)
        with self._lock:
            cached = self._cache.get(key)
        now = time.monotonic()
        fresh = cached is not None and (cached[0] == stamp or now - cached[2] < max(1.0, 5 * cached[3]))
        if cached is not None and fresh:
            digest = cached[1]
            if digest["state"] == "running":
                store = open_store(path)
                try:
                    digest["state"] = session_state(store)[0]
                finally:
                    store.close()
            return digest
        started = time.perf_counter()
        store = open_store(path)
        try:
            digest = digest_store(store)
        finally:
            store.close()
        digest["key"] = key
        with self._lock:
            self._cache[key] = (stamp, digest, now, time.perf_counter() - started)
        return digest

    def listing(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for key, path in self.scan().items():
            try:
                d = self.digest(key, path)
            except AgentsynthError as exc:
                out.append({"key": key, "run_dir": str(path), "name": path.name, "error": str(exc)})
                continue
            out.append({"key": key, "run_dir": str(path), "name": path.name, "label": d["label"],
                        "pack": d["pack"]["id"], "policy": d["policy_label"], "state": d["state"],
                        "episodes": d["episodes"], "planned": d["planned"], "pass1": d["pass1"],
                        "user_failures": d["attribution"].get("user", 0),
                        "pass1_excluding_user": d.get("pass1_excluding_user"),
                        "cost_usd": d["usage"]["cost_usd"], "created_at": d["created_at"]})
        out.sort(key=lambda r: -float(r.get("created_at") or 0))
        return out

    def episode(self, path: Path, task: str, trial: int, seed: int) -> dict[str, Any] | None:
        store = open_store(path)
        try:
            for result in store.results(task):
                if result.trial == trial and result.seed == seed:
                    return to_builtins(result)
        finally:
            store.close()
        return None


class Guard:
    """Refuse requests for another host name (DNS rebinding) and cross-site writes; add security headers."""

    def __init__(self, app: ASGIApp, public: bool = False) -> None:
        self.app, self.public = app, public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if not self.public and not is_loopback(name.strip("[]")):
            await _send(JSONResponse({"error": f"host {host!r} refused: this server answers on loopback only"}, 403),
                        scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            ctype = headers.get("content-type", "").split(";")[0].strip()
            if ctype != "application/json":
                await _send(JSONResponse({"error": "writes need Content-Type: application/json"}, 415),
                            scope, receive, send)
                return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                         (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _send(response: Response, scope: Scope, receive: Receive, send: Send) -> None:
    await response(scope, receive, send)


def _page(page: str, title: str, **config: Any) -> HTMLResponse:
    body = (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>agentsynth · {title}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
        '<link rel="stylesheet" href="/static/uPlot.min.css"><link rel="stylesheet" href="/static/app.css">'
        '</head><body><div id="app"><p>Loading…</p></div>'
        f'<script type="application/json" id="page-config">{script_json({"page": page, **config})}</script>'
        '<script src="/static/uPlot.iife.min.js"></script><script src="/static/app.js"></script></body></html>'
    )
    return HTMLResponse(body)


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status)


def create_app(roots: Sequence[Path], *, public: bool = False, playground_delay: float = 0.4) -> ASGIApp:
    """The ASGI app over the run directories under ``roots``."""
    runs = Runs(roots)
    playground = Playground(delay=playground_delay)

    async def index(request: Request) -> Response:
        return _page("runs", "runs")

    async def run_page(request: Request) -> Response:
        key = request.path_params["key"]
        if await run_in_threadpool(runs.path, key) is None:
            return HTMLResponse("<!doctype html><p>unknown run</p>", 404)
        return _page("report", "run", runs=[key])

    async def compare_page(request: Request) -> Response:
        keys = [k for k in request.query_params.get("runs", "").split(",") if k]
        return _page("report", "compare", runs=keys[:8])

    async def leaderboard_page(request: Request) -> Response:
        return _page("leaderboard", "leaderboard")

    async def playground_page(request: Request) -> Response:
        return _page("playground", "playground")

    async def static(request: Request) -> Response:
        entry = STATIC.get(request.path_params["name"])
        if entry is None:
            return Response("not found", 404, media_type="text/plain")
        return Response(asset(entry[0]), media_type=entry[1], headers={"cache-control": "no-cache"})

    async def api_runs(request: Request) -> Response:
        listing = await run_in_threadpool(runs.listing)
        return JSONResponse({"roots": [str(r) for r in runs.roots], "runs": listing})

    def _bundle(keys: list[str]) -> tuple[dict[str, Any] | None, str]:
        found = runs.scan()
        digests = []
        for key in keys:
            path = found.get(key)
            if path is None:
                return None, f"unknown run {key!r}"
            digests.append(runs.digest(key, path))
        if not digests:
            return None, "no run given (runs=KEY,KEY)"
        return {"title": " vs ".join(d["label"] for d in digests), "runs": digests,
                "compare": compare_if_paired(digests)}, ""

    async def api_report(request: Request) -> Response:
        keys = [k for k in request.query_params.get("runs", "").split(",") if k][:8]
        try:
            bundle, error = await run_in_threadpool(_bundle, keys)
        except AgentsynthError as exc:
            return _error(str(exc), 500)
        if bundle is None:
            return _error(error, 404)
        return JSONResponse(bundle)

    async def api_episode(request: Request) -> Response:
        path = await run_in_threadpool(runs.path, request.path_params["key"])
        if path is None:
            return _error("unknown run", 404)
        q = request.query_params
        try:
            trial, seed = int(q.get("trial", "")), int(q.get("seed", ""))
        except ValueError:
            return _error("query: expected task=ID&trial=INT&seed=INT", 400)
        episode = await run_in_threadpool(runs.episode, path, q.get("task", ""), trial, seed)
        if episode is None:
            return _error(f"no episode ({q.get('task')!r}, trial {trial}, seed {seed}) in this run", 404)
        return JSONResponse(episode)

    async def download(request: Request) -> Response:
        """The static report of the given runs, built on demand (the same file `agentsynth report` writes)."""
        keys = [k for k in request.query_params.get("runs", "").split(",") if k][:8]
        found = await run_in_threadpool(runs.scan)
        paths = [found.get(k) for k in keys]
        if not paths or any(p is None for p in paths):
            return _error("unknown run (runs=KEY,KEY)", 404)
        tmp = Path(tempfile.mkdtemp(prefix="agentsynth-serve-"))
        try:
            await run_in_threadpool(build_report, [p for p in paths if p is not None], tmp / "report.html")
        except AgentsynthError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            return _error(str(exc), 500)
        name = "-".join(Path(str(p)).name for p in paths)[:80] or "report"
        return FileResponse(tmp / "report.html", media_type="text/html; charset=utf-8",
                            filename=f"agentsynth-{name}.html",
                            background=BackgroundTask(shutil.rmtree, tmp, ignore_errors=True))

    async def api_leaderboard(request: Request) -> Response:
        def board() -> dict[str, Any]:
            digests = []
            for key, path in runs.scan().items():
                try:
                    digests.append(runs.digest(key, path))
                except AgentsynthError:
                    continue
            return {"packs": leaderboard(digests)}

        return JSONResponse(await run_in_threadpool(board))

    async def api_packs(request: Request) -> Response:
        return JSONResponse({"packs": await run_in_threadpool(pack_list)})

    async def api_play(request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return _error(f"request body over {MAX_BODY} bytes", 413)
        try:
            body = json.loads(raw)
        except ValueError:
            return _error("body: expected a JSON object", 400)
        if not isinstance(body, dict):
            return _error("body: expected a JSON object", 400)
        problems = [f"{key}: expected a string" for key in ("pack", "task", "policy") if not isinstance(body.get(key), str)]
        seed = body.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
            problems.append("seed: expected an integer in [0, 2^32)")
        if problems:
            return _error("; ".join(problems), 400)
        try:
            session = playground.start(body["pack"], body["task"], body["policy"], seed)
        except SpecError as exc:
            return _error("; ".join(exc.messages) if getattr(exc, "messages", None) else str(exc), 400)
        except AgentsynthError as exc:
            return _error(str(exc), 400)
        return JSONResponse({"id": session.id})

    async def api_play_get(request: Request) -> Response:
        session = playground.get(request.path_params["sid"])
        if session is None:
            return _error("unknown playground session", 404)
        try:
            since = int(request.query_params.get("since", "0"))
        except ValueError:
            since = 0
        return JSONResponse(session.view(since))

    routes = [
        Route("/", index), Route("/runs/{key}", run_page), Route("/compare", compare_page),
        Route("/leaderboard", leaderboard_page), Route("/playground", playground_page),
        Route("/static/{name}", static),
        Route("/api/runs", api_runs), Route("/api/report", api_report), Route("/report.html", download),
        Route("/api/runs/{key}/episode", api_episode), Route("/api/leaderboard", api_leaderboard),
        Route("/api/packs", api_packs), Route("/api/playground", api_play, methods=["POST"]),
        Route("/api/playground/{sid}", api_play_get),
    ]
    return Starlette(routes=routes, middleware=[Middleware(Guard, public=public)])


def run_server(roots: Sequence[Path], *, host: str = "127.0.0.1", port: int = 8765, public: bool = False) -> None:
    """Serve until interrupted; prints the URL once the socket is bound (``--port 0``: any free port)."""
    import uvicorn

    for root in roots:
        if not Path(root).exists():
            raise AgentsynthError(f"{root}: no such directory (give run directories or directories holding them)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise AgentsynthError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    click.echo(f"agentsynth serve: http://{shown}:{bound}/ ({len(find_run_dirs(roots))} run dir(s) under "
               f"{', '.join(str(r) for r in roots)}; Ctrl-C to stop)", err=False)
    config = uvicorn.Config(create_app(roots, public=public), log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
