"""TRL's GRPOTrainer over a pack: a dataset of the pack's tasks, a ``reward_funcs`` entry whose
reward is the world's verdict, and an ``environment_factory`` class (one world per rollout, the
world's tools as its methods).

Nothing here imports trl or torch: the contract is plain Python (TRL calls
``reward_func(prompts=..., completions=..., **dataset_columns)`` and builds environments with
``factory()``), so it is tested without them; ``nox -s rl-train`` runs the real trainer.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import keyword
import re
from pathlib import Path
from typing import Any, Literal, Optional, Union

from agentsynth_kernel import (
    Answer,
    Pack,
    PluginHost,
    ToolCall,
    ToolSpec,
    Trajectory,
    get_host,
    replay_episode,
)

from .actions import ActionError, completion_steps, completion_turns
from .env import AsyncPackEnv, RewardMode, find_task, resolve_pack, reward_of, split_tasks
from .loop import on_loop, run_sync


def task_seed(task_id: str, index: int = 0, base: int = 0) -> int:
    """A stable world seed for a dataset row (same task, index and base -> same seed anywhere)."""
    digest = hashlib.sha256(f"{base}:{task_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def dataset_rows(pack: Pack | str | Path, *, split: str = "train", repeat: int = 1, seed: int = 0,
                 host: PluginHost | None = None) -> list[dict[str, Any]]:
    """One row per task of ``split`` (``repeat`` times, each with its own world seed): ``prompt``
    (chat messages: the pack's system prompt, the instruction and what the world shows first),
    ``task_id``, ``split``, ``seed`` and ``tier``. TRL passes the other columns to reward functions
    and to ``reset`` of an environment_factory class."""
    host = host or get_host()
    env = AsyncPackEnv(pack, split=split, host=host)
    if not (isinstance(repeat, int) and repeat >= 1):
        raise ValueError(f"repeat: expected an integer >= 1, got {repeat!r}")

    async def prompts() -> dict[str, list[dict[str, Any]]]:
        out = {}
        for task in env.tasks:  # the first observation may depend on the task's world (schema, page)
            await env.reset(seed=task_seed(task.id, 0, seed), options={"task_id": task.id})
            out[task.id] = [m for m in env.messages() if m["role"] in ("system", "user")]
        await env.close()
        return out

    first = run_sync(prompts())
    return [{"prompt": first[t.id], "task_id": t.id, "split": t.split, "seed": task_seed(t.id, i, seed),
             "tier": t.tier} for i in range(repeat) for t in env.tasks]


def make_dataset(pack: Pack | str | Path, **kwargs: Any) -> Any:
    """:func:`dataset_rows` as a ``datasets.Dataset`` (the ``trl`` extra installs ``datasets``)."""
    from datasets import Dataset

    return Dataset.from_list(dataset_rows(pack, **kwargs))


# --- reward_funcs -----------------------------------------------------------------------------------


class VerdictReward:
    """A TRL reward function: ``reward(prompts, completions, **kwargs) -> list[float | None]``.

    Each completion is scored by the pack's checkers on a world's end state:

    - with an ``environment_factory`` (TRL then passes ``environments=``), the rollout's own live
      world, after the final answer (the completion's last assistant text) is recorded;
    - otherwise the completion's tool calls (``tool_calls`` in messages, or ``<tool_call>`` JSON in
      text) are replayed in a fresh world seeded with the row's ``seed``
      (:func:`agentsynth_kernel.episode.replay_episode`), then checked.

    A task with a simulated user (``user:``) is a conversation: without environments, the
    completion's turns are replayed in order against the same simulated user, re-driven (its
    messages to the user are answers, or ``message_user`` tool calls), and every reply of the user
    must be the one the completion records after that turn; when one differs (an LLM user that
    answers otherwise) the completion answers a different conversation and is unscored (``None``,
    the error names the task and the turn). A completion that ends before the user ended the talk
    is checked as cut by the agent.

    Rows name their task with a ``task_id`` column (see :func:`dataset_rows`); a task outside
    ``split`` (``train`` by default) is refused. An episode that could not be checked (a broken
    world, a failing checker) scores ``None``, which TRL leaves out rather than counting as 0.
    ``last`` holds the details of the last batch (status, verdicts, split, seed, drift); under TRL
    the task id, split, seed and status also go to the completions table (``log_extra``).
    """

    def __init__(self, pack: Pack | str | Path, *, split: str = "train", reward: RewardMode = "pass",
                 timeout: float = 300.0, concurrency: int = 16, host: PluginHost | None = None):
        self.host = host or get_host()
        self.pack = resolve_pack(pack, self.host)
        self.split = split
        self.tasks = split_tasks(self.pack, split)
        if reward not in ("pass", "score"):
            raise ValueError(f"reward: expected 'pass' or 'score', got {reward!r}")
        if not (isinstance(concurrency, int) and concurrency >= 1):
            raise ValueError(f"concurrency: expected an integer >= 1, got {concurrency!r}")
        self.reward_mode: RewardMode = reward
        self.timeout, self.concurrency = float(timeout), concurrency
        self.__name__ = f"agentsynth_{self.pack.id}"  # TRL names the reward column after it
        self.last: list[dict[str, Any]] = []

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        return run_sync(self.score(prompts, completions, **kwargs))

    async def score(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        """The async twin of calling the object (for an async trainer or your own loop)."""
        n = len(completions)
        task_ids = kwargs.get("task_id")
        if task_ids is None:
            raise ValueError("the dataset needs a 'task_id' column naming each row's task "
                             "(agentsynth_rl.make_dataset builds one)")
        if len(task_ids) != n or len(prompts) != n:
            raise ValueError(f"got {len(prompts)} prompts, {n} completions and {len(task_ids)} task ids")
        seeds = kwargs.get("seed") or [task_seed(t) for t in task_ids]
        environments = kwargs.get("environments")
        tasks = [find_task(self.pack, self.tasks, t, self.split) for t in task_ids]
        limit = asyncio.Semaphore(self.concurrency)

        async def one(i: int) -> dict[str, Any]:
            async with limit:
                if environments is not None and isinstance(environments[i], PackToolEnv):
                    return await environments[i]._finish(final_answer(completions[i]))
                if tasks[i].user is not None:
                    return await self._replay_talk(tasks[i], int(seeds[i]), completions[i])
                return await self._replay(tasks[i], int(seeds[i]), completions[i])

        self.last = list(await asyncio.gather(*(one(i) for i in range(n))))
        log_extra = kwargs.get("log_extra")
        if callable(log_extra):  # TRL's completions table: which task, split and seed, and what the checkers said
            for column in ("task_id", "split", "seed", "status"):
                log_extra(column, [d[column] for d in self.last])
        return [d["reward"] for d in self.last]

    async def _replay(self, task: Any, seed: int, completion: Any) -> dict[str, Any]:
        try:
            steps = completion_steps(completion)
        except ActionError as exc:
            raise ValueError(f"task {task.id!r}: {exc}") from None
        traj = Trajectory(task.id, task.instruction, steps=steps, system_prompt=self.pack.system_prompt)
        replay = await replay_episode(self.host, self.pack, task, seed, traj, timeout=self.timeout)
        scored = replay.status != "error"
        return {"task_id": task.id, "split": task.split, "seed": seed, "status": replay.status,
                "reward": reward_of(replay.verdicts, {}, self.reward_mode, 0.0) if scored else None,
                "verdicts": replay.verdicts, "error": replay.error, "drift": replay.drift,
                "tool_calls": [s.action for s in steps if isinstance(s.action, ToolCall)], "mode": "replay"}


    async def _replay_talk(self, task: Any, seed: int, completion: Any) -> dict[str, Any]:
        """Replay a conversation: the completion's turns in a fresh world, against the task's own
        simulated user (see the class docstring)."""
        try:
            turns = completion_turns(completion)
        except ActionError as exc:
            raise ValueError(f"task {task.id!r}: {exc}") from None
        base = {"task_id": task.id, "split": task.split, "seed": seed, "mode": "replay", "drift": []}
        env = AsyncPackEnv(self.pack, split="all", reward=self.reward_mode, timeout=self.timeout, message_tool=True,
                           host=self.host)
        try:
            await env.reset(seed=seed, options={"task_id": task.id})
        except RuntimeError as exc:
            return {**base, "status": "error", "reward": None, "verdicts": [], "error": str(exc), "tool_calls": []}
        drift: list[int] = []
        calls = 0
        try:
            for k, turn in enumerate(turns):
                if env.done:
                    break
                *_, info = await env.play(turn.actions)
                ran = info["tool_messages"]
                for j, (action, _) in enumerate(turn.actions[:len(ran)]):
                    if not isinstance(action, ToolCall):
                        continue
                    recorded = turn.recorded(j, action.id)
                    if recorded is not None and action.name != "message_user" and recorded != ran[j]["content"]:
                        drift.append(calls)
                    calls += 1
                problem = _reply_mismatch(turn, ran, info["from"])
                if problem:
                    return {**base, "status": "error", "reward": None, "verdicts": [], "drift": drift,
                            "error": f"task {task.id!r}: turn {k} of the completion: {problem}; the completion "
                                     "answers another conversation and cannot be replayed (a scripted user "
                                     "replays exactly, an LLM user must answer the same)", "tool_calls": []}
            end = await env.finish(None)
        finally:
            await env.close()
        result = end["result"]
        scored = end["scored"]
        return {**base, "status": end["status"], "drift": drift, "error": end["error"],
                "reward": reward_of(result.verdicts, {}, self.reward_mode, 0.0) if scored else None,
                "verdicts": result.verdicts, "error_kind": end["error_kind"], "user_failed": end["user_failed"],
                "tool_calls": result.trajectory.tool_calls if result.trajectory else []}


def _reply_mismatch(turn: Any, ran: list[dict[str, Any]], speaker: str) -> str:
    """Why the user's reply in the replay is not the one the completion records ('' if it is)."""
    if speaker != "user":
        return "the completion records a user message after a turn that sent the user nothing" \
            if turn.user is not None else ""
    got = ran[-1]["content"]
    action = turn.actions[len(ran) - 1][0]
    want = turn.recorded(len(ran) - 1, action.id) if isinstance(action, ToolCall) else turn.user
    if want is not None and want.strip() != got.strip():
        return f"the simulated user replied {got[:200]!r}, the completion records {want[:200]!r}"
    return ""


