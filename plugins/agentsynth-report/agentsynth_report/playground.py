"""The playground: one episode of a chosen pack, task and policy in a real world, step by step.

The episode is played by the kernel's episode runner (``run_episode``), so it is exactly what a
benchmark plays. To see the steps while it runs, the chosen policy is wrapped in
:class:`Recorder`, handed to the runner as a ``callable`` policy: before each turn the recorder
publishes the steps the trajectory gained since its last turn, then lets the real policy act.
The steps of the last turn arrive with the episode's result.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import secrets
import time
from pathlib import Path
from typing import Any

from agentsynth_kernel import (
    AgentsynthError,
    ComponentSpec,
    EpisodeConfig,
    EpisodeResult,
    Pack,
    SpecError,
    build,
    get_host,
    how_called,
    load_pack,
    run_episode,
    to_builtins,
)
from agentsynth_kernel import parse_component as parse_policy

# What a page may ask for: code-running policies (``callable``) are refused, since any web page
# the user visits could post to a server on 127.0.0.1.
ALLOWED_POLICIES = ("oracle", "noop", "random", "claim_success", "llm")
MAX_RUNNING = 4
MAX_KEPT = 50

_SESSIONS: dict[str, Session] = {}


class Session:
    """One playground episode: the steps seen so far and, at the end, the result."""

    def __init__(self, pack: Pack, task: Any, policy: ComponentSpec, seed: int, delay: float) -> None:
        self.id = secrets.token_hex(8)
        self.pack, self.task, self.policy, self.seed, self.delay = pack, task, policy, seed, delay
        self.steps: list[dict[str, Any]] = []
        self.first_observation = ""  # what the world showed the agent at reset
        self.status = "running"
        self.result: dict[str, Any] | None = None
        self.started = time.time()
        self.future: asyncio.Task[Any] | None = None

    def publish(self, steps: list[Any]) -> None:
        for step in itertools.islice(steps, len(self.steps), None):
            self.steps.append(to_builtins(step))

    def finish(self, result: EpisodeResult) -> None:
        if result.trajectory is not None:
            self.publish(result.trajectory.steps)
        data = to_builtins(result)
        data.pop("provenance", None)
        self.result = data
        self.status = result.status

    def view(self, since: int) -> dict[str, Any]:
        since = max(0, since)
        return {"id": self.id, "status": self.status, "task": self.task.id, "steps": self.steps[since:],
                "first_observation": self.first_observation,
                "total_steps": len(self.steps), "result": self.result if self.status != "running" else None}


class Recorder:
    """The ``callable`` policy the playground runs: publishes steps, then the real policy acts."""

    def __init__(self, session: str) -> None:
        found = _SESSIONS.get(session)
        if found is None:
            raise AgentsynthError(f"playground session {session!r} is gone")
        self.session = found
        self.inner = build("policy", found.policy, task=found.task, pack=found.pack, base_dir=found.pack.base_dir)
        self.turns = 0

    async def act(self, state: Any) -> Any:
        if not self.turns:
            self.session.first_observation = state.trajectory.initial_observation
        self.session.publish(state.trajectory.steps)
        if self.turns and self.session.delay:
            await asyncio.sleep(self.session.delay)  # let a person watch: an oracle acts in microseconds
        self.turns += 1
        act = self.inner.act
        if how_called(act) != "thread":  # as the engine calls it
            result = act(state)
        else:
            result = await asyncio.to_thread(act, state)
        if inspect.isawaitable(result):
            result = await result
        return result


def parse_playground_policy(text: str) -> ComponentSpec:
    """A policy from the page: a name or ``NAME,key=value,...`` / inline ``{type: ...}``, of an allowed type."""
    text = (text or "").strip()
    if Path(text).suffix in (".yaml", ".yml", ".json"):
        raise SpecError("policy", ["a policy file cannot be named from the playground; give NAME,key=value"])
    cspec = parse_policy(text, option="policy")
    if cspec.type not in ALLOWED_POLICIES:
        raise SpecError("policy", [f"{cspec.type!r} is not available in the playground "
                                   f"(expected one of {', '.join(ALLOWED_POLICIES)})"])
    return cspec


def pack_list() -> list[dict[str, Any]]:
    """Every registered pack with its tasks (a pack that fails to load is listed with its error)."""
    host = get_host()
    out = []
    for name, reg in sorted(host.registry["pack"].items()):
        entry: dict[str, Any] = {"name": name, "description": reg.description, "tasks": []}
        try:
            pack = load_pack(name, host=host)
            entry["tasks"] = [{"id": t.id, "tier": t.tier, "split": t.split, "instruction": t.instruction}
                              for t in pack.tasks]
            entry["oracle"] = pack.oracle_path is not None
        except Exception as exc:  # one broken pack must not hide the others
            entry["error"] = f"{type(exc).__name__}: {exc}"
        out.append(entry)
    return out


class Playground:
    """The sessions of one server."""

    def __init__(self, *, delay: float = 0.4, timeout: float = 120.0, max_steps: int = 30) -> None:
        self.delay, self.timeout, self.max_steps = delay, timeout, max_steps

    def start(self, pack_name: str, task_id: str, policy_text: str, seed: int) -> Session:
        running = sum(1 for s in _SESSIONS.values() if s.status == "running")
        if running >= MAX_RUNNING:
            raise AgentsynthError(f"{running} playground episodes are running; wait for one to finish")
        host = get_host()
        if pack_name not in host.registry["pack"]:
            raise SpecError("pack", [f"unknown pack {pack_name!r}"])
        pack = load_pack(pack_name, host=host)
        task = next((t for t in pack.tasks if t.id == task_id), None)
        if task is None:
            raise SpecError("task", [f"pack {pack_name!r} has no task {task_id!r}"])
        policy = parse_playground_policy(policy_text)
        if policy.type == "oracle" and pack.oracle_path is None:
            raise SpecError("policy", [f"pack {pack_name!r} has no oracle"])
        session = Session(pack, task, policy, seed, self.delay)
        self._evict()
        _SESSIONS[session.id] = session
        config = EpisodeConfig(
            ComponentSpec("callable", {"function": "agentsynth_report.playground:Recorder",
                                       "params": {"session": session.id}}),
            max_steps=self.max_steps, timeout=self.timeout,
        )

        async def play() -> None:
            try:
                result = await run_episode(host, pack, task, 0, seed, config)
                session.finish(result)
            except Exception as exc:  # run_episode records failures; this is a bug, shown not hidden
                session.status = "error"
                session.result = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "verdicts": []}

        session.future = asyncio.get_running_loop().create_task(play())
        return session

    def get(self, session_id: str) -> Session | None:
        return _SESSIONS.get(session_id)

    @staticmethod
    def _evict() -> None:
        done = [s for s in _SESSIONS.values() if s.status != "running"]
        for s in sorted(done, key=lambda s: s.started)[: max(0, len(_SESSIONS) - MAX_KEPT + 1)]:
            _SESSIONS.pop(s.id, None)
