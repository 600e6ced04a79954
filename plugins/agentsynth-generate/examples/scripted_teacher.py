"""A scripted stand-in teacher model on 127.0.0.1, so the README's examples run offline with no key.

It is a real OpenAI-compatible HTTP server (the kernel's ScriptedLLMServer) answering each of the
generator's roles with a fixed, plausible reply: agent/executor call get_weather for the city named
in the request and then answer, the tool simulator returns a forecast, the semantic judge approves, the coder
runs a line of Python, the planner plans, the reviewer approves, back-translation writes a query for the chain.
Use a real model instead with ``--model local`` (the embedded model) or any model string.

    python examples/scripted_teacher.py --port 8765
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from typing import Any

from agentsynth_kernel.testing import Reply, ScriptedLLMServer, reply, tool_calls

CITIES = ("Lisbon", "Oslo", "Porto", "Rome", "Kyoto")


def _city(text: str) -> str:
    return next((c for c in CITIES if c in text), "Lisbon")


def handler(request: dict[str, Any]) -> Reply:
    messages = request["messages"]
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    if "simulate a software tool" in system:
        args = json.loads(messages[1]["content"]).get("arguments", {})
        return reply(json.dumps({"city": args.get("city", "Lisbon"), "forecast": "sunny", "temp_c": 21}))
    if "check training data" in system:
        return reply('{"satisfied": true, "reason": "the calls and the answer fit the request"}')
    if "write training data" in system:
        chain = json.loads(messages[1]["content"].split("\nThe request should")[0])
        city = chain[0]["arguments"].get("city", "Lisbon")
        return reply(json.dumps({"query": f"Can you {' and '.join(c['tool'].replace('_', ' ') for c in chain)} for {city}?",
                                 "answer": f"Done for {city}: it will be sunny."}))
    if "planner of a team" in system:
        return reply("1. Call get_weather for the city. 2. Answer with the forecast.")
    if "reviewer of a team" in system:
        return reply("APPROVE: the forecast answers the request")
    user = " ".join(str(m.get("content") or "") for m in messages if m["role"] == "user")
    if "solves tasks by writing Python" in system:  # code_execution: the sandbox runs this for real
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if results:
            return reply(f"The computation printed: {results[-1].strip()[:200]}")
        return tool_calls(("python_exec", {"code": f"nights = 2\nprint(f'{_city(user)}: {{nights * 24}} hours booked')"}),
                          content="I will compute it in Python.")
    if any(m["role"] == "tool" for m in messages):
        return reply(f"It will be sunny in {_city(user)}, around 21 C.")
    days = re.search(r"(\d+) days", user)
    args = {"city": _city(user), **({"days": int(days.group(1))} if days else {})}
    return tool_calls(("get_weather", args), content=f"I will check the forecast for {args['city']}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ScriptedLLMServer(handler=handler, port=args.port, log_requests=False).start()
    print(f"listening on {server.base_url}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