def final_answer(completion: Any) -> str:
    """The completion's final answer: its last assistant text (reasoning removed), '' if it ended
    on a tool call."""
    steps = completion_steps(completion)
    if steps and isinstance(steps[-1].action, Answer):
        return steps[-1].action.content
    return ""


# --- environment_factory ------------------------------------------------------------------------------

_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool,
                               "array": list, "object": dict, "null": type(None)}


def _hint(schema: Any) -> Any:
    """A Python type hint transformers turns back into (nearly) the same JSON schema."""
    if not isinstance(schema, dict):
        return Any
    kind = schema.get("type")
    if isinstance(kind, list):
        members = tuple(_JSON_TYPES.get(k, Any) for k in kind)
        return Any if Any in members else Union[members]  # noqa: UP007 - built at run time
    if kind == "array":
        items = schema.get("items")
        return list[_hint(items)] if isinstance(items, dict) and items.get("type") else list
    if "enum" in schema and all(isinstance(v, (str, int, float, bool)) for v in schema["enum"]):
        return Literal[tuple(schema["enum"])]
    return _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _tool_method(spec: ToolSpec) -> Any:
    """A method named after the tool, with typed parameters and a Google-style docstring, so TRL
    (through transformers' get_json_schema) shows the model the world's own schema."""
    if not spec.name.isidentifier() or keyword.iskeyword(spec.name) or spec.name.startswith("_") \
            or spec.name in ("reset", "get_reward"):
        raise ValueError(f"tool {spec.name!r} cannot be a method of a TRL environment (TRL exposes methods as "
                         "tools: the name must be a Python identifier, not private and not reset/get_reward)")
    props = spec.parameters.get("properties") or {}
    required = set(spec.parameters.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    lines = []
    for name, schema in props.items():
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"tool {spec.name!r}: parameter {name!r} is not a Python identifier; TRL cannot pass it")
        hint = _hint(schema)
        optional = name not in required
        annotations[name] = Optional[hint] if optional and hint is not Any else hint  # noqa: UP045
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotations[name],
                                        default=None if optional else inspect.Parameter.empty))
        text = " ".join(str(schema.get("description") or f"The {name}.").split()) if isinstance(schema, dict) else ""
        lines.append(f"    {name}: {text or f'The {name}.'}")
    tool_name = spec.name

    def method(self: PackToolEnv, **arguments: Any) -> str:
        return self._call_tool(tool_name, {k: v for k, v in arguments.items() if v is not None})

    method.__name__ = method.__qualname__ = tool_name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    description = " ".join((spec.description or f"The {tool_name} tool.").split())
    method.__doc__ = description + ("\n\nArgs:\n" + "\n".join(lines) if lines else "") + \
        "\n\nReturns:\n    The tool's result as text."
    return method


