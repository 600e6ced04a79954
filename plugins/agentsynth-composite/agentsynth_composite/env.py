"""The ``composite`` environment: one episode in several worlds at once.

``{type: composite, worlds: {db: {type: sql, ...}, py: {type: python, ...}}}`` builds every child
through the kernel's registry, exactly as the kernel builds an environment from a spec (same
factories, same spec classes, same context: ``base_dir``, ``task``, ``pack``, ``run``). The agent
sees every child's tools under its world's name, ``WORLD__TOOL`` (``db__sql_query``): OpenAI tool
names allow only ``[a-zA-Z0-9_-]``, so the separator is ``__``, and a world name may not contain
it (nor end in ``_``), which makes the split unambiguous.

Each child keeps the threading contract it has under the kernel: its async methods are awaited on
the event loop, its ``runs_inline`` methods are called there, and its other sync methods run on a
daemon thread of its own (one per child for the whole episode, so thread-bound objects keep
working and a child that blocks does not stall the others). Children are reset in parallel
(``parallel: false`` resets them one after the other); one that fails or takes longer than
``setup_seconds`` to start is an infrastructure failure naming the world and its reason, and the
worlds already started are closed first (a stuck one from a fresh thread, as the kernel closes a
stuck environment). ``close`` closes every child, even when one fails.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import (
    AgentsynthError,
    ComponentSpec,
    InvalidValue,
    Observation,
    SyncWorker,
    ToolCall,
    ToolSpec,
    build,
    check_component,
    get_host,
    how_called,
    runs_inline,
)

SEPARATOR = "__"
WORLD_NAME = re.compile(r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI accepts as a function name
MAX_WORLDS = 16


class CompositeWorldError(AgentsynthError):
    """A child world could not be built, started or closed: an infrastructure failure."""

    agentsynth_error_kind = "environment"


def world_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a world (None when it can)."""
    if not isinstance(name, str) or not WORLD_NAME.match(name):
        return (f"{name!r} is not a world name: letters and digits, single '-' or '_' between them "
                f"(no '{SEPARATOR}', which separates the world from the tool in WORLD{SEPARATOR}TOOL)")
    return None


def tool_name(world: str, tool: str) -> str:
    return f"{world}{SEPARATOR}{tool}"


def split_tool_name(name: str) -> tuple[str, str]:
    """``db__sql_query`` -> ``("db", "sql_query")``; ``("", name)`` when there is no world part."""
    world, sep, tool = name.partition(SEPARATOR)
    return (world, tool) if sep else ("", name)


# --- spec ------------------------------------------------------------------------------------------


def _worlds_validator(instance: Any, attribute: Any, value: dict[str, ComponentSpec]) -> None:
    if not value:
        raise InvalidValue("worlds: a composite environment needs at least one world")
    if len(value) > MAX_WORLDS:
        raise InvalidValue(f"worlds: at most {MAX_WORLDS} worlds, got {len(value)}")
    problems = []
    host = get_host()
    for name, cspec in value.items():
        problem = world_name_problem(name)
        if problem:
            problems.append(f"worlds.{name}: {problem}")
            continue
        problems += check_component("environment", cspec, f"worlds.{name}", host)
    if problems:
        raise InvalidValue("; ".join(problems))


def _above_zero(instance: Any, attribute: Any, value: float) -> None:
    if not value > 0 or value > 7 * 24 * 3600:
        raise InvalidValue(f"{attribute.name}: expected seconds > 0 (and at most a week), got {value!r}")


@attrs.frozen
class CompositeSpec:
    """Parameters of ``environment: {type: composite, ...}``.

    ``worlds`` maps a world name to a child environment spec (``{type: NAME, ...}``), checked
    against the child's own factory when the pack loads. ``setup_seconds`` bounds each child's
    reset, ``close_seconds`` each child's close; ``parallel`` resets the children concurrently.
    ``intro`` is shown above the children's first observations.
    """

    worlds: dict[str, ComponentSpec] = attrs.field(validator=_worlds_validator)
    parallel: bool = True
    setup_seconds: float = attrs.field(default=120.0, validator=_above_zero)
    close_seconds: float = attrs.field(default=30.0, validator=_above_zero)
    intro: str = ""


# --- one daemon thread per child: the kernel's SyncWorker, one per child world ------------------------


