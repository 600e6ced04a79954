"""Run inside a fresh venv holding only verifiers, agentsynth, agentsynth-sql, agentsynth-rl and
the exported package: evaluate the exported environment with verifiers' own eval CLI
(``vf-eval``) against the kernel's ScriptedLLMServer, and print what verifiers recorded (one JSON
line per trace) for the test to compare with the kernel's verdicts.

    python vf_eval.py TASKSET_ID OUT_DIR [--split train|test] [--names a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from sse_adapter import SSEAdapter

from agentsynth_kernel.testing import ScriptedLLMServer, reply, tool_calls

# what the scripted model does per task (by a phrase of its instruction): tool calls, then a reply
SCRIPTS = {
    "Maya Chen has a new email": ([("sql_execute", {"sql": "UPDATE customers SET email = 'maya@chen.example.org' WHERE id = 6"})],
                                  "Updated Maya Chen's email."),
    "Order 1005 has left": ([("sql_execute", {"sql": "UPDATE orders SET status = 'cancelled' WHERE id = 1005"})],
                            "Order 1005 is marked as shipped."),  # the wrong change: the world says 0
    "email address of our customer Dana": ([("sql_query", {"sql": "SELECT email FROM customers WHERE name = 'Dana Whitfield'"})],
                                           "Her email is dana.whitfield@example.com."),
    "Omar Haddad asked": ([("sql_execute", {"sql": "UPDATE customers SET active = 0 WHERE nonsense"})],
                          "Done, the account is closed."),  # a broken statement: an error observation, then a claim
    "How many orders are still pending": ([], "4"),  # a test task: served only when asked
}


def handler(body: dict) -> object:
    messages = body.get("messages") or []
    user = "\n".join(m.get("content") or "" for m in messages if m.get("role") == "user"
                     if isinstance(m.get("content"), str))
    done = sum(1 for m in messages if m.get("role") == "tool")
    for phrase, (calls, final) in SCRIPTS.items():
        if phrase in user:
            if done < len(calls):
                name, args = calls[done]
                return tool_calls((name, args, f"call_{done}"))
            return reply(final)
    return reply("I cannot help with that.")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("taskset")
    parser.add_argument("out", type=Path)
    parser.add_argument("--split", default=None)
    parser.add_argument("--names", default="")
    args = parser.parse_args()
    with ScriptedLLMServer(handler=handler) as server, SSEAdapter(server.base_url) as adapter:
        cmd = [str(Path(sys.executable).parent / "vf-eval"), args.taskset, "-m", "scripted-model", "--client.base-url", adapter.base_url,
               "--client.api-key-var", "SCRIPTED_KEY", "--no-push", "--no-rich", "--output-dir", str(args.out),
               "--run.dir", "run", "-r", "1", "-c", "4"]
        if args.split:
            cmd += ["--env.taskset.split", args.split]
        names = [n for n in args.names.split(",") if n]
        if names:
            cmd += ["--select.include.names", json.dumps(names)]
        env = {**os.environ, "SCRIPTED_KEY": "not-a-secret"}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        sys.stderr.write(proc.stdout[-6000:] + proc.stderr[-6000:])
        requests = len(server.requests)
    traces = sorted((args.out / "run").rglob("traces.jsonl"))
    print(json.dumps({"returncode": proc.returncode, "requests": requests, "traces": [str(t) for t in traces]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
