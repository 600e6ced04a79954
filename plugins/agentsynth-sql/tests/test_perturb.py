"""Perturbed siblings of core tasks: ids relabelled in the seed, the task and the checkers; the
relabelled oracle passes, the original transcript (old ids) does not."""

from __future__ import annotations

import asyncio

from agentsynth_kernel import get_host, load_pack
from agentsynth_kernel.testing.adversarial import sibling_problems
from agentsynth_sql.perturb import perturb_sql_task


def _task(pack, task_id):
    return next(t for t in pack.tasks if t.id == task_id)


def test_a_write_task_gets_a_relabelled_sibling_that_a_replay_cannot_pass():
    host = get_host()
    pack = load_pack("core", host=host)
    task = _task(pack, "mark-shipped")
    sibling = perturb_sql_task(pack, task, 0)
    assert sibling.task.instruction == "Order 8005 has left the warehouse. Mark it as shipped."
    assert "8005" in sibling.task.checkers[0].params["query"] and "(8005, 5, 'paid'" in sibling.task.environment["seed"]
    assert sibling.task.environment["allowed_changes"]["orders"]["where"] == "id = 8005"
    assert asyncio.run(sibling_problems(pack, task, host=host, timeout=30)) == ("ok", "")


def test_answer_checked_tasks_get_no_sibling():
    pack = load_pack("core", host=get_host())
    assert perturb_sql_task(pack, _task(pack, "order-total"), 0) is None  # the total does not change with ids
    assert perturb_sql_task(pack, _task(pack, "unknown-order"), 0) is None
