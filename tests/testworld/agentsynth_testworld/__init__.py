"""A key-value world for kernel tests: tools set/get/delete/fail/sleep, checker kv_equals.

``fail`` raises inside the environment (an environment bug, not a tool error);
``sleep`` blocks, to exercise timeouts.
"""

from __future__ import annotations

import time
from typing import Any

from agentsynth_kernel import Observation, ToolCall, ToolSpec, Trajectory, Verdict, hookimpl

_STR = {"type": "string"}


class KVWorld:
    def __init__(self, initial: dict[str, str] | None = None, broken_reset: bool = False) -> None:
        self.initial = dict(initial or {})
        self.broken_reset = broken_reset
        self.data: dict[str, str] = {}
        self.closed = False

    def reset(self, seed: int) -> Observation:
        if self.broken_reset:
            raise RuntimeError("reset exploded")
        self.data = dict(self.initial)
        return Observation(f"keys: {sorted(self.data)}")

    def tools(self) -> list[ToolSpec]:
        obj = lambda **p: {"type": "object", "properties": p, "required": list(p)}  # noqa: E731
        return [
            ToolSpec("set", "Set a key", obj(key=_STR, value=_STR)),
            ToolSpec("get", "Read a key", obj(key=_STR)),
            ToolSpec("delete", "Delete a key", obj(key=_STR)),
            ToolSpec("fail", "Crash the environment", obj()),
            ToolSpec("sleep", "Block for some seconds", obj(seconds={"type": "number", "minimum": 0, "maximum": 0.01})),
        ]

    def step(self, call: ToolCall) -> Observation:
        args = call.arguments
        if call.name == "set":
            if "key" not in args or "value" not in args:  # a malformed call is the agent's error, not a crash
                return Observation("error: set needs 'key' and 'value'", error=True)
            self.data[str(args["key"])] = str(args["value"])
            return Observation("ok")
        if call.name == "get":
            key = str(args.get("key"))
            if key not in self.data:
                return Observation(f"no key {key!r}", error=True)
            return Observation(self.data[key], data=self.data[key])
        if call.name == "delete":
            return Observation("ok" if self.data.pop(str(args.get("key")), None) is not None else "absent")
        if call.name == "fail":
            raise RuntimeError("the world broke")
        if call.name == "sleep":
            time.sleep(float(args.get("seconds", 1)))
            return Observation("slept")
        return Observation(f"unknown tool {call.name}", error=True)

    def close(self) -> None:
        self.closed = True


class KVEquals:
    def __init__(self, key: str, value: str | None) -> None:
        self.key, self.value = key, value

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        actual = env.data.get(self.key)
        ok = actual == self.value
        return Verdict("kv_equals", ok, float(ok), f"{self.key}={actual!r}, expected {self.value!r}")


@hookimpl
def register_environments(register):
    register("kv", KVWorld, description="In-memory key-value world (tests)")


@hookimpl
def register_checkers(register):
    register("kv_equals", KVEquals, description="A key has a value at the end (tests)")
