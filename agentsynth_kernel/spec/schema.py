"""The records a pack.yaml and a run spec are structured into: ComponentSpec, Task, Pack, Budget, RunSpec.

The classes are public as ``agentsynth_kernel.spec.<Name>`` (their ``__module__`` says so, for
reprs, pickles and the generated reference). No ``from __future__ import annotations`` here: the
annotations are evaluated now, so resolving them never needs this module's namespace.
"""

import functools
import re
from pathlib import Path
from typing import Any

import attrs

SPLITS = ("train", "test")
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

# --- schema ---------------------------------------------------------------------------------------


@attrs.frozen
class ComponentSpec:
    """``{type: NAME, ...params}`` in YAML (or just ``NAME``): which component, built with what."""

    type: str
    params: dict[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.params}


@attrs.frozen
class Budget:
    """A hard cap on what the run may spend; ``None`` = no cap."""

    usd: float | None = None
    tokens: int | None = None


@attrs.frozen
class UserSpec:
    """The simulated user of a multi-turn task (``user:``; see :mod:`agentsynth_kernel.user`).

    ``instructions`` are what the user knows and wants, never shown to the agent. The user is played
    by a ``script`` of turns (it ends the talk after the last) or by any ``policy`` (an ``llm`` with
    its own model; it ends the talk by writing ``stop``). ``tools``: world tools only the user may
    call (dual control). ``checks``: checkers run on the user's side of the talk, rules the
    simulator must keep. ``budget``: what the user may spend per episode.
    """

    instructions: str = ""
    script: list[str] | None = None
    policy: ComponentSpec | None = None
    max_turns: int = 10
    stop: str = "###STOP###"
    tools: list[str] = attrs.field(factory=list)
    checks: list[ComponentSpec] = attrs.field(factory=list)
    budget: Budget = attrs.field(factory=Budget)


@attrs.frozen
class Task:
    """One task of a pack: an instruction for the agent and checkers on the world's end state."""

    id: str
    instruction: str
    checkers: list[ComponentSpec] = attrs.field(factory=list)
    split: str = "test"
    tier: str = ""
    environment: dict[str, Any] = attrs.field(factory=dict)
    max_steps: int | None = None
    metadata: dict[str, Any] = attrs.field(factory=dict)
    # a multi-turn task: the instruction is the user's opening message, and this user answers
    user: UserSpec | None = None


@attrs.frozen
class Pack:
    """A scenario pack: one environment, its tasks, and optionally an oracle.

    ``environment`` params are shared by all tasks; a task's ``environment:``
    mapping is merged over them. ``checkers`` here apply to every task.
    """

    id: str
    tasks: list[Task]
    environment: ComponentSpec | None = None
    description: str = ""
    version: str = "1"
    oracle: str | None = None
    system_prompt: str = ""
    checkers: list[ComponentSpec] = attrs.field(factory=list)
    metadata: dict[str, Any] = attrs.field(factory=dict)
    # A pack over a world with no state to read (a stateless server, a Q&A API) declares that its
    # tasks are checked on the answer: `pack validate` then accepts answer checkers alone, and the
    # robustness gate (canned, stuffed and echoed answers) is what vouches for them.
    answer_checked: bool = False
    # set by the loader, not from YAML
    base_dir: Path = attrs.field(default=Path("."), init=False)
    source: str = attrs.field(default="", init=False)
    content_hash: str = attrs.field(default="", init=False)
    _task_envs: dict[int, tuple[Task, ComponentSpec]] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    def task_environment(self, task: Task) -> ComponentSpec:
        """The pack's environment with the task's overrides merged in: the same object for every
        episode of the task, so what is derived from it (a structured spec) is derived once."""
        cached = self._task_envs.get(id(task))
        if cached is None or cached[0] is not task:
            base = self.environment or ComponentSpec("", {})
            merged = {**base.params, **task.environment}
            env_type = merged.pop("type", base.type)
            cached = self._task_envs[id(task)] = (task, ComponentSpec(env_type, merged))
        return cached[1]

    def task_checkers(self, task: Task) -> list[ComponentSpec]:
        return [*self.checkers, *task.checkers]

    @functools.cached_property  # asked once per episode by the oracle policy; it stats a file
    def oracle_path(self) -> Path | None:
        if self.oracle:
            return self.base_dir / self.oracle
        default = self.base_dir / "oracle.py"
        return default if default.is_file() and self.source.endswith("pack.yaml") else None




@attrs.frozen
class RunSpec:
    """What ``agentsynth run spec.yaml`` executes.

    Either ``pack`` (a registered name or a path) or inline ``tasks`` with an
    ``environment``. Each selected task runs ``trials`` times.
    """

    policy: ComponentSpec
    pack: str | None = None
    tasks: list[Task] | None = None
    environment: ComponentSpec | None = None
    oracle: str | None = None
    name: str = ""
    split: str = "all"
    only: list[str] = attrs.field(factory=list)
    trials: int = 1
    seed: int = 0
    concurrency: int = 4
    timeout: float = 300.0
    max_steps: int = 30
    judge: ComponentSpec | None = None
    export: list[ComponentSpec] = attrs.field(factory=list)
    budget: Budget = attrs.field(factory=Budget)
    run_dir: str | None = None
    # A generation spec: the named generator synthesises new tasks / trajectories from the pack
    # (the policy, if given, is its default teacher); the plugin that registered it runs it.
    generate: ComponentSpec | None = None
    # Where episodes run (None: in this process); not part of what an episode does, so it may
    # change between sessions of one run (a run started locally can resume on a cluster).
    executor: ComponentSpec | None = None


for _cls in (ComponentSpec, UserSpec, Task, Pack, Budget, RunSpec):
    _cls.__module__ = "agentsynth_kernel.spec"
del _cls