class PackToolEnv:
    """Base of the classes :func:`environment_factory` makes: one world per rollout.

    TRL calls ``reset(**row)`` at the start of each rollout (the row's ``task_id`` and ``seed``
    pick the task and seed the world; without them a task of the split is drawn at random), then
    the tool methods; the reward comes from :class:`VerdictReward` (which finishes the episode
    with the completion's final answer) or, with ``owns_reward=True``, from ``get_reward``.
    Instances are pooled by TRL and reset for every rollout: each reset builds a fresh world.
    """

    _pack: Pack
    _options: dict[str, Any]
    _tool_names: tuple[str, ...]

    def __init__(self) -> None:
        self.env = AsyncPackEnv(self._pack, **self._options)
        self.outcome: dict[str, Any] | None = None

    def reset(self, **kwargs: Any) -> str | None:
        """Start a rollout; returns the first observation when the row has no prompt (TRL appends
        it to the last user message), else None (the row's prompt already holds it)."""
        options = {"task_id": kwargs["task_id"]} if kwargs.get("task_id") else None
        seed = kwargs.get("seed")
        self.outcome = None
        observation, _ = run_sync(self.env.reset(seed=int(seed) if seed is not None else None, options=options))
        tools = tuple(t.name for t in self.env.tool_specs)
        if tools != self._tool_names:
            task = self.env.episode.task.id if self.env.episode is not None else "?"
            raise ValueError(f"task {task!r}: its world offers tools "
                             f"{list(tools)}, this environment class was made for {list(self._tool_names)}; "
                             "make one class per tool set (environment_factory(pack, task_ids=[...]))")
        return None if kwargs.get("prompt") else observation

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool call in this rollout's world (or, ``message_user``, send the simulated user a
        message) and return what the agent sees."""
        if self.env.done:
            return "error: the episode is over" + (" (the user ended the conversation)" if self.outcome and
                                                   self.outcome.get("user_stopped") else " (the step limit was reached)")
        observation, _, terminated, truncated, info = run_sync(self.env.step({"tool": name, "arguments": arguments}))
        if terminated or truncated:
            self.outcome = self._outcome(info)
            if info["from"] == "user" and not info["user_failed"]:
                observation = f"{observation}\n\n(the user ended the conversation)".strip()
        return observation

    async def _finish(self, answer: str | None = "") -> dict[str, Any]:
        """End the rollout with ``answer`` as the final message (to the simulated user, on a
        multi-turn task; ``None``: say nothing more) and check the world's end state (idempotent:
        a rollout already ended keeps its first verdict)."""
        if self.outcome is None:
            if self.env.done:
                raise RuntimeError("no rollout to score: reset() was not called")
            self.outcome = self._outcome(await on_loop(self.env.finish(answer)))
        return self.outcome

    def _outcome(self, info: dict[str, Any]) -> dict[str, Any]:
        result = info["result"]
        reward = reward_of(result.verdicts, result.scores, self.env.reward_mode, self.env.judge_weight) \
            if info["scored"] else None
        return {"task_id": info["task_id"], "split": info["split"], "seed": info["seed"], "status": info["status"],
                "reward": reward, "verdicts": result.verdicts, "error": info["error"], "result": result,
                "tool_calls": result.trajectory.tool_calls if result.trajectory else [], "mode": "live",
                "error_kind": info["error_kind"], "user_failed": info["user_failed"],
                "user_stopped": info.get("user_stopped", "")}


def _get_reward(self: PackToolEnv) -> float:
    """The verdict of the rollout's world (the final answer is taken as empty: use VerdictReward
    for packs whose checkers read the answer; on a multi-turn task nothing more is said to the
    user). An unscored rollout (a broken world, a failed simulated user) gives 0.0."""
    outcome = run_sync(self._finish(None if self.env.user is not None else ""))
    return float(outcome["reward"] or 0.0)


def environment_factory(pack: Pack | str | Path, *, split: str = "train", owns_reward: bool = False,
                        task_ids: list[str] | None = None, host: PluginHost | None = None,
                        **options: Any) -> type[PackToolEnv]:
    """A class to pass as ``GRPOTrainer(environment_factory=...)``: its public methods are the
    world's tools (probed from a fresh world of the first task), ``reset(**row)`` builds the
    rollout's world. ``options`` go to :class:`AsyncPackEnv` (``reward``, ``max_steps``,
    ``timeout``, ``judge``, ``judge_weight``). On tasks with a simulated user the class also has
    ``message_user(message)`` (TRL's loop speaks only tools): its result is the user's reply, and
    the user's own tools are not methods. ``task_ids`` restricts the tasks (all of ``split``
    by default); ``owns_reward`` adds TRL's ``get_reward`` (verdict with an empty final answer)."""
    host = host or get_host()
    pack_obj = resolve_pack(pack, host)
    options = {"message_tool": True, **options}
    probe = AsyncPackEnv(pack_obj, split=split, host=host, **options)
    if task_ids is not None:
        probe.tasks = [find_task(pack_obj, probe.tasks, t, split) for t in task_ids]

    async def tools() -> list[ToolSpec]:
        await probe.reset(seed=0, options={"task_id": probe.tasks[0].id})
        specs = list(probe.tool_specs)
        await probe.close()
        return specs

    specs = run_sync(tools())
    namespace: dict[str, Any] = {spec.name: _tool_method(spec) for spec in specs}
    namespace.update(_pack=pack_obj, _options={"split": split, "host": host, **options},
                     _tool_names=tuple(s.name for s in specs), __module__=__name__,
                     __doc__=f"Pack {pack_obj.id!r} ({split} split) as a TRL environment: tools "
                             f"{', '.join(s.name for s in specs)}.")
    if owns_reward:
        namespace["get_reward"] = _get_reward
    name = "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", pack_obj.id) if p) + "Env"
    cls = type(name, (PackToolEnv,), namespace)
    if task_ids is not None:
        allowed = list(probe.tasks)

        def __init__(self: PackToolEnv) -> None:
            PackToolEnv.__init__(self)
            self.env.tasks = allowed

        cls.__init__ = __init__  # type: ignore[misc]
    return cls
