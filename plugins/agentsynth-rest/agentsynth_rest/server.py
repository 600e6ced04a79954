"""ASGI apps a pack ships, served on 127.0.0.1 per episode.

Two ways, both uvicorn (its only dependency beyond the kernel's is itself: h11 and click are
already there; hypercorn would add h2, priority, wsproto and taskgroup), measured in
``bench/bench_latency.py``:

- ``thread`` (default): a uvicorn server in a daemon thread of this process, with its own event
  loop, listening on a free port. Servers are kept in a **warm pool**: an episode takes a
  listening server and plugs its own freshly built app into it; ``close`` unplugs the app (every
  later request gets 503) and gives the server back. A reset then costs building the app (seeding
  its state), not starting a server.
- ``subprocess``: ``python -m agentsynth_rest.serve`` per episode, for an app that must not share
  the process (one that blocks its loop, leaks memory or calls ``os._exit``). Killed with its
  process group at close.

An app is ``create_app(world, seed)``: ``world`` is the episode's fresh directory (seeded with the
pack's ``files:``) where the app keeps its state, e.g. a SQLite file that backend checkers read.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

MAX_IDLE = 8  # servers kept warm per process
MAX_BODY = 8 * 2**20  # a request body larger than this is refused by the dispatcher (413)
QUIET_SECONDS = 0.5  # a released server's loop must turn over within this to be pooled


class _BodyTooLarge(Exception):
    """Raised into an app that reads a request body past MAX_BODY."""


class WorldStartError(RuntimeError):
    """The world could not be started; the message says why (an infrastructure failure)."""


def build_app(factory: Any, world: Path, seed: int, args: dict[str, Any] | None = None) -> Any:
    """Call ``factory`` with the context it names (``world``, ``seed``) and the world's ``app_args``."""
    try:
        wanted: Any = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        wanted = {}
    kwargs = {k: v for k, v in (("world", world), ("seed", seed)) if k in wanted}
    kwargs.update(args or {})
    try:
        app = factory(**kwargs)
    except Exception as exc:
        raise WorldStartError(f"the app factory failed: {type(exc).__name__}: {exc}") from exc
    if not callable(app):
        raise WorldStartError(f"the app factory returned {type(app).__name__}, not an ASGI application")
    return app


