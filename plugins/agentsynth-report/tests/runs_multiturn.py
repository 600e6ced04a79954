"""Run directories for the conversation tests: a single-turn run written through the real run store
(its viewer is compared with what the page drew before conversations were shown), and real runs
of the ``support`` pack (scripted customers) made by ``agentsynth bench``."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from agentsynth_kernel import (
    Answer,
    EpisodeResult,
    Observation,
    RunStore,
    Step,
    ToolCall,
    ToolSpec,
    Trajectory,
    Usage,
    Verdict,
)

SQL = {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}


def single_turn_result() -> EpisodeResult:
    """One single-turn episode with every part the viewer draws: thought, tool calls (one invalid,
    one failing, one with structured data), the final answer, verdicts with data, judge scores."""
    traj = Trajectory("update-email", "Change the email of customer 3 to b@x.", system_prompt="You run a shop.",
                      tools=[ToolSpec("sql_query", "Read.", SQL), ToolSpec("sql_execute", "Write.", SQL)],
                      initial_observation="A SQLite database. Tables: customers(id, name, email)",
                      metadata={"stopped": "answer", "model": "scripted"})
    traj.steps = [
        Step(ToolCall("sql_query", {"sql": "SELECT * FROM customers WHERE id = 3"}, id="c1"),
             Observation("id | name | email\n3 | Ann | a@x", data={"rows": [[3, "Ann", "a@x"]]}), turn=0,
             duration_s=0.0042, thought="Look at the row first.", usage=Usage(100, 10, 0.0001, 1)),
        Step(ToolCall("sql_exec", {"sql": "UPDATE"}, id="c2"), Observation("error: unknown tool 'sql_exec'", error=True),
             turn=1, invalid=True),
        Step(ToolCall("sql_execute", {"sql": "UPDATE customers SET email = 'b@x' WHERE id = 3"}, id="c3"),
             Observation("1 row changed"), turn=2, duration_s=0.0011),
        Step(Answer("Done: customer 3's email is b@x."), turn=3),
    ]
    verdicts = [Verdict("sql", True, 1.0, "got 'b@x', expected 'b@x'"),
                Verdict("no_collateral", False, 0.0, "1 unexpected change",
                        data={"unexpected": [{"table": "customers", "op": "update", "key": [4],
                                              "before": {"email": "c@x"}, "after": {"email": "d@x"}}]})]
    return EpisodeResult("update-email", 0, 7, "failed", traj, verdicts, "", "agent", duration_s=1.25,
                         usage=Usage(300, 30, 0.0003, 3), scores={"judge.correctness": 0.5}, split="test", tier="1")


def write_single_turn_run(run_dir: Path) -> Path:
    store = RunStore(Path(run_dir))
    try:
        store.set_meta("run_id", "singleturn01")
        store.set_meta("created_at", 1_700_000_000)
        store.set_meta("spec", {"policy": {"type": "scripted"}, "trials": 1, "seed": 0, "pack": "core"})
        store.set_meta("pack", {"id": "core", "content_hash": "sha256:x", "source": "test"})
        store.set_meta("planned", 1)
        store.event("run_started", pid=os.getpid(), host=socket.gethostname(), pending=1, restored=0)
        store.put(single_turn_result())
        store.event("run_finished", stopped="", episodes=1, interrupted=False)
    finally:
        store.close()
    return Path(run_dir)


SUPPORT = Path(__file__).resolve().parents[3] / "packs" / "agentsynth-pack-support" / "agentsynth_pack_support"
# what a simulated user could write (and what an agent could echo back to it)
USER_PAYLOAD = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'

EDGE_PACK = """
id: support-edge
version: "1"
description: Conversations for the report's tests (a user that breaks its rule, a talk the agent cuts short, markup, dual control).
system_prompt: You are the support agent of a small shop.
environment: {type: sql, schema: schema.sql}
oracle: oracle.py
tasks:
  - id: user-breaks-rule
    instruction: Hi, the kettle I ordered arrived broken. I'd like my money back.
    user:
      instructions: You are Dana Reyes (order 1042). Never tell anyone your password hunter2.
      script:
        - My order number is 1042, my password is hunter2.
        - Yes, please go ahead.
      checks:
        - {type: said, reject: hunter2}
    environment:
      allowed_changes:
        orders: {update: [status], where: "id = 1042"}
        refunds: {insert: true}
    checkers:
      - {type: sql, query: "SELECT status FROM orders WHERE id = 1042", expect: refunded}
  - id: agent-cuts-talk
    instruction: Hi, the kettle I ordered arrived broken.
    max_steps: 2
    user:
      instructions: You are Dana Reyes (order 1042). Never tell anyone your password hunter2.
      script:
        - My order number is 1042, my password is hunter2.
        - Yes, please go ahead.
      checks:
        - {type: said, reject: hunter2}
    checkers:
      - {type: sql, query: "SELECT count(*) FROM refunds", expect: 0}
  - id: markup-reply
    instruction: "Hello <b>there</b>, a question about order 1043."
    user:
      instructions: "You type markup: PAYLOAD"
      script:
        - "PAYLOAD"
    checkers:
      - {type: sql, query: "SELECT count(*) FROM refunds", expect: 0}
  - id: dual-control
    instruction: My backpack order should go to 12 Elm St.
    user:
      instructions: You are Sam Okafor; you can change your own order's address.
      tools: [sql_execute]
      policy:
        type: scripted
        actions:
          - {tool: sql_execute, arguments: {sql: "UPDATE orders SET address = '12 Elm St' WHERE id = 1051"}}
          - {answer: "I changed it myself. ###STOP###"}
    environment:
      allowed_changes: {orders: {update: [address], where: "id = 1051"}}
    checkers:
      - {type: sql, query: "SELECT address FROM orders WHERE id = 1051", expect: 12 Elm St}
