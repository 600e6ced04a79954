"""A pack as a verifiers (0.4+, ``verifiers.v1``) environment: what an exported package
(``agentsynth pack export PACK --format verifiers``) is made of.

verifiers 0.4 loads an environment package by its taskset id: the package's ``__all__`` exports
one ``vf.Taskset`` subclass (and, optionally, the ``vf.Harness`` it runs with). Its runner starts
a harness (a chat loop) that reaches the model through verifiers' interception server and the
environment's tools through MCP servers it launches. Rewards are ``@vf.reward`` methods of the
task, run in the eval process once the agent has stopped.

A world is stateful and must be checked where it lives, so the worlds live in the eval process:

- :class:`PackTask` ``setup`` builds the rollout's fresh world (:class:`~agentsynth_rl.env.AsyncPackEnv`,
  the row's task and seed) in a per-process :class:`Sessions` registry, and puts the session's
  coordinates in the rollout's ``vf.State``;
- :class:`PackToolset`, the MCP server verifiers launches (``python -m agentsynth_rl.verifiers_env``),
  lists the world's own tools (their JSON schemas, unchanged) and forwards each call, with the
  rollout's state, to the registry's loopback HTTP endpoint (bearer token, random session ids);
- the ``verdict`` reward ends the episode with the agent's last reply as the final answer and
  returns the pack's checkers' verdict of the world's end state: 1.0 / 0.0 (``reward="pass"``) or
  the mean checker score (``"score"``). An episode that could not be checked (a broken world, a
  failing checker) raises, so verifiers records an errored rollout instead of a 0.

A task with a simulated user (``user:``) is a conversation, and verifiers' chat loop speaks only
tools: such a rollout's world also offers ``message_user(message)``, whose result is the user's
reply (the user's own tools are not listed); the talk goes on until the user ends it, and the
model's last reply is its last message to the user. A failed simulated user raises (an errored
rollout, not a 0), like a failed world.

:class:`PackHarness` is verifiers' tool-less ``null`` chat loop: the model gets the world's tools
and nothing else (no bash on the host).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.envs.single_agent import SingleAgentEnvConfig
from verifiers.v1.harnesses.null import NullHarness
from verifiers.v1.mcp import SharedToolsetConfig, Toolset

from agentsynth_kernel import to_builtins

from .env import AsyncPackEnv, resolve_pack, reward_of
from .grpo import dataset_rows
from .loop import on_loop

logger = logging.getLogger(__name__)

#: seconds a world may stay open without a call before the registry closes it (a rollout that died)
IDLE_SECONDS = 3600.0


# --- the rollout's state, shared by the task (eval process) and the tool server -------------------


class PackState(vf.State):
    """Where this rollout's world is: the registry's URL, its token and the session id."""

    resources_url: str = ""
    token: str = ""
    session: str = ""
    timeout: float = 300.0


# --- the tool server (its own process, launched by verifiers) -------------------------------------


class PackToolset(Toolset[SharedToolsetConfig, PackState]):
    """The world's tools over MCP: listed from, and forwarded to, the rollout's world."""

    TOOL_PREFIX: ClassVar[str | None] = None  # the model sees the world's own tool names

    def register(self, mcp: Any) -> None:
        # MCPServer's protocol handlers call these public methods: replacing them keeps the
        # world's own tool catalogue (JSON schemas as the world declares them) per rollout.
        server = cast(Any, mcp)
        server.list_tools = self._with_state(self.list_tools)
        server.call_tool = self._with_state(self.call_tool)

    _client: Any = None

    async def _post(self, what: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        state = self.state
        if not state.session:
            raise ValueError("no agentsynth world for this call (the rollout's state names no session)")
        if self._client is None:  # one keep-alive connection pool for the server's life (its one loop)
            self._client = httpx.AsyncClient(timeout=None)
        response = await self._client.post(f"{state.resources_url}/sessions/{state.session}/{what}", json=body,
                                           headers={"Authorization": f"Bearer {state.token}"},
                                           timeout=state.timeout + 30)
        if response.status_code != 200:
            raise RuntimeError(f"agentsynth world: HTTP {response.status_code}: {response.text[:500]}")
        return cast(dict[str, Any], response.json())

    async def list_tools(self) -> list[Any]:
        from mcp.types import Tool

        data = await self._post("tools", {})
        return [Tool(name=t["name"], description=t.get("description") or None,
                     input_schema=t.get("parameters") or {"type": "object", "properties": {}})
                for t in data["tools"]]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        from mcp.types import CallToolResult, TextContent

        data = await self._post("call", {"name": name, "arguments": arguments or {}})
        return CallToolResult(content=[TextContent(type="text", text=data["content"])], is_error=bool(data["error"]))


# --- the worlds (the eval process) ------------------------------------------------------------------


class Sessions:
    """The rollouts' worlds in this process, and the loopback endpoint the tool server calls.

    Everything runs on agentsynth-rl's event loop (:mod:`agentsynth_rl.loop`), where the worlds'
    episodes live; callers on other loops go through :func:`~agentsynth_rl.loop.on_loop`."""

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(32)
        self.url = ""
        self.envs: dict[str, AsyncPackEnv] = {}
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.last_used: dict[str, float] = {}
        self._runner: Any = None
        self._packs: dict[str, Any] = {}

    async def start(self) -> None:
        from aiohttp import web

        if self._runner is not None:
            return
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_post("/sessions/{sid}/tools", self._tools)
        app.router.add_post("/sessions/{sid}/call", self._call)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        self.url, self._runner = f"http://{host}:{port}", runner

    async def stop(self) -> None:
        """Close every world still open and the endpoint."""
        for sid in list(self.envs):
            await self._close(sid)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def pack(self, ref: str) -> Any:
        if ref not in self._packs:
            self._packs[ref] = resolve_pack(ref)
        return self._packs[ref]

    async def open(self, data: PackData, timeout: float) -> str:
        """A fresh world for one rollout: the row's task, split and seed."""
        await self._reap()
        pack = self.pack(data.pack)
        if data.pack_hash and pack.content_hash != data.pack_hash:
            logger.warning("pack %r: content hash %s differs from the exported %s (the installed pack changed)",
                           pack.id, pack.content_hash, data.pack_hash)
        env = AsyncPackEnv(pack, split=data.split, reward=data.reward, max_steps=data.max_steps, timeout=timeout,
                           message_tool=True)
        await env.reset(seed=data.seed, options={"task_id": data.task_id})
        sid = uuid.uuid4().hex
        self.envs[sid] = env
        self.last_used[sid] = time.monotonic()
        return sid

    async def finish(self, sid: str, answer: str) -> dict[str, Any]:
        """End the rollout with ``answer`` and return the verdict (once: the world is closed)."""
        env = self.envs.get(sid)
        if env is None and sid not in self.outcomes:
            raise RuntimeError(f"no agentsynth world {sid!r} (never opened, or already scored)")
        try:
            if sid not in self.outcomes:
                assert env is not None
                self.outcomes[sid] = await env.finish(answer)
            info = self.outcomes.pop(sid)
        finally:
            await self._close(sid)
        result = info["result"]
        scored = info["scored"]
        return {"task_id": info["task_id"], "split": info["split"], "seed": info["seed"], "status": info["status"],
                "scored": scored, "error": info["error"], "error_kind": info["error_kind"],
                "reward": reward_of(result.verdicts, result.scores, env.reward_mode if env else "pass", 0.0)
                if scored else None,
                "verdicts": info["verdicts"], "steps": info["steps"], "provenance": to_builtins(info["provenance"]),
                "tool_calls": [to_builtins(c) for c in (result.trajectory.tool_calls if result.trajectory else [])]}

    async def _close(self, sid: str) -> None:
        env = self.envs.pop(sid, None)
        self.last_used.pop(sid, None)
        if env is not None:
            await env.close()

    async def _reap(self) -> None:
        now = time.monotonic()
        for sid, used in list(self.last_used.items()):
            if now - used > IDLE_SECONDS:
                logger.warning("closing agentsynth world %s: no call for %.0f s", sid, now - used)
                self.outcomes.pop(sid, None)
                await self._close(sid)

    def _session(self, request: Any) -> tuple[str, AsyncPackEnv | None]:
        from aiohttp import web

        if not secrets.compare_digest(request.headers.get("Authorization", ""), f"Bearer {self.token}"):
            raise web.HTTPUnauthorized(text="bad token")
        sid = request.match_info["sid"]
        if sid not in self.envs:
            raise web.HTTPNotFound(text=f"no world {sid!r}")
        self.last_used[sid] = time.monotonic()
        return sid, self.envs[sid]

    async def _tools(self, request: Any) -> Any:
        from aiohttp import web

        _, env = self._session(request)
        assert env is not None
        return web.json_response({"tools": [{"name": t.name, "description": t.description, "parameters": t.parameters}
                                            for t in env.tool_specs]})

    async def _call(self, request: Any) -> Any:
        from aiohttp import web

        sid, env = self._session(request)
        assert env is not None
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(text="expected a JSON body {name, arguments}") from None
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            raise web.HTTPBadRequest(text="expected a JSON body {name, arguments}")
        if env.done:
            return web.json_response({"content": "error: the episode is over (the step limit was reached, or "
                                                 "the user ended the conversation)", "error": True})
        episode = env.episode
        assert episode is not None
        traj = episode.trajectory
        observation, _, terminated, truncated, info = await env.step(
            {"tool": body["name"], "arguments": body.get("arguments") or {}})
        last = traj.steps[-1].observation if traj.steps else None
        if terminated or truncated:  # the world ended the episode or the step limit was reached
            self.outcomes[sid] = info
        return web.json_response({"content": observation, "error": bool(last is not None and last.error)})


