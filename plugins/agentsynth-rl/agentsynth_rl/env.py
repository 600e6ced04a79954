"""A Gymnasium-style environment over any pack: ``reset`` builds a fresh world for one task,
``step`` runs the agent's tool calls in it, and the terminal reward is the checkers' verdict.

The episode is the kernel's own (:class:`agentsynth_kernel.episode.Episode`): the same world
factory, the same observation caps, the same worker thread for sync worlds and the same checkers
as ``agentsynth run``, so a reward here is exactly what the engine would record for the same
actions. :class:`AsyncPackEnv` is the async core (many episodes on one loop, each with its own
world); :class:`PackEnv` is the synchronous ``gymnasium.Env``.

A task with a simulated user (``user:``, see :mod:`agentsynth_kernel.user`) is a conversation:
an Answer goes to the user and the user's reply is the next observation (``info["from"] ==
"user"``), until the user ends the talk; only then do the checkers (the world's and the user's
rules) run. The user's own tools (dual control) are not the agent's. A user that breaks its rules
or fails is the simulator's failure: reward 0, ``truncated``, ``info["user_failed"]``, unscored.
When the agent cut the talk (``max_steps``, or :meth:`AsyncPackEnv.finish` before the user ended
it), a broken user rule is the agent's failure instead (an agent must not dodge its 0 by going
quiet): the only place this env's verdict differs from the engine's.
"""

from __future__ import annotations

import asyncio
import functools
import math
import random
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import gymnasium

from agentsynth_kernel import (
    SPLITS,
    Answer,
    ComponentSpec,
    Episode,
    EpisodeConfig,
    EpisodeResult,
    Observation,
    Pack,
    PluginHost,
    SimulatedUser,
    StageError,
    Step,
    Task,
    ToolCall,
    ToolSpec,
    UserFailed,
    Verdict,
    attribute,
    build,
    cap_observation,
    get_host,
    load_pack,
    split_tools,
    to_builtins,
    to_openai_messages,
    user_policy_spec,
)

from .actions import ActionError, Parsed, parse_actions
from .loop import run_sync

RewardMode = Literal["pass", "score"]
SPLIT_CHOICES = (*SPLITS, "all")

#: the tool a tool-only loop (TRL's environment_factory, verifiers) talks to a simulated user with
MESSAGE_TOOL = ToolSpec(
    "message_user",
    "Send a message to the user you are helping (the customer) and get their reply. This is the only "
    "way to talk to them: ask for what you need, confirm before you act, tell them the outcome.",
    {"type": "object", "properties": {"message": {"type": "string", "description": "What you say to the user."}},
     "required": ["message"]},
)


class EpisodeOver(RuntimeError):
    """``step`` after the episode ended (call ``reset``)."""


def resolve_pack(pack: Pack | str | Path, host: PluginHost | None = None) -> Pack:
    """A Pack object, or one loaded by registered name or path (errors are the kernel's SpecError)."""
    return pack if isinstance(pack, Pack) else load_pack(pack, host=host or get_host())


def split_tasks(pack: Pack, split: str) -> list[Task]:
    """The pack's tasks of ``split`` (``train`` by default everywhere in this plugin; ``test`` and
    ``all`` only when asked). An empty selection is an error, not an environment with no tasks."""
    if split not in SPLIT_CHOICES:
        raise ValueError(f"split: expected one of {', '.join(SPLIT_CHOICES)}, got {split!r}")
    tasks = [t for t in pack.tasks if split == "all" or t.split == split]
    if not tasks:
        raise ValueError(f"pack {pack.id!r} has no {split!r} tasks (its splits: "
                         f"{', '.join(sorted({t.split for t in pack.tasks}))})")
    return tasks


