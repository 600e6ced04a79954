"""Per-episode reset cost and tool-call latency of the rest world, against the bare work it wraps.

Run: python bench/bench_latency.py [--out bench/results.json] [--n 20]

Medians and p90 in milliseconds, measured in one run with the machine's load recorded before and
after. Bare work: building the tickets app (seeding its SQLite file), starting a uvicorn server in
a thread (and a hypercorn one, when hypercorn is installed: the comparison behind choosing
uvicorn), starting the app in a process of its own, and one raw httpx GET. World: ``reset`` with
the warm pool (the default), with the pool emptied before every reset (a cold server per
episode), and with ``server: subprocess``; tool calls; the two checkers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from agentsynth_kernel import ToolCall, Trajectory, import_object
from agentsynth_rest import server
from agentsynth_rest.checkers import HttpChecker, RestDbChecker
from agentsynth_rest.env import RestEnvironment

PACK = Path(__file__).resolve().parents[1] / "agentsynth_rest" / "packs" / "tickets"


def stats(samples: list[float]) -> dict[str, Any]:
    samples = sorted(samples)
    return {"median_ms": round(statistics.median(samples), 3), "p90_ms": round(samples[int(0.9 * (len(samples) - 1))], 3),
            "n": len(samples)}


def timed(fn: Any, n: int) -> dict[str, Any]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return stats(samples)


async def atimed(fn: Any, n: int) -> dict[str, Any]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return stats(samples)


def hypercorn_start() -> float:
    """A hypercorn server in a thread, until it accepts a connection (ms); then stopped (not timed)."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = config.errorlog = None
    stop: dict[str, Any] = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        stop["loop"] = loop
        stop["event"] = event = asyncio.Event()
        loop.run_until_complete(serve(app, config, shutdown_trigger=event.wait))  # type: ignore[arg-type]

    start = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.001)
    took = (time.perf_counter() - start) * 1000
    stop["loop"].call_soon_threadsafe(stop["event"].set)
    thread.join(5)
    return took


_stops: list[float] = []


def uvicorn_start() -> float:
    """A uvicorn server in a thread (server.Slot), until it accepts a connection (ms); its stop is
    timed apart (``_stops``): without the pool, every episode's close pays it."""
    start = time.perf_counter()
    slot = server.Slot()
    socket.create_connection(("127.0.0.1", slot.port), timeout=1).close()
    took = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    slot.stop()
    _stops.append((time.perf_counter() - start) * 1000)
    return took


def subprocess_start() -> float:
    world = Path(tempfile.mkdtemp())
    start = time.perf_counter()
    proc = server.Subprocess(f"{PACK / 'app.py'}:create_app", PACK, world, 0, 30)
    took = (time.perf_counter() - start) * 1000
    proc.kill()
    return took


def self_timed(fn: Any, n: int) -> dict[str, Any]:
    return stats([fn() for _ in range(n)])


async def bench(n: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    factory = import_object("app.py:create_app", base_dir=PACK)
    results["bare_app_build"] = timed(lambda: server.build_app(factory, Path(tempfile.mkdtemp()), 0), n)
    results["bare_uvicorn_thread_start"] = self_timed(uvicorn_start, n)
    results["bare_uvicorn_thread_stop"] = stats(_stops)
    try:
        import hypercorn  # noqa: F401

        results["bare_hypercorn_thread_start"] = self_timed(hypercorn_start, n)
    except ImportError:
        results["bare_hypercorn_thread_start"] = "hypercorn is not installed"
    results["bare_subprocess_app_start"] = self_timed(subprocess_start, max(3, n // 4))
    slot = server.acquire(server.build_app(factory, Path(tempfile.mkdtemp()), 0))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{slot.port}", trust_env=False) as client:
        await client.get("/tickets/1")
        results["bare_httpx_get_ticket"] = await atimed(lambda: client.get("/tickets/1"), n * 5)
    server.release(slot)

    env: Any = None
    for key, doc in (("reset_warm_pool_document_from_app", None), ("reset_warm_pool", "openapi.yaml")):
        if env is not None:
            await env.close()
        params: dict[str, Any] = {"app": "app.py:create_app", "exclude_operations": ["resetDatabase"]}
        if doc:
            params["openapi"] = doc
        env = RestEnvironment(base_dir=PACK, **params)
        await env.reset(0)
        samples = []
        for _ in range(n):
            await env.close()  # closing the previous episode is not part of a reset: not timed
            start = time.perf_counter()
            await env.reset(0)
            samples.append((time.perf_counter() - start) * 1000)
        results[key] = stats(samples)
    close = []
    for _ in range(n):
        start = time.perf_counter()
        await env.close()
        close.append((time.perf_counter() - start) * 1000)
        await env.reset(0)
    results["close_warm_pool"] = stats(close)

    samples = []
    for _ in range(n):
        await env.close()
        server.shutdown_pool()  # stopping the servers is not part of a reset: not timed (see bare_uvicorn_thread_stop)
        start = time.perf_counter()
        await env.reset(0)
        samples.append((time.perf_counter() - start) * 1000)
    results["reset_cold_server"] = stats(samples)
    await env.reset(0)
    results["step_getTicket"] = await atimed(lambda: env.step(ToolCall("getTicket", {"ticket_id": 1})), n * 5)
    results["step_listTickets_q"] = await atimed(lambda: env.step(ToolCall("listTickets", {"q": "printer"})), n * 5)
    results["step_updateTicket"] = await atimed(
        lambda: env.step(ToolCall("updateTicket", {"ticket_id": 2, "priority": "high"})), n * 5)
    results["step_refused_argument"] = await atimed(lambda: env.step(ToolCall("getTicket", {"ticket_id": "../x"})),
                                                    n * 5)
    traj = Trajectory("t", "x")
    http = HttpChecker(path="/tickets/4", json_path="$.status", equals="open")
    results["check_http"] = await atimed(lambda: http.check(env, traj), n * 2)
    db = RestDbChecker(db="tickets.db", query="SELECT count(*) FROM tickets", equals=20)

    async def db_check() -> None:
        db.check(env, traj)

    results["check_rest_db"] = await atimed(db_check, n * 2)
    await env.close()
    sub = RestEnvironment(base_dir=PACK, app="app.py:create_app", server="subprocess")
    results["reset_subprocess"] = await atimed(lambda: sub.reset(0), max(3, n // 4))
    results["step_getTicket_subprocess"] = await atimed(lambda: sub.step(ToolCall("getTicket", {"ticket_id": 1})),
                                                        n * 5)
    await sub.close()
    server.shutdown_pool()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).with_name("results.json")))
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    load_before = os.getloadavg()
    results = asyncio.run(bench(args.n))
    out = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
                       "load_before": [round(x, 2) for x in load_before],
                       "load_after": [round(x, 2) for x in os.getloadavg()]},
           "notes": "reset_warm_pool: the default (a listening uvicorn server from the pool, a freshly seeded app "
                    "plugged in), the document read from the pack's file; _document_from_app: fetched from the app's "
                    "GET /openapi.json each episode; reset_cold_server: the pool emptied before each reset (a new "
                    "server; its stop, which a close without the pool pays, is bare_uvicorn_thread_stop)",
           **results}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