_SESSIONS: Sessions | None = None
_START_LOCK = asyncio.Lock()


async def sessions() -> Sessions:
    """This process's registry, started on first use (on agentsynth-rl's loop)."""
    global _SESSIONS
    async with _START_LOCK:
        if _SESSIONS is None:
            registry = Sessions()
            await registry.start()
            _SESSIONS = registry
    return _SESSIONS


# --- the taskset --------------------------------------------------------------------------------------


class PackData(vf.TaskData):
    """One row: which pack (registered name or path, and its content hash), task, split, seed."""

    pack: str
    pack_hash: str = ""
    task_id: str
    split: str
    seed: int
    tier: str | int | None = None
    reward: Literal["pass", "score"] = "pass"
    max_steps: int = 30


class PackTaskConfig(vf.TaskConfig):
    timeout: float = Field(300.0, gt=0)
    """Seconds for any one world call (reset, tool call, check)."""


class PackTask(vf.Task[PackData, PackState, PackTaskConfig]):
    """One rollout in a fresh world; the reward is the checkers' verdict of its end state."""

    @property
    def key(self) -> str:
        return f"{self.data.task_id}@{self.data.seed}"

    async def setup(self, trace: vf.Trace, runtime: Any) -> None:
        registry = await on_loop(sessions())
        sid = await on_loop(registry.open(self.data, self.config.timeout))
        state = cast(PackState, trace.state)
        state.resources_url, state.token, state.session = registry.url, registry.token, sid
        state.timeout = self.config.timeout

    @vf.stop
    async def step_limit(self, trace: vf.Trace) -> bool:
        # the world stops running tools at max_steps; this stops a model that keeps calling them
        return trace.num_turns > self.data.max_steps + 1

    @vf.reward(weight=1.0)
    async def verdict(self, trace: vf.Trace) -> float:
        """The pack's checkers on the world's end state (the last reply is the final answer)."""
        state = cast(PackState, trace.state)
        registry = await on_loop(sessions())
        outcome = await on_loop(registry.finish(state.session, trace.last_reply))
        trace.info["agentsynth"] = outcome
        if not outcome["scored"]:
            raise RuntimeError(f"task {outcome['task_id']!r} could not be checked ({outcome['error_kind']} error): "
                               f"{outcome['error']}")
        trace.record_metric("agentsynth_passed", float(outcome["status"] == "passed"))
        trace.record_metric("agentsynth_steps", float(outcome["steps"]))
        return float(outcome["reward"])


