"""One event loop on a daemon thread, shared by every synchronous wrapper in this plugin.

The kernel's episode machinery is async (worlds may be async, sync worlds run on their own
worker thread). Gymnasium, TRL and OpenEnv call us synchronously, sometimes from a thread that
already runs an event loop (TRL's async tools, FastAPI), where ``asyncio.run`` is not allowed:
so sync calls are submitted to this loop and waited for.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The shared loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            threading.Thread(target=run, name="agentsynth-rl-loop", daemon=True).start()
            ready.wait()
            _loop = loop
    return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the shared loop and return its result (exceptions propagate)."""
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("a synchronous agentsynth-rl call was made from its own event loop; use the async API")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


async def on_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the shared loop from any loop (a server's, a trainer's, ours)."""
    loop = background_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))
