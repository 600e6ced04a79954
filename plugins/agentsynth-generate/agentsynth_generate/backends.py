"""Where tool calls go: a real world (every call executes in a fresh world per item) or a model that
simulates the tools of a catalog (and every record says so: ``grounding: simulated``)."""

from __future__ import annotations

import json
from typing import Any

from agentsynth_kernel import Observation, ToolCall, ToolSpec, tool_specs

from .llm import JSON_OBJECT, Caller

MAX_OBSERVATION_CHARS = 20_000


def _cap(obs: Observation) -> Observation:
    if len(obs.content) > MAX_OBSERVATION_CHARS:
        obs = Observation(obs.content[:MAX_OBSERVATION_CHARS] + f"\n[... cut at {MAX_OBSERVATION_CHARS} characters]",
                          error=obs.error, done=obs.done)
    return Observation(obs.content, error=obs.error, done=obs.done)  # structured data is not part of training data


class WorldTools:
    """A fresh world built through the kernel registry (``environment`` of a pack, or any registered type).

    Its sync methods run on one thread of its own (thread-bound objects such as sqlite3 connections work,
    the event loop is never blocked, and an item that hangs in its world can be timed out)."""

    grounding = "world"

    def __init__(self, host: Any, pack: Any, task: Any) -> None:
        import concurrent.futures

        self.host, self.pack, self.task = host, pack, task
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate-world")
        self.env: Any = None
        self.busy = 0  # calls running on the world's thread (one stuck there means the world hung)
        self.specs: list[ToolSpec] = []
        self.initial = ""
        self.system = getattr(pack, "system_prompt", "") or ""  # the world's house rules

    async def _run(self, method: Any, *args: Any) -> Any:
        import asyncio
        import inspect

        if inspect.iscoroutinefunction(method):
            return await method(*args)
        self.busy += 1
        try:
            result = await asyncio.get_running_loop().run_in_executor(self.pool, lambda: method(*args))
        finally:
            self.busy -= 1
        return await result if inspect.isawaitable(result) else result

    async def open(self, seed: int) -> None:
        from agentsynth_kernel import build

        cspec = self.pack.task_environment(self.task)
        self.env = await self._run(lambda: build("environment", cspec, host=self.host, base_dir=self.pack.base_dir,
                                                 task=self.task, pack=self.pack))
        first = await self._run(self.env.reset, seed)
        self.initial = getattr(first, "content", "") or ""
        self.specs = tool_specs(list(await self._run(self.env.tools)))

    async def call(self, action: ToolCall, history: list[dict[str, Any]]) -> Observation:
        try:
            obs = await self._run(self.env.step, action)
        except Exception as exc:  # noqa: BLE001 - a tool that raises is an error result, not a crashed run
            return Observation(f"error: {type(exc).__name__}: {exc}", error=True)
        if not isinstance(obs, Observation):
            obs = Observation(str(obs))
        return _cap(obs)

    async def close(self) -> None:
        try:
            if self.env is not None and not self.busy:  # a hung call holds the thread: do not queue behind it
                await self._run(self.env.close)
        finally:
            self.env = None
            self.pool.shutdown(wait=False)  # a thread stuck in a hung world is left behind, not waited for


SIMULATOR_PROMPT = (
    "You simulate a software tool for building training data. Given the tool's description, its JSON "
    "Schema and the call's arguments, reply with ONLY the tool's output: a realistic, concise JSON value "
    "consistent with the earlier results shown. If the arguments cannot work, reply with "
    '{"error": "<why>"}. No prose, no code fences.'
)


class SimulatedTools:
    """Tool results written by a model from the catalog: plausible, never verified."""

    grounding = "simulated"

    def __init__(self, specs: list[ToolSpec], llm: Caller) -> None:
        self.specs = list(specs)
        self.by_name = {t.name: t for t in specs}
        self.llm = llm
        self.initial = ""
        self.system = ""
        self.results: list[dict[str, Any]] = []

    async def open(self, seed: int) -> None:
        self.results = []

    async def call(self, action: ToolCall, history: list[dict[str, Any]]) -> Observation:
        spec = self.by_name[action.name]
        payload = {"tool": spec.name, "description": spec.description, "parameters": spec.parameters,
                   "arguments": action.arguments, "earlier_results": self.results[-5:]}
        response = await self.llm([{"role": "system", "content": SIMULATOR_PROMPT},
                                   {"role": "user", "content": json.dumps(payload, sort_keys=True)}], purpose="simulate",
                                  response_format=JSON_OBJECT)
        text = strip_fences(response.content)
        error = False
        try:
            value = json.loads(text)
            error = isinstance(value, dict) and set(value) == {"error"}
        except ValueError:
            pass
        self.results.append({"tool": spec.name, "arguments": action.arguments, "result": text[:2000]})
        return _cap(Observation(text, error=error))

    async def close(self) -> None:
        self.results = []


def strip_fences(text: str) -> str:
    """Text without a surrounding Markdown code fence (models add them although told not to)."""
    text = (text or "").strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip()


def extract_json(text: str) -> Any:
    """The first JSON object in a model's answer (fences and prose around it are ignored); None if there is none."""
    text = strip_fences(text)
    try:
        return json.loads(text)
    except ValueError:
        pass
    start = text.find("{")
    while start != -1:
        depth = 0
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    try:
                        return json.loads(text[start:i + 1])
                    except ValueError:
                        break
        start = text.find("{", start + 1)
    return None