def find_task(pack: Pack, tasks: list[Task], task_id: str, split: str) -> Task:
    """The task ``task_id`` of the served split; a task of another split is refused by name."""
    for task in tasks:
        if task.id == task_id:
            return task
    other = next((t for t in pack.tasks if t.id == task_id), None)
    if other is not None:
        raise ValueError(f"task {task_id!r} is in the {other.split!r} split; this environment serves {split!r} "
                         f"(pass split={other.split!r} or split='all' to use it)")
    raise ValueError(f"pack {pack.id!r} has no task {task_id!r}")


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Installed agentsynth distributions (kernel and plugins), for provenance."""
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name == "agentsynth" or name.startswith("agentsynth-"):
            out[name] = dist.version
    return dict(sorted(out.items()))


def reward_of(verdicts: list[Verdict], scores: dict[str, float], mode: RewardMode, judge_weight: float) -> float:
    """The reward: 1.0 when every checker passed, else 0.0 (``pass``), or the mean checker score
    (``score``); blended with the judge's score as ``(1 - w) * verdict + w * judge`` when a judge ran."""
    if not verdicts:
        return 0.0
    if mode == "pass":
        value = float(all(v.passed for v in verdicts))
    else:
        value = sum(min(1.0, max(0.0, float(v.score))) for v in verdicts) / len(verdicts)
    if judge_weight and "judge" in scores:
        value = (1.0 - judge_weight) * value + judge_weight * scores["judge"]
    return value


