"""Hook implementations: what this plugin registers with the kernel."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import Observation, ToolCall, ToolSpec, hookimpl


class RlEnvironment:
    """A fresh world per episode. Replace with the real thing."""

    def reset(self, seed: int) -> Observation:
        self.calls = 0
        return Observation("ready")

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("ping", "Answer pong", {"type": "object", "properties": {}})]

    def step(self, call: ToolCall) -> Observation:
        self.calls += 1
        return Observation("pong")

    def close(self) -> None:
        pass


@hookimpl
def register_environments(register: Any) -> None:
    register("rl", RlEnvironment, description="gym API over any pack, TRL GRPO reward functions and environment_factory, OpenEnv server; rewards are the world's verdicts")
