"""``type: browser``: a fresh Chromium context per episode, optionally on a pack's own web app.

Per episode, ``reset``:

1. builds the app's SQLite database from the pack's ``db:`` (a ``.sql`` script or a
   database file to copy) plus the task's ``setup_sql:``, in a temporary directory;
2. serves the pack's ``app:`` (a WSGI factory ``make_app(db_path)``) or ``static:``
   directory on 127.0.0.1 on a free port;
3. opens a new incognito context in the shared browser and goes to ``start_url``.

Tools: navigate, click, type, select, press, read, scroll, back, screenshot. Every
observation starts with the page's URL (relative to the app) and title, then a
compact snapshot (``snapshot.py``) bounded by ``max_chars``. Every action has a
Playwright timeout plus a hard one around the whole tool call. A tool that fails
(no such element, a timeout) is an error observation the agent can recover from;
a crashed page or browser raises, which fails the episode as an environment
error, and ``close`` cleans up either way.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import inspect
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from agentsynth_kernel import Observation, ToolCall, ToolSpec, import_file, import_object

from . import launcher
from .snapshot import SNAPSHOT_JS, render, selector_for

if TYPE_CHECKING:  # the app server (wsgiref, http.server) is imported when a world serves an app
    from .server import AppServer

_STR = {"type": "string"}
_ELEMENT = {
    "type": "string",
    "description": "An element id from the page snapshot, e.g. 'e12' (a CSS or Playwright selector also works).",
}


# The kernel's import_file publishes a module before running it: serialise app imports, which
# happen on worker threads, so a concurrent episode never sees a half-imported app.
_IMPORT_LOCK = threading.Lock()


_TEMPLATES: dict[tuple[str, int, int], Path] = {}


def _template_db(source: Path) -> Path:
    """The pack's database built once per process (a ``.sql`` script is run; a database file is used
    as is); every episode gets a copy of it."""
    if source.suffix != ".sql":
        return source
    stat = source.stat()
    key = (str(source.resolve()), stat.st_mtime_ns, stat.st_size)
    with _IMPORT_LOCK:
        path = _TEMPLATES.get(key)
        if path is None or not path.exists():
            folder = Path(tempfile.mkdtemp(prefix="agentsynth-browser-db-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "template.db"
            con = sqlite3.connect(path, isolation_level=None)
            try:
                con.execute("PRAGMA synchronous = OFF")
                con.execute("PRAGMA journal_mode = MEMORY")
                try:
                    con.executescript("BEGIN;\n" + source.read_text(encoding="utf-8") + "\nCOMMIT;")
                except sqlite3.Error as exc:
                    raise ValueError(f"db: {source}: {exc}") from exc
            finally:
                con.close()
            _TEMPLATES[key] = path
        return path


def _obj(required: list[str] | None = None, **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required if required is not None else list(props)}


TOOLS = [
    ToolSpec("navigate", "Go to a URL (a path like '/cart' is relative to the site).", _obj(url=_STR)),
    ToolSpec("click", "Click an element (link, button, checkbox ...).", _obj(element=_ELEMENT)),
    ToolSpec(
        "type",
        "Replace the text of an input or textarea; submit=true presses Enter afterwards.",
        _obj(["element", "text"], element=_ELEMENT, text=_STR,
             submit={"type": "boolean", "description": "Press Enter after typing (default false)."}),
    ),
    ToolSpec("select", "Choose an option of a <select> by its label or value.",
             _obj(element=_ELEMENT, option={"type": "string", "description": "The option's label or value."})),
    ToolSpec("press", "Press a key (e.g. 'Enter', 'Tab', 'Escape'), in an element if given.",
             _obj(["key"], key=_STR, element=_ELEMENT)),
    ToolSpec(
        "read",
        "Read the page again (or only one element's part of it); offset continues a long page.",
        _obj([], element=_ELEMENT, offset={"type": "integer", "minimum": 0, "description": "First line to show."}),
    ),
    ToolSpec("scroll", "Scroll the page up or down (or to the top/bottom, or to an element).",
             _obj([], direction={"type": "string", "enum": ["down", "up", "top", "bottom"]}, element=_ELEMENT)),
    ToolSpec("back", "Go back to the previous page.", _obj([])),
    ToolSpec("screenshot", "Save a PNG screenshot of the page.",
             _obj([], full_page={"type": "boolean", "description": "The whole page, not only the viewport."})),
]


MAX_URL_CHARS = 4096
MAX_SELECTOR_CHARS = 1000
_SCHEMES = ("http", "https")
_TEXTS_JS = "(els) => els.map((e) => (e.innerText || e.textContent || e.value || '').replace(/\\s+/g, ' ').trim())"


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = -1
    return scheme, (parts.hostname or "").lower(), port


class ToolError(Exception):
    """A tool call failed in a way the agent can recover from."""


class BrowserCrashed(RuntimeError):
    """The page or the browser died: the episode cannot go on."""


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    for prefix in ("Locator.", "Page.", "Frame.", "ElementHandle."):
        if first.startswith(prefix) and ": " in first:
            first = first.split(": ", 1)[1]
    return first[:300]


class BrowserEnvironment:
    """A headless Chromium world. Parameters come from the pack's ``environment:`` (merged with the task's)."""

    def __init__(
        self,
        app: str | None = None,
        db: str | None = None,
        setup_sql: str | list[str] | None = None,
        static: str | None = None,
        start_url: str = "/",
        executable_path: str | None = None,
        headless: bool = True,
        launch_args: list[str] | None = None,
        allow_network: bool = False,
        shared_browser: bool = True,
        action_timeout: float = 5.0,
        navigation_timeout: float = 10.0,
        launch_timeout: float = 30.0,
        max_chars: int = 4000,
        max_input_chars: int = 10_000,
        max_body_bytes: int = 256 * 1024,
        max_db_bytes: int = 64 * 1024 * 1024,
        max_screenshots: int = 20,
        check_timeout: float = 10.0,
        check_scripts: bool = False,
        viewport: dict[str, int] | None = None,
        screenshot_dir: str | None = None,
        base_dir: Path | None = None,
        task: Any = None,
        run: Any = None,
    ) -> None:
        self.base_dir = Path(base_dir) if base_dir is not None else Path.cwd()
        if app and static:
            raise ValueError("give either 'app' or 'static', not both")
        for name, value in (("action_timeout", action_timeout), ("navigation_timeout", navigation_timeout),
                            ("launch_timeout", launch_timeout), ("check_timeout", check_timeout)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}: expected a positive number of seconds, got {value!r}")
        if not isinstance(max_chars, int) or max_chars < 200:
            raise ValueError(f"max_chars: expected an integer >= 200, got {max_chars!r}")
        for name, value, low in (("max_input_chars", max_input_chars, 1), ("max_body_bytes", max_body_bytes, 1024),
                                 ("max_db_bytes", max_db_bytes, 64 * 1024), ("max_screenshots", max_screenshots, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
        self.app_ref, self.db_ref, self.static = app, db, static
        self.setup_sql = [setup_sql] if isinstance(setup_sql, str) else list(setup_sql or [])
        self.start_url = start_url
        self.executable = launcher.find_chromium(executable_path)
        self.headless = headless
        self.args = launcher.launch_args(tuple(launch_args or ()), allow_network=allow_network)
        self.shared = shared_browser
        self.action_timeout = float(action_timeout)
        self.navigation_timeout = float(navigation_timeout)
        self.launch_timeout = float(launch_timeout)
        self.max_chars = max_chars
        self.max_input_chars = max_input_chars
        self.max_body_bytes, self.max_db_bytes = max_body_bytes, max_db_bytes
        self.max_screenshots = max_screenshots
        self.check_timeout = float(check_timeout)
        self.check_scripts = bool(check_scripts)
        self.allow_network = allow_network
        # around a whole tool call (action + page load + snapshot), beyond Playwright's own timeouts
        self.hard_timeout = self.action_timeout + self.navigation_timeout + 3
        self.viewport = {"width": 1280, "height": 800, **(viewport or {})}
        self.task_id = getattr(task, "id", "") or "episode"
        self.owner = getattr(run, "run_id", "") or ""
        run_dir = getattr(run, "run_dir", None)
        if screenshot_dir:
            self.screenshot_dir: Path | None = Path(screenshot_dir)
            if not self.screenshot_dir.is_absolute():
                self.screenshot_dir = self.base_dir / self.screenshot_dir
        elif run_dir is not None:
            self.screenshot_dir = Path(run_dir) / "screenshots"
        else:
            self.screenshot_dir = None
        # per-episode state
        self.tmp: Path | None = None
        self.db_path: Path | None = None
        self.server: AppServer | None = None
        self.base_url = ""
        self.url = ""
        self.crashed = ""
        self.seed = 0
        self._bt: launcher.BrowserThread | None = None
        self._pool: launcher.BrowserPool | None = None
        self._entry: launcher.SharedBrowser | None = None
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._dialogs: list[str] = []
        self._shots = 0
        self._shot_data: str | None = None
        self.screenshots: list[dict[str, Any]] = []
        self._blocked: list[str] = []
        self._refused_seen = 0
        self._check_page: tuple[str, Any, Any, int] | None = None  # (url, context, page, HTTP status)

    # --- the world --------------------------------------------------------------------------

    def _build_world(self, seed: int) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="agentsynth-browser-"))
        if self.db_ref or self.setup_sql:
            self.db_path = self.tmp / "app.db"
            if self.db_ref:
                shutil.copyfile(_template_db(self._path(self.db_ref, "db")), self.db_path)
            con = sqlite3.connect(self.db_path, isolation_level=None)
            try:
                con.execute("PRAGMA synchronous = OFF")
                for i, sql in enumerate(self.setup_sql):
                    try:
                        con.executescript(sql)
                    except sqlite3.Error as exc:
                        raise ValueError(f"setup_sql[{i}]: {exc}") from exc
            finally:
                con.close()
        from .server import AppServer, static_app

        wsgi = None
        if self.app_ref:
            wsgi = self._load_app(seed)
        elif self.static:
            root = self._path(self.static, "static")
            if not root.is_dir():
                raise ValueError(f"static: not a directory: {root}")
            wsgi = static_app(root)
        if wsgi is not None:
            self.server = AppServer(wsgi, db_path=self.db_path, max_body_bytes=self.max_body_bytes,
                                    max_db_bytes=self.max_db_bytes)
            self.base_url = self.server.start()

    def _path(self, ref: str, what: str) -> Path:
        path = Path(ref)
        if not path.is_absolute():
            path = self.base_dir / path
        if not path.exists():
            raise ValueError(f"{what}: file not found: {path}")
        return path

    def _load_app(self, seed: int) -> Any:
        ref = str(self.app_ref)
        with _IMPORT_LOCK:
            if ":" in ref:
                factory = import_object(ref, base_dir=self.base_dir)
            else:
                module = import_file(self._path(ref, "app"))
                factory = getattr(module, "make_app", None)
            if factory is None:
                raise ValueError(f"app: {ref} defines no make_app(db_path)")
        try:
            n_params = len(inspect.signature(factory).parameters)
        except (TypeError, ValueError):
            n_params = 1
        db = str(self.db_path) if self.db_path else None
        return factory(db, seed) if n_params >= 2 else factory(db)

    def _off_site(self, url: str) -> str:
        """Why the agent may not be on (or load) ``url``, or "" if it may: only http(s) pages,
        and only the pack's own site when it serves one (unless ``allow_network``)."""
        scheme = url.split(":", 1)[0].lower() if ":" in url else ""
        if scheme not in _SCHEMES:
            return f"{scheme or 'this'}: URLs are refused; only pages of the site (http) can be opened"
        if self.base_url and not self.allow_network and _origin(url) != _origin(self.base_url):
            return "only pages of this site can be opened (other hosts and ports are refused)"
        return ""

    def _target(self, url: str) -> str:
        """The absolute URL an agent's ``navigate`` may load; ToolError if it may not."""
        if len(url) > MAX_URL_CHARS:
            raise ToolError(f"the URL is {len(url)} characters long; at most {MAX_URL_CHARS} are accepted")
        # as browsers do: tabs and newlines vanish, leading/trailing controls and spaces are stripped
        url = "".join(c for c in url if c not in "\t\n\r").strip("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x0b"
                                                                "\x0c\x0e\x0f\x10\x11\x12\x13\x14\x15\x16"
                                                                "\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
        if not url:
            raise ToolError("'url' must be a non-empty string")
        target = urljoin(self.base_url + "/", url) if self.base_url else url
        problem = self._off_site(target)
        if problem:
            raise ToolError(f"{self.relative_url(target)[:200]!r}: {problem}")
        return target

    def _absolute(self, url: str) -> str:
        if self.base_url and url.split(":", 1)[0] not in ("http", "https", "about", "data", "file", "chrome"):
            return urljoin(self.base_url + "/", url)
        return url

    def relative_url(self, url: str | None = None) -> str:
        """The URL as the agent sees it: a path for pages of the pack's app, the full URL otherwise."""
        url = self.url if url is None else url
        if self.base_url and url.startswith(self.base_url):
            rest = url[len(self.base_url):]
            return rest if rest.startswith("/") else "/" + rest
        return url

    # --- browser-thread helpers -----------------------------------------------------------------

    async def _on_browser(self, coro: Any, timeout: float) -> Any:
        assert self._bt is not None
        return await asyncio.wait_for(self._bt.run(coro), timeout)

    def _watch_page(self, page: Any) -> None:
        def crashed(_: Any = None) -> None:
            self.crashed = self.crashed or "the page crashed"

        def dialog(d: Any) -> None:
            self._dialogs.append(f"{d.type} {d.message!r} (accepted)")
            asyncio.ensure_future(d.accept())

        page.on("crash", crashed)
        page.on("dialog", dialog)
        page.set_default_timeout(self.action_timeout * 1000)
        page.set_default_navigation_timeout(self.navigation_timeout * 1000)

    async def _new_context(self, blocked: list[str] | None, *, scripts: bool = True) -> Any:
        """A fresh incognito context; with a site of the pack's, requests to anywhere else are aborted
        (links, redirects, forms and scripts alike), and ``blocked`` collects them."""
        context = await self._browser.new_context(viewport=self.viewport, accept_downloads=False,
                                                  service_workers="block", java_script_enabled=scripts)
        if self.base_url and not self.allow_network:
            async def guard(route: Any) -> None:
                url = route.request.url
                if self._off_site(url):
                    if blocked is not None and len(blocked) < 20:
                        blocked.append(self.relative_url(url)[:120])
                    await route.abort("blockedbyclient")
                else:
                    await route.continue_()

            await context.route("**/*", guard)
        return context

    async def _open(self) -> str:
        """On the browser thread: a browser (shared or own), a fresh context and page, then start_url."""
        assert self._pool is not None
        if self.shared:
            self._entry = await self._pool.acquire(self.owner, self.executable, self.args, self.headless,
                                                   self.launch_timeout)
            self._browser = self._entry.browser
        else:
            self._browser = await self._pool.launch(self.executable, self.args, self.headless, self.launch_timeout)
            self._pool.own.add(self._browser)
        self._context = await self._new_context(self._blocked)
        self._context.set_default_timeout(self.action_timeout * 1000)
        self._context.set_default_navigation_timeout(self.navigation_timeout * 1000)

        def new_page(page: Any) -> None:  # a link with target=_blank: follow the newest tab
            self._watch_page(page)
            self._page = page

        self._context.on("page", new_page)
        self._page = await self._context.new_page()
        start = self._absolute(self.start_url)
        if start and start != "about:blank":
            await self._page.goto(start, wait_until="load")
        return await self._observe("")

    async def _settle(self) -> None:
        page = self._page
        try:
            await page.wait_for_load_state("load", timeout=self.navigation_timeout * 1000)
        except Exception:
            pass  # a slow page: snapshot whatever is there

    async def _snapshot(self, element: str | None = None) -> dict[str, Any]:
        page = self._page
        for attempt in range(3):
            try:
                if element:
                    loc = page.locator(selector_for(element)).first
                    return await loc.evaluate(SNAPSHOT_JS)
                return await page.evaluate(SNAPSHOT_JS, None)
            except Exception as exc:
                # a navigation raced the snapshot: wait for the new page and try again
                message = str(exc).lower()
                if attempt < 2 and ("context was destroyed" in message or "navigat" in message):
                    await self._settle()
                    continue
                raise
        return {"title": "", "lines": []}

    async def _observe(self, note: str, *, element: str | None = None, offset: int = 0) -> str:
        page = self._page
        self.url = page.url
        if self.url != "about:blank" and self._off_site(self.url):
            # a redirect or a page's own navigation left the site: never show (or keep) that page
            where, why = self.relative_url()[:120], self._off_site(self.url)
            await page.goto("about:blank")
            self.url = page.url
            raise ToolError(f"the page went to {where!r}, which is refused ({why}); now on about:blank")
        snap = await self._snapshot(element)
        lines, title = snap["lines"], str(snap["title"])[:200]
        head = [f"URL: {self.relative_url()[:300]}", f"Title: {title}"]
        if self._dialogs:
            head.append("Dialog: " + "; ".join(self._dialogs))
            self._dialogs.clear()
        if note:
            head.append(note)
        header = "\n".join(head) + "\n---\n"
        budget = max(100, self.max_chars - len(header) - 80)
        body, until, total = render(lines, offset=offset, max_chars=budget)
        tail = ""
        if until < total:
            tail = f"\n[... {total - until} more lines: call read with offset={until}]"
        elif offset and not body:
            tail = f"[no lines from offset {offset}; the page has {total}]"
        return (header + body + tail)[: self.max_chars]

    # --- Environment protocol -------------------------------------------------------------------

    async def reset(self, seed: int) -> Observation:
        self.seed = seed
        await asyncio.to_thread(self._build_world, seed)
        self._bt, self._pool = launcher.runtime()
        content = await self._on_browser(self._open(), self.launch_timeout + self.navigation_timeout + 10)
        return Observation(content, data={"url": self.relative_url()})

    async def tools(self) -> list[ToolSpec]:
        return list(TOOLS)

    async def step(self, call: ToolCall) -> Observation:
        if self.crashed:
            raise BrowserCrashed(f"{self.crashed}; the episode cannot continue")
        handler = getattr(self, f"_tool_{call.name}", None)
        if handler is None:
            return self._bounded(f"error: unknown tool {call.name[:100]!r}", error=True)
        args = dict(call.arguments or {})
        try:
            coro = handler(**args)
        except TypeError as exc:
            return self._bounded(f"error: bad arguments for {call.name}: {str(exc)[:300]}", error=True)
        hard = self.hard_timeout
        try:
            content = await self._on_browser(coro, hard)
        except ToolError as exc:
            return self._bounded(self._with_refusals(f"URL: {self.relative_url()}\nerror: {exc}"), error=True)
        except TimeoutError:
            # Playwright's own timeouts did not fire: the page (or browser) no longer answers.
            self._check_alive()
            self.crashed = f"the page stopped responding ({call.name} took more than {hard:g}s)"
            raise BrowserCrashed(self.crashed) from None
        except Exception as exc:  # a Playwright error: a tool error unless the page/browser died
            self._check_alive()
            message = _short(exc)
            if self.base_url:  # the port changes per episode; trajectories should not
                message = message.replace(self.base_url, "")
            return self._bounded(self._with_refusals(f"URL: {self.relative_url()}\nerror: {call.name} failed: {message}"),
                                 error=True)
        refusals = self._refusals()
        if refusals:
            return self._bounded(content + "\nerror: " + refusals, error=True)
        shot, self._shot_data = self._shot_data, None
        return self._bounded(content, screenshot=shot if call.name == "screenshot" else None)

    def _with_refusals(self, text: str) -> str:
        refusals = self._refusals()
        return f"{text}\n({refusals})" if refusals else text

    def _refusals(self) -> str:
        """What the site's guards refused since the last observation (blocked requests, a full database)."""
        parts = []
        if self._blocked:
            parts.append("requests to other sites were blocked: " + ", ".join(self._blocked[:5]))
            self._blocked.clear()
        server = self.server
        if server is not None and len(server.refused) > self._refused_seen:
            new = server.refused[self._refused_seen:]
            self._refused_seen = len(server.refused)
            parts.append("the site refused a request: " + "; ".join(dict.fromkeys(new)))
        return "; ".join(parts)

    def _bounded(self, content: str, *, error: bool = False, screenshot: str | None = None) -> Observation:
        """Every observation the agent gets: content within max_chars, data a short URL (and a file name)."""
        data: dict[str, Any] = {"url": self.relative_url()[:MAX_URL_CHARS]}
        if screenshot:
            data["screenshot"] = screenshot
        return Observation(content[: self.max_chars], error=error, data=data)

    def _check_alive(self) -> None:
        if self.crashed:
            raise BrowserCrashed(self.crashed)
        if self._browser is not None and not self._browser.is_connected():
            self.crashed = "the browser disconnected (crashed or was killed)"
            raise BrowserCrashed(self.crashed)
        if self._page is not None and self._page.is_closed():
            self.crashed = "the page was closed"
            raise BrowserCrashed(self.crashed)

    async def close(self) -> None:
        try:
            if self._bt is not None and (self._context is not None or self._browser is not None):
                try:
                    await self._on_browser(self._close_browser_side(), 30)
                except Exception:
                    pass
        finally:
            if self.server is not None:
                await asyncio.to_thread(self.server.stop)
                self.server = None
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)
                self.tmp = None

    async def _close_browser_side(self) -> None:
        if self._check_page is not None:
            checking, self._check_page = self._check_page[1], None
            await launcher._quietly(checking.close(), 15)
        context, self._context = self._context, None
        if context is not None:
            await launcher._quietly(context.close(), 15)
        if self._entry is not None and self._pool is not None:
            await self._pool.release(self._entry)
            self._entry = None
        elif self._browser is not None and self._pool is not None:
            self._pool.own.discard(self._browser)
            await launcher._quietly(self._browser.close(), 15)
        self._browser = None

    # --- tools (run on the browser thread) ---------------------------------------------------------

    def _locator(self, element: Any) -> Any:
        if not isinstance(element, str) or not element.strip():
            raise ToolError("'element' must be an element id from the snapshot, e.g. 'e12'")
        if len(element) > MAX_SELECTOR_CHARS:
            raise ToolError(f"'element' is {len(element)} characters long; at most {MAX_SELECTOR_CHARS} are accepted")
        return self._page.locator(selector_for(element)).first

    async def _require(self, element: str) -> Any:
        loc = self._locator(element)
        if await loc.count() == 0:
            raise ToolError(f"no element {element!r} on this page; call read to see the current element ids")
        return loc

    async def _tool_navigate(self, url: str) -> str:
        if not isinstance(url, str) or not url.strip():
            raise ToolError("'url' must be a non-empty string")
        target = self._target(url)
        response = await self._page.goto(target, wait_until="load")
        status = f" (HTTP {response.status})" if response is not None and response.status >= 400 else ""
        return await self._observe(f"navigated to {self.relative_url(target)[:300]}{status}")

    async def _tool_click(self, element: str) -> str:
        loc = await self._require(element)
        await loc.click()
        await self._settle()
        return await self._observe(f"clicked {element}")

    async def _tool_type(self, element: str, text: str, submit: bool = False) -> str:
        text = str(text)
        if len(text) > self.max_input_chars:
            raise ToolError(f"the text is {len(text)} characters long; at most {self.max_input_chars} can be typed")
        loc = await self._require(element)
        await loc.fill(str(text))
        if submit:
            await loc.press("Enter")
            await self._settle()
        return await self._observe(f"typed {str(text)[:60]!r} into {element}" + (" and pressed Enter" if submit else ""))

    async def _tool_select(self, element: str, option: str) -> str:
        option = str(option)[:MAX_SELECTOR_CHARS]
        loc = await self._require(element)
        # check first: Playwright would wait for a missing option until the action timeout
        labels = await loc.evaluate(
            "(el) => el.tagName === 'SELECT' ? Array.from(el.options).map((o) => [o.value, o.label || o.text]) : null"
        )
        if labels is None:
            raise ToolError(f"{element} is not a select element")
        wanted = option.strip().lower()
        match = [v for v, label in labels if v == option] or [
            v for v, label in labels if label.strip().lower() == wanted or v.lower() == wanted]
        if not match:
            shown = " | ".join(label for _, label in labels[:20])
            raise ToolError(f"{element} has no option {option!r}; options: {shown}")
        chosen = await loc.select_option(value=match[0])
        await self._settle()
        return await self._observe(f"selected {', '.join(chosen) or option!r} in {element}")

    async def _tool_press(self, key: str, element: str | None = None) -> str:
        key = str(key)
        if not key or len(key) > 60:
            raise ToolError("'key' must be a key name such as 'Enter', 'Tab' or 'Control+A'")
        if element:
            loc = await self._require(element)
            await loc.press(str(key))
        else:
            await self._page.keyboard.press(str(key))
        await self._settle()
        return await self._observe(f"pressed {key}")

    async def _tool_read(self, element: str | None = None, offset: int = 0) -> str:
        if element:
            await self._require(element)
        if not isinstance(offset, int) or offset < 0:
            raise ToolError("'offset' must be a non-negative integer")
        return await self._observe("", element=element, offset=offset)

    async def _tool_scroll(self, direction: str = "down", element: str | None = None) -> str:
        page = self._page
        if element:
            loc = await self._require(element)
            await loc.scroll_into_view_if_needed()
        elif direction in ("down", "up"):
            dy = self.viewport["height"] * 0.8 * (1 if direction == "down" else -1)
            await page.mouse.wheel(0, dy)
            await page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")
        elif direction in ("top", "bottom"):
            await page.evaluate("(b) => window.scrollTo(0, b ? document.body.scrollHeight : 0)", direction == "bottom")
        else:
            raise ToolError("'direction' must be one of down, up, top, bottom")
        y, height = await page.evaluate("() => [Math.round(window.scrollY), document.documentElement.scrollHeight]")
        return await self._observe(f"scrolled to y={y} of {height}px")

    async def _tool_back(self) -> str:
        response = await self._page.go_back(wait_until="load")
        if response is None and self.url == self._page.url:
            raise ToolError("there is no previous page")
        return await self._observe("went back")

    async def _tool_screenshot(self, full_page: bool = False) -> str:
        if self._shots >= self.max_screenshots:
            raise ToolError(f"the screenshot limit of this episode ({self.max_screenshots}) is reached")
        clip = None
        if full_page:  # a very tall page: at most 8 viewports high (bounds the PNG's size)
            height = await self._page.evaluate("() => document.documentElement.scrollHeight")
            limit = self.viewport["height"] * 8
            if isinstance(height, (int, float)) and height > limit:
                clip = {"x": 0, "y": 0, "width": self.viewport["width"], "height": limit}
        data = await self._page.screenshot(type="png", full_page=bool(full_page), clip=clip)
        self._shots += 1
        folder = self.screenshot_dir or self.tmp
        assert folder is not None
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.task_id}-{self.seed}-{self._shots}.png"
        path.write_bytes(data)
        self.url = self._page.url
        self.screenshots.append({"path": str(path), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        self._shot_data = path.name
        # the observation names the file only (its folder and bytes vary between runs): the same
        # episode gives the same observation on every run; env.screenshots has paths and hashes
        return f"URL: {self.relative_url()}\nscreenshot saved as {path.name}"

    # --- for checkers ---------------------------------------------------------------------------
    #
    # Checkers never read the agent's page: it is the agent's to change (typed values, and anything
    # a page's own scripts do). The URL is the agent's final page's, without the fragment (which never
    # reaches the server); the ``url`` checker accepts it only if the app really served it, and the
    # ``page`` checker re-loads it from the app in a fresh context of its own. Both run under
    # ``check_timeout``; an app that does not answer in time fails the check with the reason.

    async def final_url(self) -> tuple[str, bool | None]:
        """The final page's URL as the server saw it (relative to the app, no fragment) and whether the
        app answered a GET of it below 400 in this episode (None without an app of the pack's)."""
        self._check_alive()

        async def read() -> str:
            return self._page.url

        url = urldefrag(await self._on_browser(read(), self.check_timeout))[0]
        self.url = url
        if self.server is None or self._off_site(url):
            return self.relative_url(url), (False if self.server is not None else None)
        parts = urlsplit(url)
        key = unquote(parts.path or "/", "iso-8859-1") + (f"?{parts.query}" if parts.query else "")
        return self.relative_url(url), key in self.server.served

    async def final_page_texts(self, selector: str) -> dict[str, Any]:
        """The final page as the app serves it now: ``url``, ``status`` and the text of every element
        matching ``selector``; ``problem`` says why there is none (off the site, no answer in time)."""
        self._check_alive()
        url = urldefrag(self._page.url)[0]
        rel = self.relative_url(url)
        problem = self._off_site(url)
        if problem:
            return {"url": rel, "problem": f"the final page {rel[:120]!r} is not a page of the site: {problem}"}
        budget = self.check_timeout
        try:
            return await self._on_browser(self._reload_texts(url, selector, budget), budget + 5)
        except TimeoutError:
            self._check_alive()
            return {"url": rel, "problem": f"the app did not serve {rel[:120]!r} again within {budget:g}s"}

    async def _reload_texts(self, url: str, selector: str, budget: float) -> dict[str, Any]:
        rel = self.relative_url(url)
        cached = self._check_page
        if cached is None or cached[0] != url:
            if cached is not None:
                self._check_page = None
                await launcher._quietly(cached[1].close(), 5)
            # without the page's scripts unless the pack asks for them: a script the agent managed to
            # store in the app (an injection) cannot rewrite what the checker reads
            context = await self._new_context(None, scripts=self.check_scripts)
            try:
                context.set_default_timeout(budget * 1000)
                cookies = await self._context.cookies([url])  # the session the app gave the agent
                if cookies:
                    await context.add_cookies(cookies)
                page = await context.new_page()
                page.on("dialog", lambda d: asyncio.ensure_future(d.dismiss()))
                try:
                    response = await page.goto(url, wait_until="load", timeout=budget * 1000)
                except Exception as exc:
                    await launcher._quietly(context.close(), 5)
                    if type(exc).__name__ == "TimeoutError":
                        message = f"within {budget:g}s"
                    else:
                        message = "(" + (_short(exc).replace(self.base_url, "") if self.base_url else _short(exc)) + ")"
                    return {"url": rel, "problem": f"the app did not serve {rel[:120]!r} again {message}"}
            except BaseException:
                await launcher._quietly(context.close(), 5)
                raise
            cached = self._check_page = (url, context, page, response.status if response is not None else 0)
        status = cached[3]
        if status >= 400:
            return {"url": rel, "status": status, "problem": f"the app answers HTTP {status} for {rel[:120]!r}"}
        texts = await cached[2].locator(selector).evaluate_all(_TEXTS_JS)
        return {"url": rel, "status": status, "texts": [str(t)[:10_000] for t in texts[:1000]]}
