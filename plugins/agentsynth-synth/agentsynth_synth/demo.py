"""``python -m agentsynth_synth.demo [--port 8766]``: a scripted stand-in for real models, for the
offline demo of the ``challenger`` generator over the sql ``core`` pack (the kernel's
ScriptedLLMServer, a real OpenAI-compatible HTTP server on 127.0.0.1).

It answers by model name: the **challenger** proposes a price change for a product of the shop
(for every second task it first proposes one the seed already satisfies, which the ``noop`` check
rejects) and gives short advice when asked to reflect; a solver whose model name ends in
``weak`` answers without touching the database; any other solver runs the UPDATE the request
asks for. Not a model: a way to see the loop, the run directory and the report without a GPU or
an API key. The solvers act in the real SQLite world; the pack's checkers decide.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
from typing import Any

from agentsynth_kernel.testing import Reply, ScriptedLLMServer, reply, tool_calls

# (sku, name, price in the seed in cents, the new price in cents)
PRODUCTS = [("LMP-01", "Desk Lamp", 5600, 5900), ("KET-01", "Electric Kettle", 4500, 4200),
            ("CHR-01", "Office Chair", 18900, 19900), ("PAN-01", "Frying Pan", 3800, 3500),
            ("NTB-01", "Notebook", 450, 500), ("MUG-01", "Ceramic Mug", 1200, 1350)]
REQUEST = re.compile(r"Set the price of the (.+?) \(([A-Z]+-\d+)\) to \$(\d+)\.(\d\d)")


def _first_user(request: dict[str, Any]) -> str:
    return next((m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user"), "")


def _turn(request: dict[str, Any]) -> int:
    return sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")


def _task(sku: str, name: str, cents: int) -> str:
    return json.dumps({
        "instruction": f"Set the price of the {name} ({sku}) to ${cents // 100}.{cents % 100:02d}.",
        "checkers": [{"type": "sql", "query": f"SELECT price_cents FROM products WHERE sku = '{sku}'",
                      "expect": cents}],
        "environment": {"allowed_changes": {"products": {"update": ["price_cents"], "where": f"sku = '{sku}'"}}},
    })


def demo_handler(request: dict[str, Any]) -> Reply:
    model = str(request.get("model", ""))
    user = _first_user(request)
    if model.endswith("challenger"):
        if user.startswith("A task written for AI agents"):  # the reflector's prompt
            return reply("Ask for a change the seed does not already have, with the exact new value.")
        number = int((re.search(r"Write task #(\d+)", user) or re.search(r"(\d+)", "1")).group(1))  # type: ignore[union-attr]
        sku, name, seeded, new = PRODUCTS[(number - 1) % len(PRODUCTS)]
        if number % 2 == 0 and _turn(request) == 0:  # already true in the seed: noop passes, rejected
            return reply(_task(sku, name, seeded))
        return reply(_task(sku, name, new))
    if _turn(request) > 0 or model.endswith("weak"):
        return reply("Done.")
    m = REQUEST.search(user)
    if m is None:
        return reply("I cannot tell what to change.")
    cents = int(m.group(3)) * 100 + int(m.group(4))
    return tool_calls(("sql_execute", {"sql": f"UPDATE products SET price_cents = {cents} WHERE sku = '{m.group(2)}'"}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentsynth_synth.demo", description=__doc__)
    parser.add_argument("--port", type=int, default=8766, help="0 picks a free port")
    args = parser.parse_args(argv)
    server = ScriptedLLMServer(handler=demo_handler, port=args.port, log_requests=False).start()
    print(f"listening on {server.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
        sys.exit(0)


if __name__ == "__main__":
    main()
