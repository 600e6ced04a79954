"""A synthetic run written through the real run store, for the benchmark and tests.

Real stores made by ``agentsynth bench`` are used wherever a pack can produce what is needed;
this stand-in exists for what a local pack cannot: 10,000 episodes with LLM-like transcripts,
costs, judge scores, every failure kind, and a run that looks alive while a test extends it.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path
from typing import Any

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

KINDS = ("agent", "agent", "agent", "environment", "provider", "timeout")
SQL = {"type": "object", "properties": {"sql": {"type": "string", "description": "SQLite SQL. Several statements may "
                                                "be separated by ';'."}}, "required": ["sql"]}
TOOLS = [ToolSpec("sql_query", "Run a read-only SQL query (SELECT, PRAGMA table_info ...) and see the rows.", SQL),
         ToolSpec("sql_execute", "Run SQL that changes the database (INSERT, UPDATE, DELETE, DDL, BEGIN/COMMIT).", SQL)]
SYSTEM = ("You operate the database of an online shop through the tools sql_query (read) and sql_execute (write). "
          "House rules: look before you write, change only what the task asks, keep invoices, payments and stock "
          "consistent, and answer with what you did. ") * 3


def synthetic_result(task: int, trial: int, rng: random.Random, *, p_pass: float, steps: int = 6,
                     judge: bool = True) -> EpisodeResult:
    task_id = f"task-{task:04d}"
    tier = f"tier-{task % 4 + 1}"
    traj = Trajectory(task_id, f"Synthetic task {task}: update the records of customer {task * 7 % 97}.",
                      system_prompt=SYSTEM, tools=TOOLS,
                      initial_observation="A SQLite database. Tables: customers(id, name, email) -- 9 rows")
    for i in range(steps):
        sql = f"SELECT id, name, email FROM customers WHERE id = {rng.randint(1, 99)} AND note LIKE '%{i}%'"
        rows = "\n".join(f"{j} | name-{rng.randint(0, 10**6)} | u{j}@example.org" for j in range(rng.randint(1, 12)))
        traj.steps.append(Step(ToolCall("sql_query", {"sql": sql}, id=f"call_{i}"),
                               Observation(f"id | name | email\n{rows}\n"), turn=i, duration_s=0.001,
                               thought=f"I should look at the rows of step {i} first." if i % 2 == 0 else "",
                               usage=Usage(420 + 30 * i, 40, 0.0002, 1)))
    traj.steps.append(Step(Answer("Done: the record is updated."), turn=steps))
    passed = rng.random() < p_pass
    status, kind, error = "passed", "", ""
    verdicts = [Verdict("sql", passed, float(passed), "" if passed else "got 'old@example.org', expected 'new@example.org'")]
    if not passed:
        kind = rng.choice(KINDS)
        if kind == "agent":
            status = "failed"
            verdicts.append(Verdict("no_collateral", False, 0.0, "1 unexpected change",
                                    data={"unexpected": [{"table": "customers", "op": "update", "key": [3],
                                                          "before": {"email": "a@x"}, "after": {"email": "b@x"}}]}))
        else:
            status, verdicts, error = "error", [], f"{kind} error: RuntimeError: synthetic {kind} failure"
    usage = Usage(sum(420 + 30 * i for i in range(steps)), 40 * steps, 0.0002 * steps, steps)
    scores = {"judge": rng.random(), "judge.correctness": rng.random(), "judge.efficiency": rng.random()} if judge else {}
    return EpisodeResult(task_id, trial, rng.randint(0, 2**32 - 1), status, traj, verdicts, error,
                         "agent" if status == "failed" else kind, duration_s=rng.uniform(0.5, 8.0), usage=usage,
                         scores=scores if status != "error" else {}, split="test", tier=tier)


def write_run(run_dir: Path, *, tasks: int, trials: int, seed: int = 0, skill: float = 0.6, steps: int = 6,
              policy: dict[str, Any] | None = None, pack: str = "synthetic", running: bool = False,
              judge: bool = True, planned: int | None = None) -> Path:
    """A run directory of ``tasks`` x ``trials`` synthetic episodes; ``running`` marks it as being
    executed by this (live) process, as a run in progress is."""
    rng = random.Random(seed)
    store = RunStore(Path(run_dir))
    try:
        policy = policy or {"type": "llm", "model": f"synthetic/skill-{skill}"}
        store.set_meta("run_id", f"synthetic{seed:04d}")
        store.set_meta("created_at", 1_700_000_000 + seed)
        store.set_meta("spec", {"policy": policy, "trials": trials, "seed": seed, "pack": pack})
        store.set_meta("pack", {"id": pack, "content_hash": "sha256:synthetic", "source": "synthetic"})
        store.set_meta("planned", planned or tasks * trials)
        store.event("run_started", pid=os.getpid(), host=socket.gethostname(), pending=tasks * trials, restored=0)
        with store.transaction():
            for task in range(tasks):
                p_pass = min(1.0, max(0.0, rng.gauss(skill, 0.3)))
                for trial in range(trials):
                    store.put(synthetic_result(task, trial, rng, p_pass=p_pass, steps=steps, judge=judge))
        if not running:
            store.event("run_finished", stopped="", episodes=tasks * trials, interrupted=False)
    finally:
        store.close()
    return Path(run_dir)
