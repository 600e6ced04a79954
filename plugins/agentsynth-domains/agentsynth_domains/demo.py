"""``python -m agentsynth_domains.demo [--port 8765]``: a scripted stand-in for real models, for the
offline demo (the kernel's ScriptedLLMServer, a real OpenAI-compatible HTTP server on 127.0.0.1).

It answers by role (read from the system prompt) and model: the challenger writes a recipe
problem with an exact answer; a model whose name ends in ``weak`` gets it wrong (it forgets the
fraction), any other solver gets it right; the auditor passes everything. Not a model: a way to
see the loop, the run directory and the report without a GPU or an API key.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
from fractions import Fraction
from typing import Any

from agentsynth_kernel.testing import Reply, ScriptedLLMServer, reply

from .loop import SYSTEM

_ROLE = {text: role for role, text in SYSTEM.items()}


def demo_handler(request: dict[str, Any]) -> Reply:
    messages = request.get("messages", [])
    system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    user = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    role = _ROLE.get(system.split("\nRules:")[0], "")
    if role == "challenger":
        variant = int((re.search(r"variant (\d+)", user) or re.search(r"(\d+)", "0")).group(1))  # type: ignore[union-attr]
        batches = 3 + len(user) % 5 + variant
        problem = (f"A recipe needs 3/4 cup of sugar per batch. A baker makes {batches} batches and then gives away "
                   "a third of all the sugar he used. How many cups of sugar did he keep?")
        return reply(json.dumps({"problem": problem, "answer": str(Fraction(3, 4) * batches * Fraction(2, 3))}))
    if role == "auditor":
        return reply(json.dumps({"pass": True, "reason": "well posed, one answer"}))
    if role == "solver":
        batches = int((re.search(r"makes (\d+) batches", user) or re.search(r"(\d+)", "1")).group(1))  # type: ignore[union-attr]
        kept = Fraction(3, 4) * batches * Fraction(2, 3)
        weak = str(request.get("model", "")).endswith("weak")
        guess = Fraction(3, 4) * batches if weak else kept
        return reply(f"{batches} batches of 3/4 cup, a third given away.\nanswer: {guess}")
    if role == "judge":
        return reply(json.dumps({"score": 0.5, "rationale": "demo judge"}))
    if role == "mutator":
        return reply(json.dumps({"add": {"challenger": ["Every problem needs at least three steps."]},
                                 "why": "weak solvers should not finish in one step"}))
    if role == "loop_judge":
        return reply(json.dumps({"decision": "accept", "rationale": "the stronger solver is right, the weaker is not"}))
    return reply("Make the problem need one more step.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentsynth_domains.demo", description=__doc__)
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
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