class AsyncPackEnv:
    """One agent's episodes over a pack, async: ``await reset()``, ``await step(action)``.

    Each ``reset`` closes the previous world and builds a fresh one through the pack's
    environment factory, so environments never share world state; run many at once with
    ``asyncio.gather``.

    ``split``: which tasks ``reset`` may pick (``train`` unless you ask for ``test`` or ``all``).
    ``reward``: ``pass`` (1/0, all checkers passed) or ``score`` (mean checker score).
    ``judge`` / ``judge_weight``: an optional judge (a component spec, e.g. ``{"type": "heuristic"}``)
    blended in as ``(1 - w) * verdict + w * judge``; 0 (the default) keeps the verdict alone.
    ``max_steps``: tool calls (and answer) per episode before ``truncated`` (the task's own
    ``max_steps`` wins); ``timeout``: seconds for any one reset / step / check (and any one call of
    a simulated user's policy).
    ``message_tool``: on a task with a simulated user, also offer :data:`MESSAGE_TOOL`
    (``message_user``), a tool call that is an Answer to the user (for loops that only speak tools).
    """

    def __init__(self, pack: Pack | str | Path, *, split: str = "train", reward: RewardMode = "pass",
                 judge: ComponentSpec | dict[str, Any] | str | None = None, judge_weight: float = 0.0,
                 max_steps: int = 30, timeout: float = 300.0, message_tool: bool = False,
                 host: PluginHost | None = None):
        self.host = host or get_host()
        self.pack = resolve_pack(pack, self.host)
        self.split = split
        self.tasks = split_tasks(self.pack, split)
        if reward not in ("pass", "score"):
            raise ValueError(f"reward: expected 'pass' or 'score', got {reward!r}")
        if not (isinstance(judge_weight, (int, float)) and 0.0 <= judge_weight <= 1.0):
            raise ValueError(f"judge_weight: expected a number in [0, 1], got {judge_weight!r}")
        if judge_weight and judge is None:
            raise ValueError("judge_weight is set but no judge is given")
        if not (isinstance(max_steps, int) and max_steps >= 1):
            raise ValueError(f"max_steps: expected an integer >= 1, got {max_steps!r}")
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
        self.reward_mode: RewardMode = reward
        self.judge = _component(judge)
        self.judge_weight = float(judge_weight)
        self.max_steps, self.timeout = max_steps, float(timeout)
        self.message_tool = bool(message_tool)
        self.config = EpisodeConfig(ComponentSpec("noop"), max_steps=max_steps, timeout=timeout, judge=self.judge)
        self._rng = random.Random()
        self.episode: Episode | None = None
        self.tool_specs: list[ToolSpec] = []  # what the agent may call (never the user's own tools)
        self.user: SimulatedUser | None = None  # the other side of a multi-turn task
        self.result: EpisodeResult | None = None
        self.done = True
        self._turn = 0
        self._started = 0.0
        self._last_end: dict[str, Any] | None = None

    # --- the gym API -----------------------------------------------------------------------------

    async def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Close the previous world, pick a task (``options["task_id"]``, else at random from the
        split) and build a fresh world seeded with ``seed`` (else a seed drawn from the env's RNG,
        itself seeded by the last ``seed`` given). Returns the first observation (the instruction,
        plus what the world shows first) and an info dict with the chat ``messages``, the
        ``tools`` (OpenAI schema), the task and its split."""
        options = dict(options or {})
        unknown = set(options) - {"task_id"}
        if unknown:
            raise ValueError(f"options: unknown key(s) {', '.join(sorted(unknown))}; accepted: task_id")
        if seed is not None:
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise ValueError(f"seed: expected an integer, got {seed!r}")
            self._rng = random.Random(seed)
        task_id = options.get("task_id")
        if task_id is not None and not isinstance(task_id, str):
            raise ValueError(f"options['task_id']: expected a task id (str), got {task_id!r}")
        task = find_task(self.pack, self.tasks, task_id, self.split) if task_id else self._rng.choice(self.tasks)
        world_seed = seed if seed is not None else self._rng.getrandbits(32)
        await self.close()
        self.episode = episode = Episode(self.host, self.pack, task, 0, world_seed, self.config)
        self.result, self.done, self._turn, self._started = None, False, 0, time.perf_counter()
        self.user, self._last_end = None, None
        try:
            episode.stage = "environment"
            episode.env = build("environment", self.pack.task_environment(task), host=self.host,
                                base_dir=self.pack.base_dir, task=task, pack=self.pack)
            first = cap_observation(await self._call(episode.env.reset, world_seed))
            world_tools = list(await self._call(episode.env.tools))
            agent_tools = await self._start_user(world_tools)
        except Exception as exc:  # a StageError, a timeout, a bad environment spec
            await self._fail(exc)
            raise RuntimeError(f"task {task.id!r}: the world could not be built: {self.result.error}") from exc  # type: ignore[union-attr]
        self.tool_specs = agent_tools + ([MESSAGE_TOOL] if self.user is not None and self.message_tool else [])
        traj = episode.trajectory
        traj.tools, traj.initial_observation = agent_tools, first.content
        info = self._base_info()
        info.update(messages=self.messages(), tools=self.tools(), instruction=task.instruction, tier=task.tier)
        return to_openai_messages(traj)[-1]["content"], info

    async def _start_user(self, tools: list[ToolSpec]) -> list[ToolSpec]:
        """Build the task's simulated user (if it has one): the tools left to the agent."""
        episode = self.episode
        assert episode is not None
        spec = episode.task.user
        if spec is None:
            return tools
        episode.stage = "user"
        try:
            mine, theirs = split_tools(spec, tools)
            if self.message_tool and any(t.name == MESSAGE_TOOL.name for t in theirs):
                raise UserFailed(f"the world has its own {MESSAGE_TOOL.name!r} tool; message_tool=True cannot add one")
            policy = build("policy", user_policy_spec(spec, self.host), host=self.host, task=episode.task,
                           pack=self.pack, run=None, base_dir=self.pack.base_dir)
        except Exception as exc:
            raise StageError("user", UserFailed(f"task {episode.task.id!r}: {exc}")) from exc
        self.user = episode.user = SimulatedUser(spec, episode.task, policy, mine, episode.seed)
        return theirs

    async def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run one turn: a tool call, several (a list or an assistant message with ``tool_calls``:
        parallel calls, in order) or a final answer (a str, ``{"answer": ...}``).

        Returns ``(observation, reward, terminated, truncated, info)``. The observation is the tool
        result (several results joined by blank lines); ``info["tool_messages"]`` holds them as chat
        ``tool`` messages. ``terminated``: the agent answered or the world ended the episode;
        ``truncated``: ``max_steps`` was reached. On either, the checkers run on the world's end
        state and ``reward`` is the verdict; before that it is 0. An unknown tool or arguments
        that are not a JSON object are the agent's mistake: an error observation, not an exception.

        On a task with a simulated user, an answer is a message to the user: the observation is
        the user's reply (``info["from"] == "user"``, also in ``info["tool_messages"]`` as a chat
        ``user`` message) and the episode goes on until the user ends the talk."""
        if self.done or self.episode is None:
            raise EpisodeOver("the episode is over (or was never started): call reset() first")
        return await self.play(parse_actions(action))  # ActionError on something that is not an action at all

    async def play(self, parsed: list[Parsed]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """:meth:`step` on actions already parsed (with the error a malformed call gets instead)."""
        if self.done or self.episode is None:
            raise EpisodeOver("the episode is over (or was never started): call reset() first")
        episode = self.episode
        traj = episode.trajectory
        names = {t.name for t in traj.tools}
        max_steps = episode.task.max_steps or self.max_steps
        messages: list[dict[str, Any]] = []
        terminated = truncated = False
        speaker = "world"
        try:
            for act, rejected in parsed:
                started = time.perf_counter()
                call_id = ""  # set when a message_user tool call stands for this answer
                if isinstance(act, ToolCall) and self.user is not None and self.message_tool \
                        and act.name == MESSAGE_TOOL.name:
                    act, rejected, call_id = self._as_message(act, rejected)
                if isinstance(act, Answer):
                    if self.user is None:
                        traj.steps.append(Step(act, None, self._turn))
                        terminated = True
                        break
                    reply = await self._user_reply(act.content)
                    traj.steps.append(Step(act, reply, self._turn, time.perf_counter() - started))
                    messages.append({"role": "tool", "tool_call_id": call_id, "content": reply.content} if call_id
                                    else {"role": "user", "content": reply.content})
                    speaker = "user"
                    terminated = reply.done  # the talk goes on until the user ends it
                    if not terminated and len(traj.steps) >= max_steps:
                        truncated = True
                    break
                act = act if act.id else ToolCall(act.name, act.arguments, f"call_{len(traj.steps)}")
                invalid = rejected is not None or act.name not in names
                if rejected is not None:
                    obs = rejected
                elif invalid:
                    obs = Observation(f"error: unknown tool {act.name!r}; available tools: {', '.join(sorted(names))}",
                                      error=True)
                else:
                    obs = cap_observation(await self._call(episode.env.step, act), self.config.max_observation_chars,
                                          self.config.max_observation_data_bytes)
                traj.steps.append(Step(act, obs, self._turn, time.perf_counter() - started, invalid=invalid))
                messages.append({"role": "tool", "tool_call_id": act.id, "content": obs.content})
                speaker = "world"
                if obs.done:
                    terminated = True
                    break
                if len(traj.steps) >= max_steps:
                    truncated = True
                    break
        except (StageError, TimeoutError) as exc:
            await self._fail(exc)
            user_failed = self.result is not None and self.result.error_kind == "user"
            # the simulator failed: the episode is cut (truncated), not the agent's terminal failure
            return ("\n\n".join(m["content"] for m in messages), 0.0, not user_failed, user_failed,
                    self._end_info(messages, speaker))
        self._turn += 1
        if not terminated and len(traj.steps) >= max_steps:
            truncated = True
            traj.metadata["stopped"] = "max_steps"
        observation = "\n\n".join(m["content"] for m in messages)
        if not (terminated or truncated):
            info = self._base_info()
            info.update(tool_messages=messages, steps=len(traj.steps), **{"from": speaker})
            if self.user is not None:
                info["user_usage"] = to_builtins(self.user.usage)
            return observation, 0.0, False, False, info
        reward = await self._finish()
        info = self._end_info(messages, speaker)
        if info["user_failed"]:
            return observation, reward, False, True, info
        return observation, reward, terminated, truncated and not terminated, info

    async def finish(self, answer: str | None = None) -> dict[str, Any]:
        """End the episode now and return its terminal info (idempotent: an ended episode returns
        its first verdict). ``answer`` is the agent's last message (sent to a simulated user, or the
        final answer); a conversation the user has not ended is then cut by the agent."""
        if self.done:
            if self._last_end is None:
                raise EpisodeOver("no episode to finish (or was never started): call reset() first")
            return self._last_end
        if self.user is None or (answer is not None and answer.strip()):
            *_, info = await self.step(Answer(answer or ""))
            if self.done:
                return info
        assert self.episode is not None
        self.episode.trajectory.metadata["stopped"] = "agent"
        await self._finish()
        return self._end_info([], "agent")

    @staticmethod
    def _as_message(call: ToolCall, rejected: Observation | None) -> tuple[Any, Observation | None, str]:
        """A ``message_user`` tool call as the Answer it stands for, with the call's id (or, with
        no ``message`` string, the invalid step it is)."""
        text = call.arguments.get("message") if rejected is None else None
        if not isinstance(text, str) or not text.strip():
            return call, rejected or Observation(f"error: {MESSAGE_TOOL.name} needs a 'message' (a non-empty string)",
                                                 error=True), ""
        return Answer(text), None, call.id or "call_message"

    async def _user_reply(self, message: str) -> Observation:
        """The simulated user's answer to ``message`` (its tool calls run in the world)."""
        user, episode = self.user, self.episode
        assert user is not None and episode is not None

        async def call(fn: Any, *args: Any) -> Any:
            episode.stage = "user"
            try:
                return await asyncio.wait_for(episode.worker.call(fn, *args), timeout=self.timeout)
            except (asyncio.CancelledError, TimeoutError):
                raise
            except Exception as exc:
                raise StageError("user", exc) from exc

        async def step_world(action: ToolCall) -> Observation:
            return cap_observation(await self._call(episode.env.step, action), self.config.max_observation_chars,
                                   self.config.max_observation_data_bytes)

        try:
            return await user.reply(message, call, step_world)
        except UserFailed as exc:
            raise StageError("user", exc) from exc
        finally:
            episode.usage = episode.usage + user.take_usage()

    async def close(self) -> None:
        """Release the current world (a no-op when there is none)."""
        episode, self.episode = self.episode, None
        if episode is not None and episode.env is not None:
            if not self.done:  # closed mid-episode: no verdict
                self.done = True
            await episode.close()

    # --- rendering --------------------------------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        """The world's tools as OpenAI ``tools=[...]`` entries."""
        return [t.to_openai() for t in self.tool_specs]

    def messages(self) -> list[dict[str, Any]]:
        """The episode so far as OpenAI chat messages (system prompt, instruction, tool calls and
        results, final answer): what to send a chat model, with :meth:`tools`."""
        if self.episode is None and self.result is None:
            return []
        traj = self.episode.trajectory if self.episode is not None else self.result.trajectory  # type: ignore[union-attr]
        return to_openai_messages(traj)  # type: ignore[arg-type]

    # --- internals --------------------------------------------------------------------------------

    async def _call(self, fn: Any, *args: Any) -> Any:
        """A world call on the episode's worker (sync worlds keep one thread), bounded by ``timeout``."""
        episode = self.episode
        assert episode is not None
        episode.stage = "environment"
        try:
            return await asyncio.wait_for(episode.worker.call(fn, *args), timeout=self.timeout)
        except (asyncio.CancelledError, TimeoutError):
            raise
        except Exception as exc:
            raise StageError("environment", exc) from exc

    async def _finish(self) -> float:
        episode = self.episode
        assert episode is not None
        status, error, kind = "failed", "", ""
        try:
            status = await asyncio.wait_for(episode.check(), timeout=self.timeout)
            kind = "" if status == "passed" else "agent"
        except TimeoutError:
            status, kind, error = "error", "timeout", f"the checks exceeded {self.timeout:g}s"
        except StageError as exc:
            status, kind = "error", attribute(exc.kind, exc.original)
            error = f"{kind} error: {exc}"
        cut = episode.trajectory.metadata.get("user_cut")
        if status == "failed" and cut:  # the kernel fails the agent for a rule broken in a talk it cut
            error = f"the agent ended the conversation before the user did ({cut})"
        self.result = self._result(status, error, kind)
        await self._release()
        if status == "error":
            return 0.0
        return reward_of(self.result.verdicts, self.result.scores, self.reward_mode, self.judge_weight)

    async def _fail(self, exc: BaseException) -> None:
        if isinstance(exc, TimeoutError):
            kind, error = "timeout", f"a world call exceeded {self.timeout:g}s"
        elif isinstance(exc, StageError):
            kind = attribute(exc.kind, exc.original)
            error = f"{kind} error: {exc}"
        else:
            kind, error = "environment", f"environment error: {type(exc).__name__}: {exc}"
        self.result = self._result("error", error, kind)
        await self._release()

    async def _release(self) -> None:
        self.done = True
        episode, self.episode = self.episode, None
        if episode is not None:
            await episode.close()

    def _result(self, status: str, error: str, kind: str) -> EpisodeResult:
        episode = self.episode
        assert episode is not None
        if self.user is not None:  # the user's side of the talk, as the engine stores it
            episode.trajectory.user = self.user.trajectory
        result = episode.result(status, error=error, error_kind=kind, duration=time.perf_counter() - self._started)
        result.provenance = self.provenance(episode)
        return result

    def provenance(self, episode: Episode) -> dict[str, Any]:
        """What re-verifies this reward: pack id and content hash, task, split, seed, versions."""
        return {"source": "agentsynth-rl", "pack": self.pack.id, "pack_hash": self.pack.content_hash,
                "task_id": episode.task.id, "split": episode.task.split, "seed": episode.seed,
                "reward": self.reward_mode, "judge_weight": self.judge_weight, "versions": versions()}

    def _base_info(self) -> dict[str, Any]:
        episode = self.episode
        assert episode is not None
        return {"task_id": episode.task.id, "split": episode.task.split, "seed": episode.seed}

    def _end_info(self, messages: list[dict[str, Any]], speaker: str = "world") -> dict[str, Any]:
        """The terminal info: status, verdicts (with details), failure attribution, provenance;
        on a multi-turn task also whether the simulated user failed and what it spent."""
        result = self.result
        assert result is not None
        info = {
            "task_id": result.task_id, "split": result.split, "seed": result.seed, "tool_messages": messages,
            "status": result.status, "passed": result.passed, "scored": result.status != "error",
            "verdicts": [to_builtins(v) for v in result.verdicts], "scores": dict(result.scores),
            "error": result.error, "error_kind": result.error_kind, "judge_error": result.judge_error,
            "steps": len(result.trajectory.steps) if result.trajectory else 0,
            "provenance": result.provenance, "result": result, "from": speaker,
            "user_failed": result.error_kind == "user",
        }
        if self.user is not None:
            info["user_usage"] = to_builtins(self.user.usage)
            info["user_stopped"] = self.user.trajectory.metadata.get("stopped", "")
        self._last_end = info
        return info