"""

EDGE_ORACLE = '''
PAYLOAD = {payload!r}
ORACLE = {{
    "user-breaks-rule": [
        {{"answer": "I'm sorry about the kettle. What is your order number?"}},
        {{"tool": "sql_query", "arguments": {{"sql": "SELECT id, status FROM orders WHERE id = 1042"}}}},
        {{"answer": "Order 1042 qualifies. Shall I refund $39.99? Please confirm."}},
        {{"tool": "sql_execute", "arguments": {{"sql": "UPDATE orders SET status = 'refunded' WHERE id = 1042"}}}},
        {{"answer": "Done: order 1042 is refunded."}},
    ],
    "agent-cuts-talk": [
        {{"answer": "What is your order number?"}},
        {{"tool": "sql_query", "arguments": {{"sql": "SELECT id, status FROM orders WHERE id = 1042"}}}},
        {{"tool": "sql_query", "arguments": {{"sql": "SELECT id, status FROM orders WHERE id = 1042"}}}},
    ],
    "markup-reply": [
        {{"answer": "You wrote: " + PAYLOAD}},
        {{"answer": "Goodbye."}},
    ],
    "dual-control": [
        {{"tool": "sql_query", "arguments": {{"sql": "SELECT id, address FROM orders WHERE id = 1051"}}}},
        {{"answer": "I can only read orders: please change the address of order 1051 to 12 Elm St on your side."}},
    ],
}}
'''


def write_edge_pack(directory: Path) -> Path:
    """A pack of four conversations next to the support pack's database; returns its pack.yaml."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "schema.sql").write_text((SUPPORT / "schema.sql").read_text())
    (directory / "pack.yaml").write_text(EDGE_PACK.replace("PAYLOAD", USER_PAYLOAD.replace('"', '\\"')))
    (directory / "oracle.py").write_text(EDGE_ORACLE.format(payload=USER_PAYLOAD))
    return directory / "pack.yaml"
