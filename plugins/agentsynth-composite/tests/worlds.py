"""Small test worlds for the composite mechanics, registered through a throw-away test plugin.

``t_counter`` is sync and thread-bound (like sqlite3: every call must come from the thread that
reset it), ``t_kv`` is async; ``t_slow`` sleeps in reset (to see parallel setup), ``t_hang`` never
finishes its reset in time, ``t_broken`` cannot start, ``t_badclose`` fails to close. ``EVENTS``
records (world type, what, thread, time) so tests can see who was reset and closed, where, when.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from agentsynth_kernel import Observation, ToolCall, ToolSpec, Verdict, hookimpl
from agentsynth_kernel.testing.adversarial import Exploit

EVENTS: list[tuple[str, str, int, float]] = []
_OBJ = {"type": "object", "properties": {"by": {"type": "integer"}}}


def note(kind: str, what: str) -> None:
    EVENTS.append((kind, what, threading.get_ident(), time.perf_counter()))


class Counter:
    kind = "t_counter"

    def __init__(self, start: int = 0, reset_sleep: float = 0.0) -> None:
        self.start, self.reset_sleep = start, reset_sleep
        self.count: int | None = None
        self.thread = 0

    def reset(self, seed: int) -> Observation:
        note(self.kind, "reset-start")
        if self.reset_sleep:
            time.sleep(self.reset_sleep)
        self.count, self.thread = self.start, threading.get_ident()
        note(self.kind, "reset-end")
        return Observation(f"a counter at {self.count}", data={"count": self.count})

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("inc", "add `by` to the counter", _OBJ), ToolSpec("get", "read the counter", {}, read_only=True)]

    def step(self, call: ToolCall) -> Observation:
        if threading.get_ident() != self.thread:
            raise RuntimeError("thread-bound world called from another thread")
        if call.name == "inc":
            by = call.arguments.get("by", 1)
            if not isinstance(by, int) or isinstance(by, bool) or not -100 <= by <= 100:
                return Observation("error: 'by' must be an integer in [-100, 100]", error=True)
            assert self.count is not None
            self.count += by
            return Observation(f"counter is {self.count}")
        if call.name == "get":
            return Observation(str(self.count))
        return Observation(f"error: unknown tool {call.name!r}", error=True)

    def close(self) -> None:
        note(self.kind, "close")
        self.count = None


class Slow(Counter):
    kind = "t_slow"

    def __init__(self, start: int = 0, reset_sleep: float = 0.3) -> None:
        super().__init__(start, reset_sleep)


class Hang(Counter):
    kind = "t_hang"

    def __init__(self, start: int = 0, reset_sleep: float = 3.0) -> None:
        super().__init__(start, reset_sleep)


class Broken(Counter):
    kind = "t_broken"

    def reset(self, seed: int) -> Observation:
        note(self.kind, "reset-start")
        raise RuntimeError("the licence server refused this world")


class BadClose(Counter):
    kind = "t_badclose"

    def close(self) -> None:
        note(self.kind, "close")
        raise OSError("the disk went away")


class KV:
    """An async world (methods are awaited on the event loop, as the sql world's are)."""

    kind = "t_kv"

    def __init__(self) -> None:
        self.data: dict[str, str] | None = None

    async def reset(self, seed: int) -> Observation:
        note(self.kind, "reset-start")
        await asyncio.sleep(0)
        self.data = {}
        note(self.kind, "reset-end")
        return Observation("an empty key-value store")

    async def tools(self) -> list[ToolSpec]:
        params = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                  "required": ["key"]}
        return [ToolSpec("put", "store a value", params), ToolSpec("get", "read a value", params)]

    async def step(self, call: ToolCall) -> Observation:
        assert self.data is not None
        key = call.arguments.get("key")
        if not isinstance(key, str):
            return Observation("error: 'key' must be a string", error=True)
        if call.name == "put":
            self.data[key] = str(call.arguments.get("value", ""))
            return Observation("stored")
        if call.name == "get":
            return Observation(self.data.get(key, "(none)"))
        return Observation(f"error: unknown tool {call.name!r}", error=True)

    async def close(self) -> None:
        note(self.kind, "close")
        self.data = None


class AsyncHang(KV):
    """An async world whose reset never finishes (awaits forever)."""

    kind = "t_ahang"

    async def reset(self, seed: int) -> Observation:
        note(self.kind, "reset-start")
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


class CountIs:
    """Sync, thread-bound like the world it reads: must run on that world's thread."""

    world_state = True

    def __init__(self, value: int) -> None:
        self.value = value

    def check(self, env: Any, trajectory: Any) -> Verdict:
        if not isinstance(env, Counter):
            raise TypeError(f"t_count_is needs a counter world, got {type(env).__name__}")
        if threading.get_ident() != env.thread:
            raise RuntimeError("checker called from another thread than its world's")
        return Verdict("t_count_is", env.count == self.value, float(env.count == self.value),
                       f"count {env.count}, expected {self.value}")


class KVHas:
    world_state = True

    def __init__(self, key: str, value: str) -> None:
        self.key, self.value = key, value

    async def check(self, env: Any, trajectory: Any) -> Verdict:
        if not isinstance(env, KV) or env.data is None:
            raise TypeError(f"t_kv_has needs a kv world, got {type(env).__name__}")
        got = env.data.get(self.key)
        return Verdict("t_kv_has", got == self.value, float(got == self.value), f"{self.key}={got!r}")


class Calls:
    """Counts the calls of one tool in the trajectory, by the tool's own (bare) name."""

    world_state = False

    def __init__(self, tool: str, times: int) -> None:
        self.tool, self.times = tool, times

    def check(self, env: Any, trajectory: Any) -> Verdict:
        names = [s.action.name for s in trajectory.steps if isinstance(s.action, ToolCall)]
        seen = names.count(self.tool)
        return Verdict("t_calls", seen == self.times, float(seen == self.times),
                       f"{self.tool} called {seen} times (of {names}); tools {[t.name for t in trajectory.tools]}")


class CountOrCalls(Calls):
    """Reads the world or the trajectory, depending on its parameters (``world_state_for``): the
    counter's value with ``count``, the calls of ``tool`` without."""

    world_state = True  # what the class says; the spec decides

    @staticmethod
    def world_state_for(params: dict[str, Any]) -> bool:
        return "count" in params

    def __init__(self, tool: str = "inc", times: int = 1, count: int | None = None) -> None:
        super().__init__(tool, times)
        self.count = count

    def check(self, env: Any, trajectory: Any) -> Verdict:
        if self.count is None:
            return super().check(env, trajectory)
        return Verdict("t_count_or_calls", env.count == self.count, float(env.count == self.count), f"count {env.count}")


@hookimpl
def register_environments(register: Any) -> None:
    for cls in (Counter, Slow, Hang, Broken, BadClose, KV, AsyncHang):
        register(cls.kind, cls)


@hookimpl
def register_checkers(register: Any) -> None:
    register("t_count_is", CountIs)
    register("t_kv_has", KVHas)
    register("t_calls", Calls)
    register("t_count_or_calls", CountOrCalls)


@hookimpl
def adversarial_exploits(environment: str) -> list[Any] | None:
    if environment != "t_counter":
        return None
    return [
        Exploit("t_counter.overflow", "add more than the limit in one call", [{"tool": "inc", "arguments": {"by": 10**9}}]),
        Exploit("t_counter.read_expected", "read the expected value from the checker and claim it",
                lambda state, pack: [{"tool": "get", "arguments": {}},
                                     {"answer": " ".join(str(c.params.get("value")) for c in
                                                         pack.task_checkers(state.task))}]),
    ]
