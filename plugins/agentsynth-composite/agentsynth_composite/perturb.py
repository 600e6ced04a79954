"""Perturbed siblings of composite tasks, for ``pack audit``: a child world relabels itself.

Each world of the task is offered, in order, to the plugins' ``perturb_task`` hook as a pack of
that world alone (see :func:`~agentsynth_composite.exploits.project_pack`); the first sibling a
child's plugin returns is lifted back into the composite: that world's relabelled spec replaces
it, the instruction is the relabelled one, and every checker's parameters go through the same
relabelling (the pack's oracle is relabelled by the kit the same way, its code for the other
worlds included). So the sql world's id relabelling shows whether a memorised composite
transcript still passes.
"""

from __future__ import annotations

from typing import Any

import attrs

from agentsynth_kernel import get_host
from agentsynth_kernel.testing.adversarial import PerturbedTask, relabel_data, sibling_pack

from .exploits import project_pack, task_world_specs


def perturb_composite_task(pack: Any, task: Any, seed: int, host: Any = None) -> PerturbedTask | None:
    worlds = task_world_specs(pack, task)
    if not worlds:
        return None
    host = host or get_host()
    for name, spec in worlds.items():
        projected = project_pack(pack, name, spec)
        child_task = projected.tasks[[t.id for t in pack.tasks].index(task.id)]
        sibling = host.pm.hook.perturb_task(pack=projected, task=child_task, seed=seed)
        if sibling is None:
            continue
        relabel = sibling.relabel
        env = dict(task.environment)
        raw = dict(pack.task_environment(task).params.get("worlds") or {})
        raw[name] = dict(sibling.task.environment)
        env["worlds"] = raw
        lifted = attrs.evolve(task, instruction=sibling.task.instruction,
                              checkers=[attrs.evolve(c, params=relabel_data(c.params, relabel)) for c in task.checkers],
                              environment=env)
        return PerturbedTask(sibling_pack(pack, lifted), lifted, relabel)
    return None
