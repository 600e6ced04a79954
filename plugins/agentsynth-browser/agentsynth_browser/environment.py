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
from typing import Any
from urllib.parse import urljoin

from agentsynth_kernel import Observation, ToolCall, ToolSpec
from agentsynth_kernel.importing import import_file, import_object

from . import launcher
from .server import AppServer, static_app
from .snapshot import SNAPSHOT_JS, render, selector_for

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
                            ("launch_timeout", launch_timeout)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}: expected a positive number of seconds, got {value!r}")
        if not isinstance(max_chars, int) or max_chars < 200:
            raise ValueError(f"max_chars: expected an integer >= 200, got {max_chars!r}")
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
        wsgi = None
        if self.app_ref:
            wsgi = self._load_app(seed)
        elif self.static:
            root = self._path(self.static, "static")
            if not root.is_dir():
                raise ValueError(f"static: not a directory: {root}")
            wsgi = static_app(root)
        if wsgi is not None:
            self.server = AppServer(wsgi)
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
        self._context = await self._browser.new_context(viewport=self.viewport, accept_downloads=False,
                                                        service_workers="block")
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
        snap = await self._snapshot(element)
        lines, title = snap["lines"], snap["title"]
        head = [f"URL: {self.relative_url()}", f"Title: {title}"]
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
            return Observation(f"error: unknown tool {call.name!r}", error=True, data={"url": self.relative_url()})
        args = dict(call.arguments or {})
        try:
            coro = handler(**args)
        except TypeError as exc:
            return Observation(f"error: bad arguments for {call.name}: {exc}", error=True,
                               data={"url": self.relative_url()})
        hard = self.hard_timeout
        try:
            content = await self._on_browser(coro, hard)
        except ToolError as exc:
            return Observation(f"URL: {self.relative_url()}\nerror: {exc}", error=True,
                               data={"url": self.relative_url()})
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
            return Observation(f"URL: {self.relative_url()}\nerror: {call.name} failed: {message}", error=True,
                               data={"url": self.relative_url()})
        data: dict[str, Any] = {"url": self.relative_url()}
        if call.name == "screenshot" and self._shot_data:
            data["screenshot"], self._shot_data = self._shot_data, None
        return Observation(content, data=data)

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
        return self._page.locator(selector_for(element)).first

    async def _require(self, element: str) -> Any:
        loc = self._locator(element)
        if await loc.count() == 0:
            raise ToolError(f"no element {element!r} on this page; call read to see the current element ids")
        return loc

    async def _tool_navigate(self, url: str) -> str:
        if not isinstance(url, str) or not url.strip():
            raise ToolError("'url' must be a non-empty string")
        target = self._absolute(url.strip())
        response = await self._page.goto(target, wait_until="load")
        status = f" (HTTP {response.status})" if response is not None and response.status >= 400 else ""
        return await self._observe(f"navigated to {url}{status}")

    async def _tool_click(self, element: str) -> str:
        loc = await self._require(element)
        await loc.click()
        await self._settle()
        return await self._observe(f"clicked {element}")

    async def _tool_type(self, element: str, text: str, submit: bool = False) -> str:
        loc = await self._require(element)
        await loc.fill(str(text))
        if submit:
            await loc.press("Enter")
            await self._settle()
        return await self._observe(f"typed {str(text)[:60]!r} into {element}" + (" and pressed Enter" if submit else ""))

    async def _tool_select(self, element: str, option: str) -> str:
        loc = await self._require(element)
        option = str(option)
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
        data = await self._page.screenshot(type="png", full_page=bool(full_page))
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

    async def dom_texts(self, selector: str) -> list[str]:
        """The visible text of every element matching ``selector`` on the final page."""
        self._check_alive()

        async def run() -> list[str]:
            return await self._page.locator(selector).evaluate_all(
                "(els) => els.map((e) => (e.innerText || e.textContent || e.value || '').replace(/\\s+/g, ' ').trim())"
            )

        return await self._on_browser(run(), self.action_timeout + 5)

    async def current_url(self) -> str:
        self._check_alive()

        async def run() -> str:
            return self._page.url

        self.url = await self._on_browser(run(), self.action_timeout + 5)
        return self.url
