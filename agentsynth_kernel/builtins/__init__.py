"""The kernel's built-in components, registered as an ordinary plugin (entry point ``builtins``)."""

from __future__ import annotations

from typing import Any

from ..hookspecs import hookimpl
from . import checkers, executors, llm_policy, policies


@hookimpl
def register_policies(register: Any) -> None:
    register("noop", policies.NoopPolicy, description="Answers at once without acting (floor baseline)")
    register("claim_success", policies.ClaimSuccessPolicy,
             description="Claims the task is done without acting (tests that checkers read the world)")
    register("random", policies.RandomPolicy, description="Random schema-valid tool calls (floor baseline)")
    register("callable", policies.CallablePolicy, description="Your own function: 'module:function' or 'file.py:function'")
    register("scripted", policies.ScriptedPolicy,
             description="Plays a fixed list of actions (a transcript replay, an exploit attempt)")
    register("oracle", policies.OraclePolicy, description="The pack's scripted oracle (oracle.py)")
    register("llm", llm_policy.LLMPolicy, description="Any chat model as the agent, via OpenAI tool calling (llm.py)")


@hookimpl
def register_checkers(register: Any) -> None:
    register("called_tool", checkers.CalledTool, description="The agent called a tool (optionally with given arguments)")
    register("answer_contains", checkers.AnswerContains, description="The final answer contains text / matches a regex")
    register("answer_number", checkers.AnswerNumber,
             description="The final answer states exactly one number (besides the task's own) and it is right")
    register("said", checkers.Said,
             description="What was said over a whole conversation (every message; optionally before a tool call)")


@hookimpl
def register_executors(register: Any) -> None:
    register("local", executors.LocalExecutor, description="Episodes in this process (the default)")
