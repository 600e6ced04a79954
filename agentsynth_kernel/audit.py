"""``pack audit``: show that trivial and hostile agents score nothing on a pack before anyone trusts it.

Every task is attacked by the floor policies (noop, random) and by every exploit of the
adversarial kit (the generic ones plus those the world's plugin ships through the
``adversarial_exploits`` hook), each in a fresh world. A task that any attempt passes is
*farmable*; so is a task whose instruction already contains the answer an answer checker looks
for. The pack's robustness is the share of tasks that no attempt farmed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import attrs

from .testing.adversarial import (
    Exploit,
    ExploitOutcome,
    exploits_for,
    finish_attempts,
    leaked_answers,
    run_exploits_async,
    sibling_problems,
)

if TYPE_CHECKING:
    from .plugins import PluginHost
    from .spec import Pack

FLOOR_POLICIES = ("noop", "random")


@attrs.define
class TaskAudit:
    """The attempts against one task and what they achieved."""

    task_id: str
    attempts: int = 0
    farmed_by: list[str] = attrs.field(factory=list)
    host_problems: list[str] = attrs.field(factory=list)
    errors: int = 0  # attempts that ended in an error (not a pass; worth a look if the world crashed)
    leaks: list[str] = attrs.field(factory=list)
    # "" (no sibling for this task), "ok" (the relabelled oracle passes it, the original transcript
    # does not), "memorisable" (the transcript still passes) or "not_isomorphic" (neither): notes
    sibling: str = ""
    notes: list[str] = attrs.field(factory=list)

    @property
    def robust(self) -> bool:
        return not self.farmed_by and not self.host_problems and not self.leaks


@attrs.define
class AuditReport:
    pack: str
    tasks: list[TaskAudit]
    exploits: list[str]
    outcomes: list[ExploitOutcome] = attrs.field(factory=list, repr=False)

    @property
    def robustness(self) -> float:
        """Share of tasks that no attempt farmed (1.0: nothing could be faked)."""
        return sum(t.robust for t in self.tasks) / len(self.tasks) if self.tasks else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "pack": self.pack, "robustness": self.robustness, "exploits": self.exploits,
            "tasks": [{**attrs.asdict(t), "robust": t.robust} for t in self.tasks],
            "farmed": [attrs.asdict(o) for o in self.outcomes if o.farmed],
        }


async def audit_pack_async(pack: Pack, *, host: PluginHost | None = None, seed: int = 0, timeout: float = 60.0,
                           concurrency: int = 4, exploits: list[Exploit] | None = None) -> AuditReport:
    from .episode import EpisodeConfig, run_episode
    from .plugins import get_host
    from .spec import ComponentSpec

    host = host or get_host()
    chosen = exploits if exploits is not None else exploits_for(pack, host)
    outcomes = await run_exploits_async(pack, chosen, seed=seed, timeout=timeout, concurrency=concurrency,
                                        host=host, finish=False)
    gate = asyncio.Semaphore(concurrency)

    async def floor(policy: str, task: Any, trial: int) -> ExploitOutcome:
        async with gate:
            result = await run_episode(host, pack, task, trial, seed + trial,
                                       EpisodeConfig(ComponentSpec(policy), timeout=timeout))
        return ExploitOutcome(f"policy.{policy}", task.id, result.status, result.error_kind, result.error)

    siblings: dict[str, tuple[str, str] | None] = {}
    try:
        outcomes += await asyncio.gather(*(floor(p, t, trial) for p in FLOOR_POLICIES for t in pack.tasks
                                           for trial in range(3 if p == "random" else 1)))
        for task in pack.tasks:  # perturbed siblings, where the world can relabel itself
            siblings[task.id] = await sibling_problems(pack, task, host=host, seed=seed, timeout=timeout)
    finally:
        finish_attempts(host, pack, len(outcomes))
    by_task = {t.id: TaskAudit(t.id) for t in pack.tasks}
    for outcome in outcomes:
        entry = by_task[outcome.task_id]
        entry.attempts += 1
        if outcome.farmed and outcome.exploit not in entry.farmed_by:
            entry.farmed_by.append(outcome.exploit)
        if outcome.host_problem:
            entry.host_problems.append(f"{outcome.exploit}: {outcome.host_problem}")
        if outcome.status == "error":
            entry.errors += 1
    for task_id, problem in leaked_answers(pack, host):
        by_task[task_id].leaks.append(problem)
    for task_id, found in siblings.items():
        if found is not None:
            entry = by_task[task_id]
            # a note, not a farm: whether a replay still passes says as much about how far the
            # world's relabelling reaches (ids it could not tell apart from other data) as about the task
            entry.sibling, problem = found
            if problem:
                entry.notes.append(problem)
    names = [e.name for e in chosen] + [f"policy.{p}" for p in FLOOR_POLICIES]
    return AuditReport(pack.id, list(by_task.values()), names, outcomes)


def audit_pack(pack: Pack, **options: Any) -> AuditReport:
    """:func:`audit_pack_async` for code without an event loop."""
    return asyncio.run(audit_pack_async(pack, **options))
