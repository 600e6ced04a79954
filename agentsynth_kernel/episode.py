"""One episode: reset the world -> the policy acts -> the environment steps -> checkers -> verdict.

Every failure is caught here and recorded on the result with who caused it
(``error_kind``), so one broken episode never stops a run.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import queue
import random
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Literal

import attrs

from .components import EpisodeState, normalize_actions
from .errors import BudgetExceeded
from .plugins import PluginHost
from .records import (
    Answer,
    EpisodeResult,
    ErrorKind,
    Observation,
    Status,
    Step,
    ToolCall,
    Trajectory,
    Usage,
    Verdict,
    is_error_kind,
)
from .spec import ComponentSpec, Pack, Task, build
from .user import SimulatedUser, UserFailed, agent_view, split_tools, user_policy_spec


class _WorkerThread:
    """A daemon thread running submitted calls in order; reused across episodes."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.busy = 0  # calls submitted and not yet returned (one may be stuck after a timeout)
        threading.Thread(target=self._run, name="agentsynth-episode", daemon=True).start()

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fn, args, future, loop = job
            try:
                outcome: tuple[Any, BaseException | None] = (fn(*args), None)
            except BaseException as exc:  # handed to the awaiting coroutine
                outcome = (None, exc)
            self.busy -= 1
            try:
                loop.call_soon_threadsafe(_settle, future, *outcome)
            except RuntimeError:  # the loop is gone (run ended while this call was stuck)
                pass


_idle: list[_WorkerThread] = []
_idle_lock = threading.Lock()
_MAX_IDLE = 64


@functools.lru_cache(maxsize=4096)
def _how_to_call(function: Any) -> str:
    """``await`` (a coroutine function), ``inline`` (marked runs_inline) or ``thread``: asked for
    every component call, answered once per function."""
    if inspect.iscoroutinefunction(function):
        return "await"
    return "inline" if getattr(function, "__agentsynth_inline__", False) else "thread"


def how_called(method: Any) -> Literal["await", "inline", "thread"]:
    """How the engine calls a component method: ``await`` (async), ``inline`` (marked
    :func:`~agentsynth_kernel.components.runs_inline`: quick, on the loop) or ``thread`` (on the
    episode's worker thread). A plugin that runs components itself decides the same way."""
    return _how(method)  # type: ignore[return-value]


def _how(method: Any) -> str:
    """How to call a component method (bound methods are decided by their function)."""
    target = getattr(method, "__func__", method)
    try:
        return _how_to_call(target)
    except TypeError:  # an unhashable callable object: decide without the cache
        return _how_to_call.__wrapped__(target)


def _check_until_awaitable(checks: list[Callable[..., Any]], env: Any, trajectory: Any) -> list[Any]:
    """Run checks in order; stop after one that returns an awaitable (it must finish first)."""
    results = []
    for check in checks:
        results.append(check(env, trajectory))
        if inspect.isawaitable(results[-1]):
            break
    return results


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class SyncWorker:
    """Runs one episode's sync component methods on one daemon thread.

    Sync plugins (sqlite3 connections are bound to their thread) see a single
    thread for the whole episode, the event loop stays free for other episodes,
    and a sync call that hangs can be abandoned on timeout without blocking
    interpreter exit. Threads are pooled: starting one per episode costs more
    than a whole no-op episode.
    """

    def __init__(self) -> None:
        self._thread: _WorkerThread | None = None

    @property
    def busy(self) -> int:
        return self._thread.busy if self._thread is not None else 0

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Await ``fn(*args)``: coroutine functions directly, plain functions on the worker thread."""
        how = _how(fn)
        if how == "await":
            return await fn(*args)
        if how == "inline":  # quick and non-blocking: see components.runs_inline
            return fn(*args)
        if self._thread is None:
            with _idle_lock:
                self._thread = _idle.pop() if _idle else None
            if self._thread is None:
                self._thread = _WorkerThread()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._thread.busy += 1  # decremented by the thread when the call returns, even if nobody awaits it
        self._thread.jobs.put((fn, args, future, loop))
        result = await future
        if inspect.isawaitable(result):  # a sync method that returned a coroutine
            result = await result
        return result

    def stop(self) -> None:
        """Give the thread back to the pool, or let it exit once a stuck call returns."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        with _idle_lock:
            if not thread.busy and len(_idle) < _MAX_IDLE:
                _idle.append(thread)
                return
        thread.jobs.put(None)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


