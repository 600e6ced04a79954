"""Pack validation as a library: every gate ``agentsynth pack validate`` runs, for a plugin or a
script to call (a generator validating the pack it wrote, a CI job).

The gates: ``schema``, ``unique-ids``, ``world-state-checkers`` (every task has a checker that
reads the world's end state — see :func:`is_world_state`), ``oracle`` (100 %), ``determinism``
(same seed, same trajectories), ``floors`` (``noop``, ``random``, ``claim_success`` pass nothing)
and ``robustness`` (the adversarial kit farms nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

FLOOR_POLICIES = ("noop", "random", "claim_success")
TRAJECTORY_CHECKERS_PLUGIN = "builtins"  # the kernel's own checkers read the trajectory, not the world


@attrs.define
class Gate:
    """One gate's outcome: ``pass``, ``fail`` (with the problems) or ``skip`` (with why)."""

    name: str
    status: Literal["pass", "fail", "skip"] = "pass"
    problems: list[str] = attrs.field(factory=list)
    note: str = ""

    def fail(self, problem: str) -> None:
        self.status = "fail"
        self.problems.append(problem)



def is_world_state(cspec: Any, host: Any) -> bool:
    """Does this checker read the world's end state? A checker class says so with ``world_state``,
    or, when that depends on its parameters (a checker wrapping another), with
    ``world_state_for(params)``; otherwise the kernel's own checkers (trajectory only) do not and
    plugin checkers do."""
    try:
        reg = host.get("checker", cspec.type)
    except KeyError:
        return False
    decide = getattr(reg.factory, "world_state_for", None)
    if callable(decide):
        return bool(decide(cspec.params))
    declared = getattr(reg.factory, "world_state", None)
    if declared is not None:
        return bool(declared)
    return bool(reg.plugin != TRAJECTORY_CHECKERS_PLUGIN)


def _run(pack: Any, policy: str, *, seed: int, trials: int, concurrency: int, timeout: float) -> Sequence[Any]:
    from .engine import execute
    from .spec import ComponentSpec, RunSpec

    spec = RunSpec(policy=ComponentSpec(policy), trials=trials, seed=seed, concurrency=concurrency,
                   timeout=timeout)
    return asyncio.run(execute(spec, pack)).results


def _why(result: Any, limit: int = 300) -> str:
    text: str = result.why
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_difference(a: Any, b: Any) -> str:
    from .records import to_json

    if a.status != b.status:
        return f"status {a.status} vs {b.status}"
    ta, tb = a.trajectory, b.trajectory
    if ta is None or tb is None:
        return "one run has no trajectory"
    if ta.initial_observation != tb.initial_observation:
        return "the first observation differs"
    for i, (sa, sb) in enumerate(zip(ta.steps, tb.steps, strict=False)):
        if to_json(sa.action) != to_json(sb.action):
            return f"step {i}: the action differs"
        if to_json(sa.observation) != to_json(sb.observation):
            return f"step {i}: the observation differs"
    if len(ta.steps) != len(tb.steps):
        return f"{len(ta.steps)} vs {len(tb.steps)} steps"
    if ta.final_answer != tb.final_answer:
        return "the final answer differs"
    return ""


