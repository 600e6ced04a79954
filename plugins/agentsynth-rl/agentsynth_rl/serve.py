"""A pack as an OpenEnv environment: openenv-core's server (FastAPI, one environment per
WebSocket session) over :class:`~agentsynth_rl.env.AsyncPackEnv`, and a typed client.

``agentsynth rl serve PACK`` runs it; OpenEnv's own clients drive it (``GenericEnvClient``
with dicts, or :class:`PackEnvClient` with the typed action and observation).

A task with a simulated user plays as in the gym env: an ``answer`` goes to the user, whose reply
is the observation (``speaker == "user"``, ``done`` false) until the user ends the talk; then the
reward is the verdict. A failed simulated user ends the episode unscored (``user_failed``,
``error_kind == "user"``, reward 0).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from agentsynth_kernel import Pack, PluginHost, get_host, to_builtins

from .actions import ActionError
from .env import AsyncPackEnv, resolve_pack, split_tasks
from .loop import on_loop, run_sync


class PackAction(Action):
    """One turn: ``tool`` + ``arguments``, OpenAI-shaped ``tool_calls``, or a final ``answer``."""

    tool: str | None = Field(default=None, description="The tool to call")
    arguments: dict[str, Any] | str = Field(default_factory=dict, description="Its arguments (object or JSON text)")
    tool_calls: list[dict[str, Any]] | None = Field(default=None, description="OpenAI tool calls (parallel)")
    answer: str | None = Field(default=None, description="The final answer (ends the episode), or, on a task "
                               "with a simulated user, a message to the user (whose reply comes back)")

    def to_step(self) -> Any:
        given = [self.tool is not None, self.tool_calls is not None, self.answer is not None]
        if sum(given) != 1:
            raise ActionError("give exactly one of 'tool' (with 'arguments'), 'tool_calls' or 'answer'")
        if self.answer is not None:
            return {"answer": self.answer}
        if self.tool_calls is not None:
            return {"role": "assistant", "tool_calls": self.tool_calls}
        return {"tool": self.tool, "arguments": self.arguments}


class PackObservation(Observation):
    """What the agent sees, plus what a trainer needs (the verdict once ``done``)."""

    content: str = ""
    task_id: str = ""
    split: str = ""
    seed: int | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list, description="OpenAI tool schemas (at reset)")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="chat messages (at reset)")
    tool_messages: list[dict[str, Any]] = Field(default_factory=list)
    status: str = ""
    verdicts: list[dict[str, Any]] = Field(default_factory=list)
    error: str = ""
    error_kind: str = ""
    provenance: dict[str, Any] = Field(default_factory=dict)
    multi_turn: bool = Field(default=False, description="the task is a conversation with a simulated user")
    speaker: str = Field(default="", description="who produced this content: world (tool results) or user")
    user_failed: bool = Field(default=False, description="the simulated user failed: unscored, not the agent's fault")
    user_usage: dict[str, Any] = Field(default_factory=dict, description="what the simulated user spent")


class PackOpenEnv(Environment[PackAction, PackObservation, State]):
    """One session's episodes over a pack; every session has its own instance and world."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, pack: Pack, *, host: PluginHost | None = None, **options: Any):
        super().__init__()
        self.core = AsyncPackEnv(pack, host=host, **options)
        self._state = State()

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None,
                          task_id: str | None = None, **kwargs: Any) -> PackObservation:
        if kwargs:
            raise ValueError(f"reset: unknown parameter(s) {', '.join(sorted(kwargs))}; accepted: seed, episode_id, task_id")
        content, info = await on_loop(self.core.reset(seed=seed, options={"task_id": task_id} if task_id else None))
        self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        episode = self.core.episode
        return PackObservation(content=content, task_id=info["task_id"], split=info["split"], seed=info["seed"],
                               tools=info["tools"], messages=info["messages"], done=False, reward=None,
                               multi_turn=episode is not None and episode.task.user is not None, speaker="user")

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> PackObservation:
        return run_sync(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

    async def step_async(self, action: PackAction, timeout_s: float | None = None, **kwargs: Any) -> PackObservation:
        content, reward, terminated, truncated, info = await on_loop(self.core.step(action.to_step()))
        self._state.step_count += 1
        done = terminated or truncated
        obs = PackObservation(content=content, task_id=info["task_id"], split=info["split"], seed=info["seed"],
                              tool_messages=info["tool_messages"], done=done, reward=reward if done else 0.0,
                              multi_turn=self.core.user is not None, speaker=info["from"],
                              user_usage=info.get("user_usage") or {})
        if done:
            obs.user_failed = info["user_failed"]
            obs.status, obs.error, obs.error_kind = info["status"], info["error"], info["error_kind"]
            obs.verdicts = info["verdicts"]
            obs.provenance = to_builtins(info["provenance"])
        return obs

    def step(self, action: PackAction, timeout_s: float | None = None, **kwargs: Any) -> PackObservation:
        return run_sync(self.step_async(action, timeout_s=timeout_s))

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        pack = self.core.pack
        return EnvironmentMetadata(name=f"agentsynth:{pack.id}", version=pack.version,
                                   description=pack.description or f"agentsynth pack {pack.id!r}")

    def close(self) -> None:
        run_sync(self.core.close())


def make_app(pack: Pack | str | Path, *, split: str = "train", max_concurrent_envs: int = 64,
             host: PluginHost | None = None, **options: Any) -> Any:
    """The FastAPI app serving ``pack`` (``split`` tasks only) as an OpenEnv environment."""
    host = host or get_host()
    pack_obj = resolve_pack(pack, host)
    split_tasks(pack_obj, split)  # fail now, not at the first session, on a split with no tasks
    AsyncPackEnv(pack_obj, split=split, host=host, **options)  # same for bad options

    def factory() -> PackOpenEnv:
        return PackOpenEnv(pack_obj, split=split, host=host, **options)

    return create_app(factory, PackAction, PackObservation, env_name=f"agentsynth-{pack_obj.id}",
                      max_concurrent_envs=max_concurrent_envs)


class PackEnvClient(EnvClient[PackAction, PackObservation, State]):
    """OpenEnv client for an agentsynth pack server (``async with PackEnvClient(base_url=...)``)."""

    def _step_payload(self, action: PackAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True, exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[PackObservation]:
        obs = PackObservation(**payload.get("observation", {}), done=payload.get("done", False),
                              reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)