class PackTasksetConfig(vf.TasksetConfig):
    split: Literal["train", "test", "all"] = "train"
    """Which tasks to serve: the train split unless you ask for test (held out) or all."""
    repeat: int = Field(1, ge=1)
    """Rows per task, each with its own world seed."""
    seed: int = 0
    """Base of the rows' world seeds (same base, same seeds)."""
    reward: Literal["pass", "score"] = "pass"
    """pass: 1.0 if every checker passed, else 0.0; score: the mean checker score."""
    max_steps: int = Field(30, ge=1)
    """Tool calls per episode (a task's own max_steps wins)."""
    tools: SharedToolsetConfig = SharedToolsetConfig()
    task: PackTaskConfig = PackTaskConfig()


class PackTaskset(vf.Taskset[PackTask, PackTasksetConfig]):
    """The pack's tasks of one split; an exported package subclasses it and names its pack."""

    PACK: ClassVar[str] = ""
    """A registered pack name, or a path relative to the subclass's module (``PACK_IS_PATH``)."""
    PACK_IS_PATH: ClassVar[bool] = False
    PACK_HASH: ClassVar[str] = ""

    @classmethod
    def pack_ref(cls) -> str:
        if not cls.PACK:
            raise ValueError(f"{cls.__name__}: PACK is not set (an exported package names its pack)")
        if cls.PACK_IS_PATH:
            import sys

            module = sys.modules[cls.__module__]
            return str((Path(cast(str, module.__file__)).parent / cls.PACK).resolve())
        return cls.PACK

    @classmethod
    def toolsets(cls, config: PackTasksetConfig) -> list[Toolset]:
        return [PackToolset(config.tools)]

    def load(self) -> Iterator[PackTask]:
        config = self.config
        ref = self.pack_ref()
        pack = resolve_pack(ref)
        for row in dataset_rows(pack, split=config.split, repeat=config.repeat, seed=config.seed):
            system = next((m["content"] for m in row["prompt"] if m["role"] == "system"), None)
            user = "\n\n".join(m["content"] for m in row["prompt"] if m["role"] == "user")
            task = next(t for t in pack.tasks if t.id == row["task_id"])
            yield PackTask(PackData(id=f"{row['task_id']}@{row['seed']}", name=row["task_id"], prompt=user,
                                    system_prompt=system or None, pack=ref, pack_hash=self.PACK_HASH or "",
                                    task_id=row["task_id"], split=row["split"], seed=row["seed"], tier=row["tier"],
                                    reward=config.reward, max_steps=task.max_steps or config.max_steps),
                           config.task)


class PackHarness(NullHarness):
    """verifiers' tool-less chat loop: the model gets the world's tools (over MCP) and nothing else."""


class PackEnvConfig(SingleAgentEnvConfig):
    """One agent seat; its chat loop runs as a local subprocess by default (it executes no code:
    the world's tools are its only tools), where verifiers' default is a remote sandbox."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class PackEnv(vf.Env[PackEnvConfig]):
    """The single-agent episode over a pack's taskset (verifiers' SingleAgentEnv, local by default)."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await agents.agent.run(task)


def load_environment(taskset_id: str, **kwargs: Any) -> Any:
    """The ``vf.Env`` for an exported package: ``kwargs`` are the taskset's config
    (``split``, ``repeat``, ``seed``, ``reward``, ``max_steps``, ``task={"timeout": ...}``)."""
    config = vf.resolve_env_config({"taskset": {"id": taskset_id, **kwargs}})
    return vf.load_environment(config)


if __name__ == "__main__":  # verifiers launches the tool server as `python -m <the toolset's module>`
    PackToolset.run()
