"""A Gymnasium-style environment over any pack: ``reset`` builds a fresh world for one task,
``step`` runs the agent's tool calls in it, and the terminal reward is the checkers' verdict.

The episode is the kernel's own (:class:`agentsynth_kernel.episode.Episode`): the same world
factory, the same observation caps, the same worker thread for sync worlds and the same checkers
as ``agentsynth run``, so a reward here is exactly what the engine would record for the same
actions. :class:`AsyncPackEnv` is the async core (many episodes on one loop, each with its own
world); :class:`PackEnv` is the synchronous ``gymnasium.Env``.
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
    StageError,
    Step,
    Task,
    ToolCall,
    ToolSpec,
    Verdict,
    attribute,
    build,
    cap_observation,
    get_host,
    load_pack,
    to_builtins,
    to_openai_messages,
)

from .actions import ActionError, parse_actions
from .loop import run_sync

RewardMode = Literal["pass", "score"]
SPLIT_CHOICES = (*SPLITS, "all")


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
    ``max_steps`` wins); ``timeout``: seconds for any one reset / step / check.
    """

    def __init__(self, pack: Pack | str | Path, *, split: str = "train", reward: RewardMode = "pass",
                 judge: ComponentSpec | dict[str, Any] | str | None = None, judge_weight: float = 0.0,
                 max_steps: int = 30, timeout: float = 300.0, host: PluginHost | None = None):
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
        self.config = EpisodeConfig(ComponentSpec("noop"), max_steps=max_steps, timeout=timeout, judge=self.judge)
        self._rng = random.Random()
        self.episode: Episode | None = None
        self.tool_specs: list[ToolSpec] = []
        self.result: EpisodeResult | None = None
        self.done = True
        self._turn = 0
        self._started = 0.0

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
        try:
            episode.stage = "environment"
            episode.env = build("environment", self.pack.task_environment(task), host=self.host,
                                base_dir=self.pack.base_dir, task=task, pack=self.pack)
            first = cap_observation(await self._call(episode.env.reset, world_seed))
            self.tool_specs = list(await self._call(episode.env.tools))
        except Exception as exc:  # a StageError, a timeout, a bad environment spec
            await self._fail(exc)
            raise RuntimeError(f"task {task.id!r}: the world could not be built: {self.result.error}") from exc  # type: ignore[union-attr]
        traj = episode.trajectory
        traj.tools, traj.initial_observation = self.tool_specs, first.content
        info = self._base_info()
        info.update(messages=self.messages(), tools=self.tools(), instruction=task.instruction, tier=task.tier)
        return to_openai_messages(traj)[-1]["content"], info

    async def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run one turn: a tool call, several (a list or an assistant message with ``tool_calls``:
        parallel calls, in order) or a final answer (a str, ``{"answer": ...}``).

        Returns ``(observation, reward, terminated, truncated, info)``. The observation is the tool
        result (several results joined by blank lines); ``info["tool_messages"]`` holds them as chat
        ``tool`` messages. ``terminated``: the agent answered or the world ended the episode;
        ``truncated``: ``max_steps`` was reached. On either, the checkers run on the world's end
        state and ``reward`` is the verdict; before that it is 0. An unknown tool or arguments
        that are not a JSON object are the agent's mistake: an error observation, not an exception."""
        if self.done or self.episode is None:
            raise EpisodeOver("the episode is over (or was never started): call reset() first")
        parsed = parse_actions(action)  # ActionError on something that is not an action at all
        episode = self.episode
        traj = episode.trajectory
        names = {t.name for t in self.tool_specs}
        max_steps = episode.task.max_steps or self.max_steps
        messages: list[dict[str, Any]] = []
        terminated = truncated = False
        try:
            for act, rejected in parsed:
                started = time.perf_counter()
                if isinstance(act, Answer):
                    traj.steps.append(Step(act, None, self._turn))
                    terminated = True
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
                if obs.done:
                    terminated = True
                    break
                if len(traj.steps) >= max_steps:
                    truncated = True
                    break
        except (StageError, TimeoutError) as exc:
            await self._fail(exc)
            return "\n\n".join(m["content"] for m in messages), 0.0, True, False, self._end_info(messages)
        self._turn += 1
        if not terminated and len(traj.steps) >= max_steps:
            truncated = True
            traj.metadata["stopped"] = "max_steps"
        observation = "\n\n".join(m["content"] for m in messages)
        if not (terminated or truncated):
            info = self._base_info()
            info.update(tool_messages=messages, steps=len(traj.steps))
            return observation, 0.0, False, False, info
        reward = await self._finish()
        return observation, reward, terminated, truncated and not terminated, self._end_info(messages)

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

    def _end_info(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The terminal info: status, verdicts (with details), failure attribution, provenance."""
        result = self.result
        assert result is not None
        return {
            "task_id": result.task_id, "split": result.split, "seed": result.seed, "tool_messages": messages,
            "status": result.status, "passed": result.passed, "scored": result.status != "error",
            "verdicts": [to_builtins(v) for v in result.verdicts], "scores": dict(result.scores),
            "error": result.error, "error_kind": result.error_kind, "judge_error": result.judge_error,
            "steps": len(result.trajectory.steps) if result.trajectory else 0,
            "provenance": result.provenance, "result": result,
        }


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