def _component(value: ComponentSpec | dict[str, Any] | str | None) -> ComponentSpec | None:
    if value is None or isinstance(value, ComponentSpec):
        return value
    if isinstance(value, str):
        return ComponentSpec(value)
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return ComponentSpec(value["type"], {k: v for k, v in value.items() if k != "type"})
    raise ValueError(f"judge: expected a type name or {{'type': NAME, ...}}, got {value!r}")


# --- Gymnasium --------------------------------------------------------------------------------------


class ActionSpace(gymnasium.Space):
    """Actions are tool calls or a final answer (see :mod:`agentsynth_rl.actions`), not tensors:
    ``contains`` says whether a value parses as an action naming one of the world's tools."""

    def __init__(self, env: AsyncPackEnv):
        super().__init__()
        self._env = env

    def contains(self, x: Any) -> bool:
        try:
            parsed = parse_actions(x)
        except ActionError:
            return False
        names = {t.name for t in self._env.tool_specs}
        return all(isinstance(a, Answer) or (r is None and a.name in names) for a, r in parsed)

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        """A random tool with no arguments, or an empty answer: a floor baseline."""
        names = sorted(t.name for t in self._env.tool_specs)
        choice = self.np_random.integers(len(names) + 1)
        return {"answer": ""} if choice == len(names) else {"tool": names[choice], "arguments": {}}


