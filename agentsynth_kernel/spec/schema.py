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

    # The registered name of the component (`agentsynth plugins` lists them).
    type: str
    # Everything else in the mapping: the component's own keys (see its page).
    params: dict[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.params}


@attrs.frozen
class Budget:
    """A hard cap on what the run may spend; ``None`` = no cap."""

    # Dollars the run's LLM calls may cost.
    usd: float | None = None
    # Tokens (prompt + completion) the run's LLM calls may use.
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

    # What the user knows and wants (the simulator's brief); never shown to the agent.
    instructions: str = ""
    # The user's turns, in order (deterministic); the user ends the talk after the last one.
    script: list[str] | None = None
    # Or who plays the user: any policy, e.g. `{type: llm, model: ...}` (gets the simulator's prompt).
    policy: ComponentSpec | None = None
    # Replies the user may give before the talk ends anyway.
    max_turns: int = 10
    # The word a policy-played user writes to end the talk.
    stop: str = "###STOP###"
    # World tools only the user may call (dual control): the agent must talk the user through them.
    tools: list[str] = attrs.field(factory=list)
    # Checkers run on the user's side of the talk: rules the simulator must keep (a broken one is `error_kind: user`).
    checks: list[ComponentSpec] = attrs.field(factory=list)
    # What the user may spend per episode (`usd`, `tokens`); more is `error_kind: user`.
    budget: Budget = attrs.field(factory=Budget)


@attrs.frozen
class Task:
    """One task of a pack: an instruction for the agent and checkers on the world's end state."""

    # Unique within the pack: a letter or digit, then letters, digits, `_`, `.`, `-`. Results and
    # `only:` name tasks by it.
    id: str
    # What the agent is asked to do (its first user message).
    instruction: str
    # Checkers of this task, run after the pack-wide ones; all must pass.
    checkers: list[ComponentSpec] = attrs.field(factory=list)
    # `train` or `test`; a run selects one with `split:`.
    split: str = "test"
    # A free label (a name or a number: `easy`, `3`) that reports group results by.
    tier: str = ""
    # Keys merged over the pack's `environment:` for this task (may change `type:`).
    environment: dict[str, Any] = attrs.field(factory=dict)
    # This task's step limit (default: the run's `max_steps`).
    max_steps: int | None = None
    # Free data for checkers, generators and exporters; not shown to the agent.
    metadata: dict[str, Any] = attrs.field(factory=dict)
    # a multi-turn task: the instruction is the user's opening message, and this user answers
    user: UserSpec | None = None


@attrs.frozen
class Pack:
    """A scenario pack: one environment, its tasks, and optionally an oracle.

    ``environment`` params are shared by all tasks; a task's ``environment:``
    mapping is merged over them. ``checkers`` here apply to every task.
    """

    # The pack's name in results, reports and run directory names (the same characters as a task
    # id).
    id: str
    # The tasks (at least one), each as below.
    tasks: list[Task]
    # The world every task runs in; a task's `environment:` is merged over it.
    environment: ComponentSpec | None = None
    # One line about the pack, for people and reports.
    description: str = ""
    # Travels with every result (with the pack's content hash).
    version: str = "1"
    # The oracle file, relative to pack.yaml (default: `oracle.py` next to it).
    oracle: str | None = None
    # The system message the agent gets in every task.
    system_prompt: str = ""
    # Checkers applied to every task, before the task's own.
    checkers: list[ComponentSpec] = attrs.field(factory=list)
    # Free data for plugins and exporters.
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

    # The agent: a policy (`noop` when `generate:` is given).
    policy: ComponentSpec
    # A registered pack name or a path (file or directory), relative to the spec's folder.
    pack: str | None = None
    # Inline tasks instead of a pack (then `environment:` is needed).
    tasks: list[Task] | None = None
    # The environment of inline tasks (not with `pack:`).
    environment: ComponentSpec | None = None
    # The oracle file of inline tasks.
    oracle: str | None = None
    # The run's name (default: the spec file's stem).
    name: str = ""
    # Which tasks run: `train`, `test` or `all`.
    split: str = "all"
    # Run only these task ids (in pack order).
    only: list[str] = attrs.field(factory=list)
    # Episodes per task (pass^k over the trials).
    trials: int = 1
    # The run's seed; each episode's seed is derived from it, the task id and the trial, the same on
    # every machine.
    seed: int = 0
    # Episodes at once.
    concurrency: int = 4
    # Seconds an episode may take; then it is an `error` of kind `timeout`.
    timeout: float = 300.0
    # Steps an episode may take (a task's `max_steps` overrides it).
    max_steps: int = 30
    # A judge scoring every trajectory (its scores go to `scores`).
    judge: ComponentSpec | None = None
    # Exporters writing the results; each needs `path:`.
    export: list[ComponentSpec] = attrs.field(factory=list)
    # A hard cap on spending; the run stops when it is reached (see `budget:` below).
    budget: Budget = attrs.field(factory=Budget)
    # Where the run store and report go (default: `runs/<time>-<pack>-<policy>`).
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