async def _reply(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class Slot:
    """One listening uvicorn server (in a daemon thread) whose app can be swapped."""

    def __init__(self) -> None:
        import uvicorn

        self.app: Any = None
        self.active = 0  # requests not answered in full yet
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # accepted sockets inherit it: without it an app's two writes (headers, body) wait out the
        # client's delayed ACK, 40 ms per call
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(self._dispatch, host="127.0.0.1", port=self.port, lifespan="off", interface="asgi3", log_config=None,
                                log_level="critical", access_log=False, loop="asyncio", http="h11", ws="none",
                                timeout_keep_alive=5, limit_concurrency=64, server_header=False, date_header=False,
                                proxy_headers=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"agentsynth-rest-{self.port}")
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise WorldStartError(f"uvicorn did not start on 127.0.0.1:{self.port}: {self.error or 'timeout'}")
            time.sleep(0.002)

    def _run(self) -> None:
        async def serve() -> None:
            self.loop = asyncio.get_running_loop()
            await self.server.serve(sockets=[self.sock])

        try:
            asyncio.run(serve())
        except BaseException as exc:  # noqa: BLE001 - reported by the starter
            self.error = exc
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()

    def abandon(self) -> None:
        """Exit without waiting for what is in flight: uvicorn's shutdown waits for open
        connections and running handlers (forever, for one stuck in a long poll), which kept the
        thread, its loop and its port for the life of the process, one per such episode.
        ``force_exit`` skips those waits; asyncio.run then cancels the stuck handler."""
        self.server.should_exit = True
        self.server.force_exit = True

    def quiet(self, seconds: float = QUIET_SECONDS) -> bool:
        """Does the server's loop turn over within ``seconds``? A few turns run what its sockets
        already hold (a request sent before the episode's client closed is dispatched now, to no
        app: 503), so nothing of an episode is left to reach the next one's app. A loop blocked
        by an app (sync work after its answer: no request counts as in flight) does not."""
        loop = self.loop
        if loop is None or not self.alive:
            return False

        async def turns() -> None:
            for _ in range(5):
                await asyncio.sleep(0)

        try:
            future = asyncio.run_coroutine_threadsafe(turns(), loop)
        except RuntimeError:  # the loop is closed
            return False
        try:
            future.result(timeout=seconds)
            return True
        except Exception:  # noqa: BLE001 - a timeout: the loop is stuck
            future.cancel()
            return False

    async def _dispatch(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = self.app
        if scope.get("type") != "http":
            return
        if app is None:
            await _reply(send, 503, b'{"detail": "this world is closed"}')
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > MAX_BODY:
            await _reply(send, 413, b'{"detail": "the request body is too large"}')
            return
        received = 0

        async def bounded_receive() -> dict[str, Any]:
            """A chunked body past MAX_BODY ends the request (413): the app never holds more."""
            nonlocal received
            message: dict[str, Any] = await receive()
            received += len(message.get("body", b""))
            if received > MAX_BODY:
                raise _BodyTooLarge
            return message

        self.active += 1
        started = answered = False

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal started, answered
            if message.get("type") == "http.response.start":
                started = True
            elif message.get("type") == "http.response.body" and not message.get("more_body") and not answered:
                # answered in full: no longer in flight, before the client can see the last byte
                # (counted down when the handler returned, a client that had its answer could
                # close the world first, and the server was dropped as if its app were stuck)
                answered = True
                self.active -= 1
            await send(message)
            if message.get("more_body"):
                # a streaming app whose writes never block (uvicorn waits only once its buffer is
                # full) would hold the loop: the other requests of the world, and the news that
                # its client left (uvicorn drops every later chunk then), wait for it to finish
                await asyncio.sleep(0)

        try:
            await app(scope, bounded_receive, tracked_send)
        except _BodyTooLarge:
            if not started:
                await _reply(send, 413, b'{"detail": "the request body is too large"}')
        except Exception as exc:  # the app's bug is a 500 for the agent, not a dead server
            if not started:
                await _reply(send, 500, f'{{"detail": "internal server error: {type(exc).__name__}"}}'.encode())
        finally:
            if not answered:
                self.active -= 1

    @property
    def alive(self) -> bool:
        return self.thread.is_alive() and not self.server.should_exit

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self.sock.close()


_idle: list[Slot] = []
_lock = threading.Lock()


def acquire(app: Any) -> Slot:
    """A listening server serving ``app``: a warm one from the pool, else a new one."""
    with _lock:
        while _idle:
            slot = _idle.pop()
            if slot.alive:
                slot.app = app
                return slot
    slot = Slot()
    slot.app = app
    return slot


def release(slot: Slot) -> None:
    """Unplug the app (later requests get 503) and keep the server warm for the next episode.

    A server with a request still in flight (not answered in full: an app stuck in a handler the
    agent's call gave up on), or whose loop does not turn over at once (an app blocking it after
    answering, with the agent's later calls waiting in its sockets: they would be dispatched to
    the next episode's app), is not pooled: it is told to exit and dropped without waiting (its
    thread is a daemon), so a hung loop never serves a later episode."""
    slot.app = None
    if slot.alive and slot.active == 0 and slot.quiet():
        with _lock:
            if len(_idle) < MAX_IDLE:
                _idle.append(slot)
                return
    elif slot.alive:
        slot.abandon()
        return
    slot.stop()


def shutdown_pool() -> None:
    with _lock:
        slots, _idle[:] = list(_idle), []
    for slot in slots:
        slot.stop()


def pool_size() -> int:
    with _lock:
        return len(_idle)


class Subprocess:
    """The app in a child process of its own (``python -m agentsynth_rest.serve``)."""

    def __init__(self, ref: str, base_dir: Path, world: Path, seed: int, start_seconds: float,
                 args: dict[str, Any] | None = None) -> None:
        argv = [sys.executable, "-m", "agentsynth_rest.serve", "--app", ref, "--base-dir", str(base_dir),
                "--world", str(world), "--seed", str(seed), "--args", json.dumps(args or {})]
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH",
                                                             "VIRTUAL_ENV", "TMPDIR")}
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, start_new_session=True, cwd=str(world))
        _children.add(self)  # killed at exit if no close did (an episode cancelled mid-reset)
        # stderr (the app's prints too, see serve.py) is read from the start and its tail kept: an
        # app that prints filled the pipe (64 KB) and then blocked in print(), its server with it
        self._err_tail = b""
        self._err_reader = threading.Thread(target=self._read_stderr, daemon=True, name="agentsynth-rest-stderr")
        self._err_reader.start()
        self.port = self._handshake(start_seconds)

    def _read_stderr(self) -> None:
        with contextlib.suppress(Exception):
            assert self.proc.stderr is not None
            fd = self.proc.stderr.fileno()
            while chunk := os.read(fd, 65536):  # what is there, not a full 64 KB: the tail stays current
                self._err_tail = (self._err_tail + chunk)[-2000:]

    def _handshake(self, seconds: float) -> int:
        assert self.proc.stdout is not None
        result: list[bytes] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()),  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        reader.join(seconds)
        line = result[0].decode(errors="replace").strip() if result else ""
        if line.startswith("listening "):
            return int(line.split()[1])
        self._terminate()
        self._err_reader.join(2)
        err = self._err_tail
        self.kill()
        why = "timed out" if not result else f"exited with status {self.proc.returncode}"
        detail = err.decode(errors="replace").strip().splitlines()
        raise WorldStartError(f"the app process {why} before listening ({start_hint(detail)})")

    def _terminate(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)

    def kill(self) -> None:
        self._terminate()
        _children.discard(self)
        self._err_reader.join(2)  # EOF once the process group is gone
        # stderr is closed only once its reader is done: closed under a read, its descriptor
        # number could be reused by another file and read from
        streams = (self.proc.stdout, self.proc.stderr) if not self._err_reader.is_alive() else (self.proc.stdout,)
        for stream in streams:
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()


_children: set[Subprocess] = set()


@atexit.register
def _kill_children() -> None:
    for child in list(_children):
        child.kill()


def start_hint(lines: list[str]) -> str:
    return lines[-1][:500] if lines else "no error output"
