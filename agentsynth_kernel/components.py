"""The component Protocols every plugin implements, and the sync-to-async adapter.

The engine only ever ``await``s these methods. A plugin may implement any of
them as plain ``def``: the engine runs an episode's sync methods on one worker
thread of its own (so a blocking call never stalls other episodes, and thread-bound
objects such as sqlite3 connections work), and awaits async ones on the loop.
:func:`call` is the simple adapter for code outside the engine: it runs a sync
method inline and awaits an async one.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from .records import (
    Action,
    Answer,
    EpisodeResult,
    Observation,
    ToolCall,
    ToolSpec,
    Trajectory,
    Usage,
    Verdict,
)

if TYPE_CHECKING:
    from .episode import EpisodeConfig
    from .plugins import PluginHost
    from .spec import Pack, Task
    from .types import RunInfo


async def call(method: Any, /, *args: Any, **kwargs: Any) -> Any:
    """Call a component method that may be sync or async, and return its result."""
    result = method(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def runs_inline(method: Any) -> Any:
    """Mark a quick, non-blocking sync method so the engine calls it on the event loop instead
    of handing it to the episode's worker thread (a thread hop costs more than such a call).

    Example::

        class Noop:
            @runs_inline
            def act(self, state):
                return Answer("")
    """
    method.__agentsynth_inline__ = True
    return method


@attrs.define
class Turn:
    """What a policy returns when it has more to say than its actions.

    ``actions`` are executed in order (several tool calls = parallel calls of one
    turn); ``usage`` is what producing them cost; ``thought`` is stored with the
    first step; ``rejected`` marks calls that must not run (see below).
    """

    actions: list[Action]
    usage: Usage | None = None
    thought: str = ""
    # index in ``actions`` -> the error the agent sees for a call the policy found malformed (bad
    # JSON, schema-invalid arguments): the kernel records it as an invalid step, in order, and does
    # not execute it
    rejected: dict[int, Observation] = attrs.field(factory=dict)


@attrs.define
class EpisodeState:
    """What a policy sees when it is asked to act.

    ``trajectory`` holds every step so far (with observations), ``observation``
    the latest one. ``rng`` is seeded per episode, so random policies are
    reproducible.
    """

    task: Task
    tools: list[ToolSpec]
    trajectory: Trajectory
    observation: Observation
    seed: int
    rng: random.Random
    steps_left: int

    @property
    def instruction(self) -> str:
        return self.task.instruction


@runtime_checkable
class Environment(Protocol):
    """A seeded world the agent acts in. One instance serves one episode.

    The factory is called with the ``environment:`` parameters of the pack or
    task (and ``base_dir`` if it accepts it, to resolve relative paths).
    """

    def reset(self, seed: int) -> Observation:
        """Build a fresh, isolated world; return what the agent sees first."""
        ...

    def tools(self) -> Sequence[ToolSpec]:
        """The tools the agent may call, with JSON-Schema parameters."""
        ...

    def step(self, call: ToolCall) -> Observation:
        """Run one tool call. A failing tool returns ``Observation(error=True)``, never raises."""
        ...

    def close(self) -> None:
        """Release the world (files, processes, connections)."""
        ...


@runtime_checkable
class Checker(Protocol):
    """Decides pass/fail from the world's end state (``env`` is still open)."""

    def check(self, env: Environment, trajectory: Trajectory) -> Verdict: ...


@runtime_checkable
class Policy(Protocol):
    """The agent. One instance serves one episode, so it may keep state.

    ``act`` returns an Action, a list of Actions (parallel tool calls), or a Turn.
    """

    def act(self, state: EpisodeState) -> Action | list[Action] | Turn: ...


@attrs.define
class JudgeResult:
    """A judge's score in [0, 1], per-dimension scores and a rationale."""

    score: float
    dimensions: dict[str, float] = attrs.field(factory=dict)
    rationale: str = ""
    passed: bool | None = None
    usage: Usage | None = None


@runtime_checkable
class Judge(Protocol):
    """Scores a trajectory on a rubric (the verdicts are given for context)."""

    def score(self, trajectory: Trajectory, verdicts: list[Verdict]) -> JudgeResult: ...


@runtime_checkable
class Generator(Protocol):
    """Synthesises new tasks and/or trajectories."""

    def generate(self) -> AsyncIterator[Any] | Iterator[Any]: ...


@runtime_checkable
class Domain(Protocol):
    """A text-only task family for the challenger loop (no world to act in): documents to ground
    questions in, or problems with a checkable answer.

    The loop asks the domain for grounding ``items()`` (each a dict: a document chunk, a seed
    problem ...), turns one into a challenger prompt (``generation_prompt``), checks what the
    challenger wrote (``validate`` returns problems, empty when fine), poses it to solvers
    (``solver_prompt``, never saying who is weak or strong), audits its quality
    (``audit_prompt``) and scores each attempt (``judge_prompt``; or ``verify`` when the answer is
    checkable: True / False, None for "cannot tell, ask the judge"). ``acceptance`` names the
    default acceptance mode (``rubric``, ``verifiable`` or ``judge``).
    """

    acceptance: str

    def items(self) -> Iterable[dict[str, Any]]: ...

    def generation_prompt(self, item: dict[str, Any], feedback: str = "") -> str: ...

    def validate(self, candidate: dict[str, Any]) -> list[str]: ...

    def solver_prompt(self, candidate: dict[str, Any]) -> str: ...

    def audit_prompt(self, candidate: dict[str, Any]) -> str: ...

    def judge_prompt(self, candidate: dict[str, Any], response: str) -> str: ...

    def verify(self, candidate: dict[str, Any], response: str) -> bool | None: ...


@runtime_checkable
class Exporter(Protocol):
    """Streams episode results to a sink in constant memory; returns the number written."""

    def export(self, results: Iterable[EpisodeResult], path: Path) -> int: ...


@runtime_checkable
class Executor(Protocol):
    """Where a run's episodes execute: this process (the built-in ``local``) or elsewhere (a cluster).

    The engine keeps everything that makes a run a run — the plan, the store, budget stops, hooks,
    resume — and asks the executor only to play one episode, with the same arguments as
    :func:`~agentsynth_kernel.episode.run_episode`; it awaits at most ``concurrency`` of them at once
    (``None``: the spec's ``concurrency``). An executor that holds resources releases them in
    ``aclose()`` (optional), awaited at the end of the run. For a deterministic policy a remote
    result must equal the local one, byte for byte in its trajectory: workers run the same
    ``run_episode`` on a pack and spec rebuilt from ``run``.
    """

    concurrency: int | None

    async def run_episode(self, host: PluginHost, pack: Pack, task: Task, trial: int, seed: int,
                          config: EpisodeConfig, run: RunInfo) -> EpisodeResult: ...


@runtime_checkable
class Importer(Protocol):
    """Reads foreign traces (chat logs, OTel spans ...) as Trajectories, streaming."""

    def read(self, path: Path) -> Iterator[Trajectory]: ...


def normalize_actions(result: Action | list[Action] | Turn | None) -> Turn:
    """Turn whatever a policy returned into a Turn; ``None`` means "no more to do"."""
    if result is None:
        return Turn([Answer("")])
    if isinstance(result, Turn):
        return result
    if isinstance(result, (ToolCall, Answer)):
        return Turn([result])
    if isinstance(result, list) and all(isinstance(a, (ToolCall, Answer)) for a in result):
        return Turn(list(result))
    raise TypeError(
        f"a policy must return a ToolCall, an Answer, a list of them or a Turn, got {type(result).__name__}"
    )