def validate_pack(ref: str | Path, *, seed: int = 0, random_trials: int = 3, concurrency: int = 4,
                  timeout: float = 60.0, min_robustness: float = 1.0) -> tuple[Any, list[Gate]]:
    """Run every gate on a pack; returns (pack or None, gates)."""
    from .errors import SpecError
    from .plugins import get_host
    from .spec import check_pack, load_pack

    host = get_host()
    names = ("schema", "unique-ids", "world-state-checkers", "oracle", "determinism", "floors", "robustness")
    gates = {n: Gate(n) for n in names}

    def skip_rest(after: str, why: str) -> None:
        for n in names[names.index(after) + 1:]:
            if gates[n].status == "pass" and not gates[n].problems:
                gates[n].status, gates[n].note = "skip", why

    try:
        pack = load_pack(ref, host=host, validate=False)
    except SpecError as exc:
        for message in exc.messages:
            gates["schema"].fail(f"{exc.source}: {message}")
        skip_rest("schema", "the pack does not load")
        return None, list(gates.values())
    for problem in check_pack(pack, host):
        gates["unique-ids" if "duplicate task id" in problem else "schema"].fail(f"{pack.source}: {problem}")
    for task in pack.tasks:
        checks = pack.task_checkers(task)
        if not checks:
            gates["world-state-checkers"].fail(f"task {task.id!r}: has no checkers")
        elif pack.answer_checked:
            gates["world-state-checkers"].note = ("the pack declares answer_checked: its tasks are checked on the "
                                                  "answer, vouched for by the robustness gate")
        elif not any(is_world_state(c, host) for c in checks):
            kinds = ", ".join(c.type for c in checks)
            gates["world-state-checkers"].fail(
                f"task {task.id!r}: no checker reads the world's end state (only {kinds}, which read the "
                "trajectory); add one that checks the outcome"
            )
    if gates["schema"].status == "fail" or gates["unique-ids"].status == "fail":
        skip_rest("world-state-checkers", "fix the schema / ids first")
        return pack, list(gates.values())

    opts: dict[str, Any] = {"seed": seed, "concurrency": concurrency, "timeout": timeout}
    tasks = {t.id: t for t in pack.tasks}
    # oracle: 100 %
    oracle_first: dict[str, Any] = {}
    if pack.oracle_path is None or not pack.oracle_path.is_file():
        gates["oracle"].fail("the pack has no oracle (add oracle.py next to pack.yaml, or 'oracle: FILE')")
        gates["determinism"].note = "checked with the random policy only (no oracle)"
    else:
        oracle_first = {r.task_id: r for r in _run(pack, "oracle", trials=1, **opts)}
        for task_id in tasks:
            r = oracle_first[task_id]
            if not r.passed:
                gates["oracle"].fail(f"task {task_id!r}: the oracle does not pass ({r.status}): {_why(r)}")
    # determinism: the same seed twice -> identical trajectories
    pairs: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if oracle_first:
        pairs.append(("oracle", oracle_first, {r.task_id: r for r in _run(pack, "oracle", trials=1, **opts)}))
    random_runs = _run(pack, "random", trials=random_trials, **opts)
    random_first = {r.task_id: r for r in random_runs if r.trial == 0}
    pairs.append(("random", random_first, {r.task_id: r for r in _run(pack, "random", trials=1, **opts)}))
    for policy, first, second in pairs:
        for task_id in tasks:
            diff = _first_difference(first[task_id], second[task_id])
            if diff:
                gates["determinism"].fail(f"task {task_id!r}: policy {policy}: two runs with seed {seed} differ: {diff}")
    # floors: 0 % for noop, random, claim_success, and no environment crash under them
    floor_results = {"random": random_runs}
    crashes: list[str] = []
    for policy in FLOOR_POLICIES:
        if policy not in floor_results:
            floor_results[policy] = _run(pack, policy, trials=1, **opts)
    for policy in FLOOR_POLICIES:
        for r in floor_results[policy]:
            if r.passed:
                gates["floors"].fail(
                    f"task {r.task_id!r}: passes under the {policy} policy (trial {r.trial}); its checkers "
                    "do not depend on the agent's work"
                )
            elif r.status == "error" and r.error_kind in ("environment", "checker"):
                crashes.append(f"task {r.task_id!r}: {policy} policy: {_why(r, 160)}")
    if crashes:  # not a gate of its own: worth knowing, but a world may legitimately refuse garbage
        gates["floors"].note = (f"warning: {len(crashes)} floor episode(s) crashed the environment or a checker "
                                f"instead of getting an error observation, e.g. {crashes[0]}")
    # robustness: the adversarial kit farms nothing (or no more than --min-robustness allows)
    from .audit import audit_pack

    report = audit_pack(pack, host=host, seed=seed, timeout=timeout, concurrency=concurrency)
    for entry in report.tasks:
        if not entry.robust:
            gates["robustness"].problems.append(f"task {entry.task_id!r}: {audit_problem(entry)}")
    gates["robustness"].note = (f"robustness {report.robustness:.0%} over {len(report.exploits)} attempts per task "
                                f"(minimum {min_robustness:.0%})")
    if report.robustness < min_robustness or any(e.host_problems for e in report.tasks):
        gates["robustness"].status = "fail"
    return pack, list(gates.values())


def audit_problem(entry: Any) -> str:
    """Why a task is not robust: who farmed it, what leaked, what of the host was touched."""
    parts = []
    if entry.farmed_by:
        parts.append("passed by " + ", ".join(entry.farmed_by))
    parts += entry.leaks + [f"host touched: {p}" for p in entry.host_problems] + entry.notes
    return "; ".join(parts)