# Caps on what one observation may hold, whatever the world returns: an agent that makes a tool
# print gigabytes must not make the episode (or its stored trajectory) hold them.
CLOSE_SECONDS = 30.0  # what a world's close() may take


async def close_world(env: Any, worker: SyncWorker) -> None:
    """``env.close()`` (if it has one) within CLOSE_SECONDS, on ``worker``, or on a fresh thread when
    ``worker`` is still stuck in a sync call (after a timeout) rather than queued behind it.
    ``worker`` itself is left to its owner; its errors are the caller's to record."""
    if getattr(env, "close", None) is None:
        return
    closer = worker if not worker.busy else SyncWorker()
    try:
        await asyncio.wait_for(closer.call(env.close), timeout=CLOSE_SECONDS)
    finally:
        if closer is not worker:
            closer.stop()


MAX_OBSERVATION_CHARS = 32_000
MAX_OBSERVATION_DATA_BYTES = 64_000
# The same for what the agent sends: a call with larger arguments is refused (recorded, not run).
MAX_ARGUMENT_BYTES = 256_000


@attrs.define
class EpisodeConfig:
    """The run-level settings an episode needs."""

    policy: ComponentSpec
    max_steps: int = 30
    timeout: float = 300.0
    judge: ComponentSpec | None = None
    max_observation_chars: int = MAX_OBSERVATION_CHARS
    max_observation_data_bytes: int = MAX_OBSERVATION_DATA_BYTES


def cap_observation(obs: Any, chars: int = MAX_OBSERVATION_CHARS,
                    data_bytes: int = MAX_OBSERVATION_DATA_BYTES) -> Observation:
    """The observation as the agent sees and the store keeps it: text cut to ``chars`` with a
    visible marker, structured ``data`` over ``data_bytes`` (JSON) replaced by a note of its size."""
    if not isinstance(obs, Observation):
        return cap_observation(Observation(str(obs if obs is not None else "")), chars, data_bytes)
    content, data = obs.content, obs.data
    if len(content) > chars:
        content = content[:chars] + f"\n[... output truncated: {len(content) - chars:,} more characters not shown]"
    if data is not None and not isinstance(data, (bool, int, float)):
        size = _json_size(data)
        if size > data_bytes:
            data = {"truncated": True, "bytes": size, "limit": data_bytes}
    if content is obs.content and data is obs.data:
        return obs
    return Observation(content, obs.error, data, obs.done)


def _json_size(data: Any) -> int:
    if isinstance(data, str):
        return len(data)  # a lower bound that is cheap; exact enough for a cap
    try:
        return len(_encode(data))
    except RecursionError:  # nested past any sane depth: over every cap (repr would recurse too)
        return 2**62
    except (TypeError, ValueError, OverflowError):  # not JSON-able: the store could not keep it either
        try:
            return len(repr(data))
        except RecursionError:
            return 2**62


def _encode(data: Any) -> bytes:
    import msgspec

    return msgspec.json.encode(data)


class StageError(Exception):
    """An exception raised by a component, tagged with who raised it."""

    def __init__(self, kind: str, exc: BaseException):
        super().__init__(f"{type(exc).__name__}: {exc}")
        self.kind = kind
        self.original = exc