class TextSpace(gymnasium.Space):
    """Observations are text (tool results, capped by the kernel)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return ""


class PackEnv(gymnasium.Env):
    """The synchronous Gymnasium environment over a pack (see :class:`AsyncPackEnv` for the
    parameters and the meaning of every value). ``render()`` returns the chat messages
    (``render_mode="messages"``, the default) or a text transcript (``"ansi"``)."""

    metadata = {"render_modes": ["messages", "ansi"]}

    def __init__(self, pack: Pack | str | Path, *, render_mode: str | None = "messages", **kwargs: Any):
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode: expected one of {self.metadata['render_modes']}, got {render_mode!r}")
        self.render_mode = render_mode
        self.core = AsyncPackEnv(pack, **kwargs)
        self.action_space = ActionSpace(self.core)
        self.observation_space = TextSpace()

    @property
    def pack(self) -> Pack:
        return self.core.pack

    @property
    def result(self) -> EpisodeResult | None:
        """The last finished episode (``None`` while one runs)."""
        return self.core.result

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.action_space.seed(seed)
        return run_sync(self.core.reset(seed=seed, options=options))

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return run_sync(self.core.step(action))

    def tools(self) -> list[dict[str, Any]]:
        return self.core.tools()

    def messages(self) -> list[dict[str, Any]]:
        return self.core.messages()

    def render(self) -> Any:
        if self.render_mode == "ansi":
            return "\n".join(f"[{m['role']}] {m.get('content') or ''}" + "".join(
                f"\n  -> {c['function']['name']}({c['function']['arguments']})" for c in m.get("tool_calls", []))
                for m in self.messages())
        return self.messages() if self.render_mode == "messages" else None

    def close(self) -> None:
        run_sync(self.core.close())


def register_gymnasium(env_id: str = "agentsynth/Pack-v0") -> str:
    """Make ``gymnasium.make(env_id, pack=...)`` build a :class:`PackEnv`; returns the id."""
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point="agentsynth_rl.env:PackEnv", disable_env_checker=True)
    return env_id