@attrs.define
class World:
    """One child of a composite: its environment, its thread, what it showed and offers."""

    name: str
    type: str
    env: Any
    lane: SyncWorker | None = None
    tools: list[ToolSpec] = attrs.field(factory=list)
    first: Observation | None = None
    started: bool = False
    reset_seconds: float = 0.0


# --- the environment -------------------------------------------------------------------------------


class CompositeEnvironment:
    """Several child environments in one episode (see the module docstring)."""

    def __init__(self, spec: CompositeSpec, base_dir: Path | None = None, task: Any = None, pack: Any = None,
                 run: Any = None) -> None:
        self.spec = spec
        self.worlds: dict[str, World] = {}
        self._tools: list[ToolSpec] = []
        self._by_name: dict[str, tuple[World, str]] = {}
        context = {"base_dir": base_dir, "task": task, "pack": pack, "run": run}
        for name, cspec in spec.worlds.items():
            try:
                env = build("environment", cspec, **context)
            except Exception as exc:
                raise CompositeWorldError(f"world {name!r} ({cspec.type}) could not be built: "
                                          f"{type(exc).__name__}: {exc}") from exc
            self.worlds[name] = World(name, cspec.type, env)

    # --- access for checkers and tests ---------------------------------------------------------

    def world(self, name: str) -> Any:
        """The child environment of world ``name``."""
        found = self.worlds.get(name)
        if found is None:
            raise KeyError(f"no world {name!r} in this composite environment (worlds: {', '.join(self.worlds)})")
        return found.env

    async def call_in(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn(*args)`` the way world ``name``'s own methods are called: awaited, inline,
        or on that world's thread; an awaitable result is awaited."""
        world = self.worlds[name]
        how = how_called(fn)
        if how == "await":
            result = await fn(*args)
        elif how == "inline":
            result = fn(*args)
        else:
            if world.lane is None:
                world.lane = SyncWorker()
            result = await world.lane.call(fn, *args)
        if inspect.isawaitable(result):
            result = await result
        return result

    # --- Environment protocol ------------------------------------------------------------------

    async def reset(self, seed: int) -> Observation:
        await self._close_all()  # a second reset starts from nothing
        for world in self.worlds.values():
            world.started, world.first, world.tools = False, None, []

        async def start(world: World) -> None:
            started = time.perf_counter()
            try:
                first = await asyncio.wait_for(self.call_in(world.name, world.env.reset, seed),
                                               self.spec.setup_seconds)
            except TimeoutError:
                raise CompositeWorldError(f"did not start within setup_seconds={self.spec.setup_seconds:g}") from None
            finally:
                world.started = True  # even half-started, it must be closed
            world.first = first if isinstance(first, Observation) else Observation(str(first or ""))
            world.tools = list(await self.call_in(world.name, world.env.tools))
            world.reset_seconds = time.perf_counter() - started

        worlds = list(self.worlds.values())
        failures: list[tuple[World, BaseException]] = []
        if self.spec.parallel:
            outcomes = await asyncio.gather(*(start(w) for w in worlds), return_exceptions=True)
            for world, outcome in zip(worlds, outcomes, strict=True):
                if isinstance(outcome, asyncio.CancelledError):
                    await self._close_all()
                    raise outcome
                if isinstance(outcome, BaseException):
                    failures.append((world, outcome))
        else:
            for world in worlds:
                try:
                    await start(world)
                except asyncio.CancelledError:
                    await self._close_all()
                    raise
                except BaseException as exc:  # a child's sys.exit() fails the episode, as under the kernel
                    failures.append((world, exc))
                    break
        if not failures:
            try:
                self._index()
            except CompositeWorldError:
                await self._close_all()
                raise
        if failures:
            others = [w.name for w in worlds if w.started and all(w is not f for f, _ in failures)]
            await self._close_all()
            reasons = "; ".join(f"world {w.name!r} ({w.type}) failed to start: {_describe(e)}" for w, e in failures)
            closed = f" (closed the worlds already started: {', '.join(others)})" if others else ""
            raise CompositeWorldError(reasons + closed) from failures[0][1]
        return self._first_observation()

    @runs_inline
    def tools(self) -> list[ToolSpec]:
        """Every child's tools, named ``WORLD__TOOL`` (computed at reset; quick, so inline)."""
        return list(self._tools)

    async def step(self, call: ToolCall) -> Observation:
        found = self._by_name.get(call.name)
        if found is None:
            return self._unknown(call.name)
        world, tool = found
        obs = await self.call_in(world.name, world.env.step, ToolCall(tool, call.arguments, id=call.id))
        return obs if isinstance(obs, Observation) else Observation(str(obs if obs is not None else ""))

    async def close(self) -> None:
        errors = await self._close_all()
        if errors:
            raise CompositeWorldError("; ".join(errors))

    # --- internals -----------------------------------------------------------------------------

    def _index(self) -> None:
        tools: list[ToolSpec] = []
        by_name: dict[str, tuple[World, str]] = {}
        for world in self.worlds.values():
            for spec in world.tools:
                name = tool_name(world.name, spec.name)
                if not TOOL_NAME.match(name):
                    raise CompositeWorldError(
                        f"world {world.name!r}: tool {spec.name!r} becomes {name!r}, which is not a valid tool "
                        "name (letters, digits, '_' and '-', at most 64 characters): use a shorter world name")
                if name in by_name:  # cannot happen with valid world names; kept as a guard
                    raise CompositeWorldError(f"tool name {name!r} is offered twice")
                by_name[name] = (world, spec.name)
                tools.append(ToolSpec(name, f"[world {world.name}] {spec.description}".rstrip(), spec.parameters,
                                          spec.read_only))
        self._tools, self._by_name = tools, by_name

    def _first_observation(self) -> Observation:
        parts = [self.spec.intro] if self.spec.intro else []
        parts.append(f"You act in {len(self.worlds)} worlds at once. Every tool is named WORLD{SEPARATOR}TOOL "
                     "and acts only in its own world.")
        data: dict[str, Any] = {}
        for world in self.worlds.values():
            names = ", ".join(tool_name(world.name, t.name) for t in world.tools) or "none"
            first = world.first or Observation()
            parts.append(f"## World {world.name!r} ({world.type}; tools: {names})\n{first.content}")
            data[world.name] = first.data
        return Observation("\n\n".join(parts), data={"worlds": data})

    def _unknown(self, name: str) -> Observation:
        world, tool = split_tool_name(name)
        if world in self.worlds:
            own = ", ".join(tool_name(world, t.name) for t in self.worlds[world].tools)
            return Observation(f"error: world {world!r} has no tool {tool!r} (its tools: {own})", error=True)
        return Observation(f"error: unknown tool {name!r}: tools are named WORLD{SEPARATOR}TOOL, worlds: "
                           f"{', '.join(self.worlds)}; available tools: {', '.join(self._by_name)}", error=True)

    async def _close_all(self) -> list[str]:
        """Close every started child (in parallel, each bounded by close_seconds); the reasons of
        those that failed. A child whose thread is still busy (a reset or step that never
        returned) is closed from a fresh thread, as the kernel closes an environment after a
        timeout, rather than queued behind the stuck call (closing is what unblocks it)."""
        errors: list[str] = []

        async def close_one(world: World) -> None:
            close = getattr(world.env, "close", None)
            lane = world.lane
            fresh: SyncWorker | None = None
            try:
                if close is None:
                    return
                if lane is not None and lane.busy and how_called(close) == "thread":
                    fresh = SyncWorker()
                    await asyncio.wait_for(fresh.call(close), self.spec.close_seconds)
                else:
                    await asyncio.wait_for(self.call_in(world.name, close), self.spec.close_seconds)
            except TimeoutError:
                errors.append(f"world {world.name!r}: close took longer than close_seconds="
                              f"{self.spec.close_seconds:g}")
            except Exception as exc:
                errors.append(f"world {world.name!r}: close failed: {_describe(exc)}")
            finally:
                world.started = False
                for used in (lane, fresh):
                    if used is not None:
                        used.stop()  # a stuck thread ends once its call returns
                world.lane = None

        await asyncio.gather(*(close_one(w) for w in self.worlds.values() if w.started))
        self._tools, self._by_name = [], {}
        return errors


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, CompositeWorldError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def worlds_of(params: Mapping[str, Any]) -> dict[str, ComponentSpec]:
    """The child specs in a composite environment's raw parameters (as a pack holds them)."""
    out: dict[str, ComponentSpec] = {}
    for name, raw in dict(params.get("worlds") or {}).items():
        if isinstance(raw, ComponentSpec):
            out[name] = raw
        elif isinstance(raw, Mapping) and isinstance(raw.get("type"), str):
            out[name] = ComponentSpec(raw["type"], {k: v for k, v in raw.items() if k != "type"})
    return out
