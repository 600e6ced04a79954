"""``python -m agentsynth_kernel.testing [--port N] [--latency S] [--content TEXT]``: a load server.

Serves the same answer to every chat-completions request (benchmarks run it in a
separate process, so its CPU is not counted against the client). Prints
``listening on http://127.0.0.1:PORT/v1`` once bound.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from .server import ScriptedLLMServer, echo_handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentsynth_kernel.testing", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    parser.add_argument("--content", default="done")
    args = parser.parse_args(argv)
    server = ScriptedLLMServer(handler=echo_handler(args.content), latency=args.latency, host=args.host,
                               port=args.port, log_requests=False)

    async def run() -> None:
        task = asyncio.ensure_future(server.serve_forever())
        while server._server is None:
            await asyncio.sleep(0.01)
        print(f"listening on {server.base_url}", flush=True)
        await task

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
