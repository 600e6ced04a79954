"""Finding Chromium, and the browsers that episodes share.

Every Playwright object lives on one daemon thread with its own event loop (the
*browser thread*). The environment's methods are ``async`` and run on the
engine's loop; they hand their Playwright work to the browser thread and await
it (``run_coroutine_threadsafe`` + ``wrap_future``, so cancelling the episode
cancels the action). Why a thread of its own: the run-end hook
(``run_finished``) and ``atexit`` are synchronous, and a browser that lives on
the engine's loop cannot be closed from them; here they simply wait for the
browser thread to close it.

One browser per launch configuration is shared by the episodes of a run, each
episode getting a fresh incognito context. When the run ends (``run_finished``),
the browsers it used are closed and the Playwright driver is stopped, so no
Chromium or driver process outlives the run; ``atexit`` closes whatever is left.

How Chromium is found (first hit wins):

1. the environment's ``executable_path:`` parameter;
2. the ``PLAYWRIGHT_CHROMIUM_EXECUTABLE`` environment variable;
3. ``chromium``, ``chromium-browser``, ``google-chrome-stable``, ``google-chrome`` or
   ``chrome`` on ``PATH`` (Debian/Ubuntu: ``apt-get install chromium``; macOS: set the variable
   to ``/Applications/Google Chrome.app/Contents/MacOS/Google Chrome``);
4. a browser downloaded by ``playwright install chromium``, if there is one.

``playwright install`` is never required.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import shutil
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from agentsynth_kernel import AgentsynthError

T = TypeVar("T")

ENV_VAR = "PLAYWRIGHT_CHROMIUM_EXECUTABLE"
CANDIDATES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome")
# Quiet, offline-friendly, container-friendly Chromium.
BASE_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
)
# With allow_network: false (the default) only loopback hosts resolve and no proxy is used.
OFFLINE_ARGS = (
    "--no-proxy-server",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1",
)


class BrowserUnavailable(AgentsynthError):
    """No Chromium could be found or launched."""


def find_chromium(explicit: str | None = None) -> str | None:
    """The Chromium executable to launch, or ``None`` to let Playwright use its own download.

    Raises BrowserUnavailable if an explicit path (parameter or environment variable) does not exist.
    """
    for source, value in (("executable_path", explicit), (ENV_VAR, os.environ.get(ENV_VAR))):
        if value:
            path = shutil.which(value) or (value if Path(value).is_file() else None)
            if path is None:
                raise BrowserUnavailable(f"{source}: no Chromium executable at {value!r}")
            return path
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def launch_args(extra: list[str] | tuple[str, ...] = (), *, allow_network: bool = False) -> tuple[str, ...]:
    return (*BASE_ARGS, *(() if allow_network else OFFLINE_ARGS), *extra)


# --- the browser thread ---------------------------------------------------------------------------


class BrowserThread:
    """A daemon thread running an event loop that owns every Playwright object."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="agentsynth-browser", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the browser thread from another event loop (cancellation propagates)."""
        return await asyncio.wrap_future(self.submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("run_sync called on the browser thread")
        return self.submit(coro).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


class SharedBrowser:
    def __init__(self, key: tuple[Any, ...], browser: Any) -> None:
        self.key = key
        self.browser = browser
        self.owners: set[str] = set()
        self.active = 0
        self.dead = False


class BrowserPool:
    """Shared and per-episode browsers. Every method runs on the browser thread."""

    def __init__(self) -> None:
        self.playwright: Any = None
        self.shared: dict[tuple[Any, ...], SharedBrowser] = {}
        self.own: set[Any] = set()
        self.launches = 0  # how many browsers this process started (benchmarks, tests)
        self._lock: asyncio.Lock | None = None

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _driver(self) -> Any:
        if self.playwright is None:
            from playwright.async_api import async_playwright

            self.playwright = await async_playwright().start()
        return self.playwright

    async def launch(self, executable: str | None, args: tuple[str, ...], headless: bool, timeout: float) -> Any:
        """Start a new Chromium (not shared)."""
        pw = await self._driver()
        if executable is None and not Path(pw.chromium.executable_path).exists():
            raise BrowserUnavailable(
                f"no Chromium found: install one (Debian/Ubuntu: apt-get install chromium), set {ENV_VAR}"
                " or the environment's executable_path:, or run `playwright install chromium`"
            )
        try:
            browser = await pw.chromium.launch(
                executable_path=executable, args=list(args), headless=headless, timeout=timeout * 1000,
                handle_sigint=False, handle_sigterm=False, handle_sighup=False,
            )
        except Exception as exc:
            raise BrowserUnavailable(f"cannot launch Chromium ({executable or 'playwright download'}): {exc}") from exc
        self.launches += 1
        return browser

    async def acquire(self, owner: str, executable: str | None, args: tuple[str, ...], headless: bool,
                      timeout: float) -> SharedBrowser:
        """The shared browser for this launch configuration (started on first use), counted as in use."""
        key = (executable, args, headless)
        async with self.lock:
            entry = self.shared.get(key)
            if entry is None or entry.dead or not entry.browser.is_connected():
                browser = await self.launch(executable, args, headless, timeout)
                entry = SharedBrowser(key, browser)

                def gone(_: Any = None, entry: SharedBrowser = entry) -> None:
                    entry.dead = True
                    if self.shared.get(entry.key) is entry:
                        del self.shared[entry.key]

                browser.on("disconnected", gone)
                self.shared[key] = entry
            entry.owners.add(owner)
            entry.active += 1
            return entry

    async def release(self, entry: SharedBrowser) -> None:
        entry.active -= 1

    async def close_owner(self, owner: str | None) -> int:
        """Close the shared browsers only ``owner`` used (``None``: all); returns how many were closed."""
        closed = 0
        async with self.lock:
            for key, entry in list(self.shared.items()):
                if owner is not None:
                    entry.owners.discard(owner)
                    if entry.owners or entry.active > 0:
                        continue
                del self.shared[key]
                await _quietly(entry.browser.close(), 15)
                closed += 1
            if owner is None:
                for browser in list(self.own):
                    await _quietly(browser.close(), 15)
                self.own.clear()
            if not self.shared and not self.own and self.playwright is not None:
                pw, self.playwright = self.playwright, None
                await _quietly(pw.stop(), 15)
        return closed


async def _quietly(coro: Coroutine[Any, Any, Any], timeout: float) -> None:
    try:
        await asyncio.wait_for(coro, timeout)
    except Exception:  # closing something already dead or hung: nothing more to do
        pass


_thread: BrowserThread | None = None
_pool: BrowserPool | None = None
_guard = threading.Lock()


def runtime() -> tuple[BrowserThread, BrowserPool]:
    """The process's browser thread and pool, started on first use."""
    global _thread, _pool
    if _thread is None or _pool is None:
        with _guard:
            if _thread is None or _pool is None:
                _thread, _pool = BrowserThread(), BrowserPool()
                atexit.register(shutdown)
    return _thread, _pool


def release_run(run_id: str) -> int:
    """Close the shared browsers used only by run ``run_id`` (the ``run_finished`` hook)."""
    if _thread is None or _pool is None:
        return 0
    try:
        return _thread.run_sync(_pool.close_owner(run_id), timeout=60)
    except Exception:
        return 0


def shutdown() -> None:
    """Close every browser and stop the Playwright driver (atexit; safe to call twice)."""
    global _thread, _pool
    with _guard:
        thread, pool, _thread, _pool = _thread, _pool, None, None
    if thread is None or pool is None:
        return
    try:
        thread.run_sync(pool.close_owner(None), timeout=60)
    except Exception:
        pass
    thread.stop()


def stats() -> dict[str, int]:
    """How many browsers this process launched and how many shared ones are open (tests, benchmarks)."""
    if _pool is None:
        return {"launches": 0, "shared_open": 0, "driver_running": 0}
    return {
        "launches": _pool.launches,
        "shared_open": len(_pool.shared),
        "driver_running": int(_pool.playwright is not None),
    }