class Episode:
    """State of one running episode. Kept outside the coroutine so a timeout still
    yields the partial trajectory."""

    def __init__(self, host: PluginHost, pack: Pack, task: Task, trial: int, seed: int, config: EpisodeConfig,
                 run: Any = None, on_step: Callable[[Step], Any] | None = None):
        self.host, self.pack, self.task, self.trial, self.seed, self.config = host, pack, task, trial, seed, config
        self.run = run
        self.on_step = on_step  # sees every step as it is recorded (a live viewer, a playground)
        self.trajectory = Trajectory(task.id, task.instruction, system_prompt=pack.system_prompt)
        self.usage = Usage()
        self.verdicts: list[Verdict] = []
        self.scores: dict[str, float] = {}
        self.judge_error = ""
        self.worker = SyncWorker()
        self.env: Any = None
        self.user: SimulatedUser | None = None  # the other side of a multi-turn task (``user:``)
        self.stage = "environment"  # who is running now: names the culprit of a timeout

    async def _stage(self, kind: str, fn: Callable[..., Any], *args: Any) -> Any:
        self.stage = kind
        try:
            return await self.worker.call(fn, *args)
        except (asyncio.CancelledError, BudgetExceeded):
            raise
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            # A component's sys.exit() or raised KeyboardInterrupt fails its episode, not the run
            # (a real Ctrl-C reaches the run as a cancellation, see asyncio.run).
            raise StageError(kind, exc) from exc

    def _build(self, kind: str, cspec: ComponentSpec) -> Any:
        self.stage = kind
        try:
            return self._make(kind, cspec)
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            raise StageError(kind, exc) from exc

    def _make(self, kind: str, cspec: ComponentSpec, task: Task | None = None) -> Any:
        return build(kind, cspec, host=self.host, base_dir=self.pack.base_dir, task=task or self.task,
                     pack=self.pack, run=self.run)

    async def _start_user(self, tools: list[Any]) -> list[Any]:
        """Build the simulated user of a multi-turn task; the tools left to the agent."""
        spec = self.task.user
        if spec is None:
            return tools
        try:
            mine, theirs = split_tools(spec, tools)
        except UserFailed as exc:
            raise StageError("user", UserFailed(f"task {self.task.id!r}: {exc}")) from exc
        policy = await self._stage("user", self._make, "policy", user_policy_spec(spec, self.host))
        self.user = SimulatedUser(spec, self.task, policy, mine, self.seed)
        return theirs

    async def _user_reply(self, message: str) -> Observation:
        assert self.user is not None
        env = self.env

        async def call(fn: Any, *args: Any) -> Any:
            return await self._stage("user", fn, *args)

        async def step_world(action: ToolCall) -> Observation:
            return cap_observation(await self._stage("environment", env.step, action),
                                   self.config.max_observation_chars, self.config.max_observation_data_bytes)

        try:
            return await self.user.reply(message, call, step_world)
        except UserFailed as exc:
            raise StageError("user", exc) from exc
        finally:
            self.usage = self.usage + self.user.take_usage()

    async def play(self) -> Status:
        """Run the episode to its verdict; returns ``passed`` or ``failed``. Raises StageError."""
        task, traj = self.task, self.trajectory
        self.env = env = self._build("environment", self.pack.task_environment(task))
        first = cap_observation(await self._stage("environment", env.reset, self.seed),
                                self.config.max_observation_chars, self.config.max_observation_data_bytes)
        tools = await self._start_user(list(await self._stage("environment", env.tools)))
        traj.tools = tools
        traj.initial_observation = first.content
        tool_names = {t.name for t in tools}
        seen = agent_view(task)  # the agent never sees a simulated user's instructions
        # built on the episode's thread: a policy may import user code (an oracle, your agent) that
        # hangs at import, and the episode's timeout must still end it
        policy = await self._stage("policy", self._make, "policy", self.config.policy, seen)
        max_steps = task.max_steps or self.config.max_steps
        state = EpisodeState(seen, tools, traj, first, self.seed, random.Random(self.seed), max_steps)
        turn_index, done = 0, False
        while not done:
            if len(traj.steps) >= max_steps:
                traj.metadata["stopped"] = "max_steps"
                break
            state.steps_left = max_steps - len(traj.steps)
            try:
                turn = normalize_actions(await self._stage("policy", policy.act, state))
            except TypeError as exc:  # the policy returned something that is not an action
                raise StageError("policy", exc) from exc
            if turn.usage is not None:
                self.usage = self.usage + turn.usage
            for i, action in enumerate(turn.actions):
                started = time.perf_counter()
                thought = turn.thought if i == 0 else ""
                usage = turn.usage if i == 0 else None
                if isinstance(action, Answer):
                    try:
                        reply = None if self.user is None else await self._user_reply(action.content)
                    except BaseException:
                        # the simulator failed answering this message: keep the message (unanswered) and
                        # the user's side so far, so a report shows where and how the talk broke off
                        traj.steps.append(Step(action, None, turn_index, time.perf_counter() - started, thought, usage))
                        if self.user is not None:
                            traj.user = self.user.trajectory
                        raise
                    traj.steps.append(Step(action, reply, turn_index, time.perf_counter() - started, thought, usage))
                    self._notify_step()
                    if reply is not None:  # the conversation goes on until the user ends it
                        state.observation = reply
                        done = reply.done
                    else:
                        done = True
                    break
                rejected = turn.rejected.get(i)
                size = _json_size(action.arguments) if rejected is None else 0
                if size > MAX_ARGUMENT_BYTES:  # kept out of the world and out of the stored trajectory
                    rejected = Observation(f"error: the arguments of this call are {size:,} bytes, more than the "
                                           f"limit of {MAX_ARGUMENT_BYTES:,}; the call was not run", error=True)
                    action = ToolCall(action.name, {"truncated": True, "bytes": size}, id=action.id)
                invalid = rejected is not None or action.name not in tool_names
                if rejected is not None:  # the policy found the call malformed: recorded, not executed
                    obs = rejected
                elif invalid:
                    obs = Observation(
                        f"error: unknown tool {action.name!r}; available tools: {', '.join(sorted(tool_names))}",
                        error=True,
                    )
                else:
                    obs = cap_observation(await self._stage("environment", env.step, action),
                                          self.config.max_observation_chars, self.config.max_observation_data_bytes)
                traj.steps.append(
                    Step(action, obs, turn_index, time.perf_counter() - started, thought, usage, invalid)
                )
                self._notify_step()
                state.observation = obs
                if obs.done:
                    done = True
                    break
                if len(traj.steps) >= max_steps:
                    break
            turn_index += 1
        return await self.check()

    async def _check_user(self, side: Trajectory) -> None:
        """Check the rules the simulated user had to keep (``user.checks``) on its side of the talk:
        a broken rule is the simulator's failure, whatever the world says."""
        assert self.task.user is not None
        broken = []
        for cspec in self.task.user.checks:
            try:
                checker = self._make("checker", cspec)
            except (Exception, SystemExit, KeyboardInterrupt) as exc:
                raise StageError("user", exc) from exc
            verdict = await self._stage("user", checker.check, self.env, side)
            if not isinstance(verdict, Verdict):
                raise StageError("user", TypeError(f"user check {cspec.type!r} returned {type(verdict).__name__}"))
            verdict = Verdict(f"user.{verdict.checker}", verdict.passed, verdict.score, verdict.detail, verdict.data)
            self.verdicts.append(verdict)
            if not verdict.passed:
                broken.append(f"{verdict.checker}: {verdict.detail}")
        if broken and not side.metadata.get("stopped"):
            # the agent ended the talk (max_steps, or it never answered) before the user had its say:
            # the user could not keep its rules, so they fail the agent; going quiet must not turn a
            # failure into the simulator's (left out of pass rates and of RL rewards)
            self.trajectory.metadata["user_cut"] = "; ".join(broken)
        elif broken:
            raise StageError("user", UserFailed("the simulated user broke its instructions: " + "; ".join(broken)))

    def _notify_step(self) -> None:
        """Hand the newest step to ``on_step``; an observer that raises is dropped, never the episode."""
        if self.on_step is None:
            return
        try:
            self.on_step(self.trajectory.steps[-1])
        except Exception:
            self.on_step = None

    async def check(self) -> Status:
        # the world's checkers run first, so their verdicts are kept when the user broke its rules
        status = await self._check_world()
        side = self.user.trajectory if self.user is not None else self.trajectory.user  # a replay: as stored
        if side is not None and self.task.user is not None:
            self.trajectory.user = side
            await self._check_user(side)
            if not all(v.passed for v in self.verdicts):  # a rule broken in a talk the agent cut
                status = "failed"
        return status

    async def _check_world(self) -> Status:
        checks = self.pack.task_checkers(self.task)
        if not checks:
            raise StageError("checker", ValueError(f"task {self.task.id!r} has no checkers"))
        checkers = [(cspec, self._build("checker", cspec)) for cspec in checks]
        if len(checkers) > 1 and all(_how(c.check) == "thread" for _, c in checkers):
            # sync checkers (they read the world, e.g. a SQLite copy) run in one hop to the episode's
            # thread, in order, instead of one hop each; a checker that hands back an awaitable is
            # awaited before the next one runs, as with one hop each
            checks = [c.check for _, c in checkers]
            verdicts: list[Any] = []
            while len(verdicts) < len(checks):
                part = await self._stage("checker", _check_until_awaitable, checks[len(verdicts):], self.env,
                                         self.trajectory)
                for verdict in part:
                    if inspect.isawaitable(verdict):
                        verdict = await self._stage("checker", _awaited, verdict)
                    verdicts.append(verdict)
        else:
            verdicts = [await self._stage("checker", c.check, self.env, self.trajectory) for _, c in checkers]
        for (cspec, _), verdict in zip(checkers, verdicts, strict=True):
            if not isinstance(verdict, Verdict):
                raise StageError("checker", TypeError(f"checker {cspec.type!r} returned {type(verdict).__name__}, not a Verdict"))
            self.verdicts.append(verdict)
        if self.config.judge is not None:
            await self.judge()
        return "passed" if all(v.passed for v in self.verdicts) else "failed"

    async def judge(self) -> None:
        """Score the trajectory. A failing judge is recorded but never overrides the world's verdict
        (a budget stop still stops the run)."""
        try:
            assert self.config.judge is not None  # judge() runs only for a configured judge
            judge = self._build("judge", self.config.judge)
            result = await self._stage("judge", judge.score, self.trajectory, self.verdicts)
        except StageError as exc:
            if attribute(exc.kind, exc.original) == "budget":
                raise
            self.judge_error = f"{attribute(exc.kind, exc.original)} error: {exc}"
            return
        if result.usage is not None:
            self.usage = self.usage + result.usage
        self.scores["judge"] = float(result.score)
        self.scores.update({f"judge.{k}": float(v) for k, v in (result.dimensions or {}).items()})

    async def close(self) -> None:
        try:
            if self.env is not None:
                await close_world(self.env, self.worker)
        except Exception as exc:  # a failing close is recorded but does not change the verdict
            self.trajectory.metadata["close_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            self.worker.stop()

    def result(self, status: Status, *, error: str = "", error_kind: ErrorKind = "",
               duration: float = 0.0) -> EpisodeResult:
        return EpisodeResult(
            task_id=self.task.id, trial=self.trial, seed=self.seed, status=status, trajectory=self.trajectory,
            verdicts=self.verdicts, error=error, error_kind=error_kind, duration_s=duration, usage=self.usage,
            scores=self.scores, split=self.task.split, tier=self.task.tier, judge_error=self.judge_error,
        )


def attribute(stage: str, exc: BaseException) -> ErrorKind:
    """Who failed: ``budget`` for a budget stop, the kind an exception declares (``agentsynth_error_kind``,
    e.g. ``provider`` from the LLM client, also on a wrapped cause), else the stage that raised. A
    declared kind the records do not know (not in ``ErrorKind``) is not taken: the stored episode
    would no longer decode."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, BudgetExceeded):
            return "budget"
        declared = getattr(current, "agentsynth_error_kind", None)
        if declared and is_error_kind(declared):
            return declared
        current = current.__cause__ or current.__context__
    return stage if is_error_kind(stage) else "environment"


def _short_traceback(exc: BaseException, limit: int = 4) -> str:
    frames = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-limit)
    return "".join(frames[-(limit * 2 + 1):]).strip()


async def run_episode(
    host: PluginHost, pack: Pack, task: Task, trial: int, seed: int, config: EpisodeConfig, run: Any = None,
    *, on_step: Callable[[Step], Any] | None = None,
) -> EpisodeResult:
    """Play one episode and always return a result (never raises, except on cancellation).

    ``run`` (the RunInfo) is handed to component factories that accept a ``run``
    parameter, for run-scoped services such as the LLM client and its budget.
    """
    episode = Episode(host, pack, task, trial, seed, config, run, on_step)
    started = time.perf_counter()
    status: Status = "failed"
    error = ""
    kind: ErrorKind = ""
    try:
        status = await asyncio.wait_for(episode.play(), timeout=config.timeout)
        kind = "" if status == "passed" else "agent"
    except TimeoutError:
        status, kind = "error", "timeout"
        error = f"episode exceeded its timeout of {config.timeout:g}s (while the {episode.stage} was running)"
        episode.trajectory.metadata["timeout_stage"] = episode.stage
    except BudgetExceeded as exc:
        status, kind, error = "error", "budget", str(exc)
    except StageError as exc:
        status, kind = "error", attribute(exc.kind, exc.original)
        error = f"{kind} error: {exc}"
        episode.trajectory.metadata["traceback"] = _short_traceback(exc.original)
    finally:
        await episode.close()
    return episode.result(status, error=error, error_kind=kind, duration=time.perf_counter() - started)


@attrs.define
class Replay:
    """A stored trajectory replayed in a fresh world: the new verdicts, and the steps whose
    observation came out different (``drift``, indices into the trajectory's steps)."""

    status: str
    verdicts: list[Verdict] = attrs.field(factory=list)
    error: str = ""
    drift: list[int] = attrs.field(factory=list)


async def replay_episode(
    host: PluginHost, pack: Pack, task: Task, seed: int, trajectory: Trajectory, *, timeout: float = 300.0,
    run: Any = None,
) -> Replay:
    """Reset a fresh world with ``seed``, re-send the trajectory's valid tool calls in order, then run
    the task's checkers on the end state (with the stored trajectory). No policy, no judge."""
    config = EpisodeConfig(ComponentSpec("noop"), timeout=timeout)
    episode = Episode(host, pack, task, 0, seed, config, run)
    episode.trajectory = trajectory
    drift: list[int] = []

    async def play() -> str:
        episode.env = env = episode._build("environment", pack.task_environment(task))
        await episode._stage("environment", env.reset, seed)
        await episode._stage("environment", env.tools)
        # a simulated user's own tool calls (dual control) ran while it answered the agent's k-th message
        user_calls: dict[int, list[ToolCall]] = {}
        for user_step in trajectory.user.steps if trajectory.user is not None else []:
            if isinstance(user_step.action, ToolCall) and not user_step.invalid:
                user_calls.setdefault(user_step.turn, []).append(user_step.action)
        messages = 0
        for index, step in enumerate(trajectory.steps):
            if isinstance(step.action, Answer):
                messages += 1
                for call in user_calls.get(messages, []):
                    await episode._stage("environment", env.step, call)
                continue
            if step.invalid:
                continue
            obs = cap_observation(await episode._stage("environment", env.step, step.action))
            before = step.observation or Observation()
            if (obs.content, obs.error) != (before.content, before.error):
                drift.append(index)
        return await episode.check()

    try:
        status = await asyncio.wait_for(play(), timeout=timeout)
        error = ""
    except TimeoutError:
        status, error = "error", f"replay exceeded {timeout:g}s"
    except StageError as exc:
        status, error = "error", f"{attribute(exc.kind, exc.original)} error: {exc}"
    finally:
        metadata = dict(trajectory.metadata)
        await episode.close()
        trajectory.metadata = metadata  # close() may note a close error; the stored record stays as it was
    return Replay(status, episode.verdicts, error, drift)
