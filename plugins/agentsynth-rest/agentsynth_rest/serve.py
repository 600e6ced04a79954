"""``python -m agentsynth_rest.serve --app REF --world DIR --seed N [--args JSON]``: one app in a process of its own.

Prints ``listening PORT`` once the server accepts connections on 127.0.0.1, then serves until killed.
That line is all its stdout carries: the app's own output goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path


def _die_with_parent() -> None:
    """Exit when the agentsynth process that started this one is gone (killed, crashed): the
    server runs in a session of its own, so nothing else would stop it."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="agentsynth-rest-parent-watch").start()


def main() -> int:
    parser = argparse.ArgumentParser(prog="agentsynth_rest.serve")
    parser.add_argument("--app", required=True)
    parser.add_argument("--base-dir", required=True)
    parser.add_argument("--world", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--args", default="{}", help="the world's app_args, as JSON")
    args = parser.parse_args()
    _die_with_parent()
    # stdout carries the handshake line only: what the app prints (at import, in its factory, per
    # request) goes to stderr, so a print before the server listens is not taken for the answer
    handshake = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import uvicorn

    from agentsynth_kernel import import_object

    from .server import build_app

    factory = import_object(args.app, base_dir=Path(args.base_dir))
    app = build_app(factory, Path(args.world), args.seed, json.loads(args.args))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # see server.Slot
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    config = uvicorn.Config(app, lifespan="off", interface="asgi3", log_config=None, log_level="critical", access_log=False,
                            loop="asyncio", http="h11", ws="none", server_header=False, date_header=False,
                            proxy_headers=False, limit_concurrency=64)
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.002)
        handshake.write(f"listening {sock.getsockname()[1]}\n")
        handshake.flush()
        await task

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
