"""Checkers that name the world they read: any existing checker, run against one child world.

``{type: composite, world: db, checker: {type: sql, query: ..., expect: ...}}`` builds the inner
checker through the kernel's registry and calls it with the child environment of world ``db``
(never the composite, never another world) and a projection of the trajectory onto that world:
only the steps that called ``db``'s tools, with their names as the child knows them
(``sql_query``, not ``db__sql_query``), and ``db``'s own tools and first observation. So a checker of
the child's plugin works unchanged, and cannot be pointed at another world by the agent: the
world is fixed by the pack.

The pack gate's idea of a checker that reads the world's end state (``world_state``) is declared
per checker class, so it cannot follow the inner checker of one spec. Hence two names:
``composite`` wraps checkers that read the world's end state (the gate counts it as one), and
``composite_answer`` wraps those that do not (``sql_answer`` reads the world for the expected
value but decides on the agent's answer); each refuses an inner checker of the other kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import (
    ComponentSpec,
    InvalidValue,
    Step,
    ToolCall,
    ToolSpec,
    Trajectory,
    Verdict,
    build,
    check_component,
    get_host,
    is_world_state,
)

from .env import SEPARATOR, world_name_problem


def reads_world_state(cspec: ComponentSpec, host: Any = None) -> bool:
    """Does this checker read the world's end state? The kernel's rule, the one ``pack validate``
    applies (``world_state_for(params)`` included, so a composite inside a composite is judged by
    what it wraps); an unknown type reads nothing."""
    return is_world_state(cspec, host or get_host())


def _world_validator(instance: Any, attribute: Any, value: str) -> None:
    problem = world_name_problem(value)
    if problem:
        raise InvalidValue(f"world: {problem}")


def _inner_validator(world_state: bool) -> Any:
    def validate(instance: Any, attribute: Any, value: ComponentSpec) -> None:
        host = get_host()
        problems = check_component("checker", value, "checker", host)
        if problems:
            raise InvalidValue("; ".join(problems))
        if reads_world_state(value, host) != world_state:
            if world_state:
                raise InvalidValue(f"checker: {value.type!r} does not read the world's end state: wrap it in "
                                   "'composite_answer' instead (or, if it reads only the trajectory, list it "
                                   "directly among the task's checkers)")
            raise InvalidValue(f"checker: {value.type!r} reads the world's end state: wrap it in 'composite' instead")

    return validate


@attrs.frozen
class CompositeCheckSpec:
    """``{type: composite, world: NAME, checker: {type: ..., ...}}``."""

    world: str = attrs.field(validator=_world_validator)
    checker: ComponentSpec = attrs.field(validator=_inner_validator(True))


@attrs.frozen
class CompositeAnswerCheckSpec:
    """``{type: composite_answer, world: NAME, checker: {type: ..., ...}}``."""

    world: str = attrs.field(validator=_world_validator)
    checker: ComponentSpec = attrs.field(validator=_inner_validator(False))


def project_trajectory(trajectory: Trajectory, world: str, env: Any = None) -> Trajectory:
    """The trajectory as world ``world`` saw it: its own tool calls under their own names, the
    answers, its own tools and first observation. ``metadata`` is the same dict (a checker that
    notes something there is heard)."""
    prefix = world + SEPARATOR
    steps = []
    for step in trajectory.steps:
        action = step.action
        if isinstance(action, ToolCall):
            if not action.name.startswith(prefix):
                continue
            action = ToolCall(action.name[len(prefix):], action.arguments, id=action.id)
            step = Step(action, step.observation, step.turn, step.duration_s, step.thought, step.usage, step.invalid)
        steps.append(step)
    child = getattr(env, "worlds", {}).get(world) if env is not None else None
    if child is not None:
        tools = list(child.tools)
        first = child.first.content if child.first is not None else ""
    else:
        tag = f"[world {world}] "
        tools = [ToolSpec(t.name[len(prefix):], t.description.removeprefix(tag), t.parameters, t.read_only)
                 for t in trajectory.tools if t.name.startswith(prefix)]
        first = trajectory.initial_observation
    return Trajectory(trajectory.task_id, trajectory.instruction, steps, tools, first, trajectory.system_prompt,
                      trajectory.metadata, trajectory.schema_version)


class CompositeChecker:
    """Runs one checker against one world of a composite environment (see the module docstring)."""

    world_state = True

    @staticmethod
    def world_state_for(params: dict[str, Any]) -> bool:
        """Per spec: as the inner checker (read by ``pack validate`` once the kernel asks this)."""
        inner = params.get("checker")
        if isinstance(inner, str):
            inner = {"type": inner}
        if not isinstance(inner, dict) or not isinstance(inner.get("type"), str):
            return False
        return reads_world_state(ComponentSpec(inner["type"], {k: v for k, v in inner.items() if k != "type"}))

    def __init__(self, spec: CompositeCheckSpec | CompositeAnswerCheckSpec, base_dir: Path | None = None,
                 task: Any = None, pack: Any = None, run: Any = None) -> None:
        self.world = spec.world
        self.inner = build("checker", spec.checker, base_dir=base_dir, task=task, pack=pack, run=run)
        self.kind = spec.checker.type

    async def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        worlds = getattr(env, "worlds", None)
        if not isinstance(worlds, dict) or not callable(getattr(env, "call_in", None)):
            raise TypeError(f"the composite checker needs the 'composite' environment, got {type(env).__name__}")
        if self.world not in worlds:
            raise ValueError(f"composite checker ({self.kind}): no world {self.world!r} in this task's environment "
                             f"(worlds: {', '.join(worlds)})")
        child = env.world(self.world)
        verdict = await env.call_in(self.world, self.inner.check, child, project_trajectory(trajectory, self.world, env))
        if not isinstance(verdict, Verdict):
            raise TypeError(f"checker {self.kind!r} returned {type(verdict).__name__}, not a Verdict")
        return Verdict(f"{self.world}.{verdict.checker}", verdict.passed, verdict.score,
                       f"[world {self.world}] {verdict.detail}", verdict.data)


class CompositeAnswerChecker(CompositeChecker):
    """The same for an inner checker that decides on the answer (``world_state`` false)."""

    world_state = False
