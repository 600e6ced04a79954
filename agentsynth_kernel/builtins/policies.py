"""Built-in policies: floors (noop, random, claim_success), your own function, the pack's oracle."""

from __future__ import annotations

import functools
import inspect
import string
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from ..components import EpisodeState, Turn, runs_inline
from ..errors import AgentsynthError
from ..importing import CodeRef, import_file, import_object
from ..records import Action, Answer, ToolCall

if TYPE_CHECKING:
    from ..spec import Pack, Task


class NoopPolicy:
    """Answers immediately and changes nothing: every outcome-checked task should fail."""

    def __init__(self, answer: str = "") -> None:
        self.answer = answer

    @runs_inline
    def act(self, state: EpisodeState) -> Action:
        return Answer(self.answer)


class ClaimSuccessPolicy:
    """Says it succeeded without acting: catches checkers that trust the agent's words."""

    def __init__(self, answer: str = "Done. I have completed the task successfully.") -> None:
        self.answer = answer

    @runs_inline
    def act(self, state: EpisodeState) -> Action:
        return Answer(self.answer)


class RandomPolicy:
    """Makes ``calls`` random tool calls with schema-valid arguments, then answers."""

    def __init__(self, calls: int = 3) -> None:
        self.calls = calls
        self.made = 0

    @runs_inline
    def act(self, state: EpisodeState) -> Action:
        if self.made >= self.calls or not state.tools:
            return Answer("done")
        self.made += 1
        tool = state.rng.choice(state.tools)
        return ToolCall(tool.name, random_value(tool.parameters, state.rng), id=f"call_{self.made}")


def random_value(schema: dict[str, Any], rng: Any, depth: int = 0) -> Any:
    """A random value valid against a (simple) JSON Schema."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = rng.choice([k for k in kind if k != "null"] or ["null"])
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", props))
        return {k: random_value(v, rng, depth + 1) for k, v in props.items() if k in required or rng.random() < 0.5}
    if kind == "array":
        return [random_value(schema.get("items", {}), rng, depth + 1) for _ in range(rng.randint(0, 2 if depth < 3 else 0))]
    if kind == "integer":
        return rng.randint(int(schema.get("minimum", 0)), int(schema.get("maximum", 100)))
    if kind == "number":
        return round(rng.uniform(float(schema.get("minimum", 0)), float(schema.get("maximum", 100))), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 8)))


class CallablePolicy:
    """Your own agent: ``function: 'module:act'`` or ``'agent.py:act'`` (sync or async).

    A function is called with the EpisodeState each turn. A class is instantiated
    once per episode (with ``params``) and its ``act(state)`` is called. It may return what the
    oracle may: ToolCall / Answer objects or dicts (``{"tool": ..., "arguments": {...}}``,
    ``{"answer": ...}``), a list of them, a Turn, or None (done). A relative file is found from
    the folder of the spec that names it (the loader makes it absolute; ``base_dir`` otherwise).
    """

    def __init__(self, function: Annotated[str, CodeRef()], params: dict[str, Any] | None = None,
                 base_dir: Path | None = None) -> None:
        target = import_object(function, base_dir=base_dir)
        if inspect.isclass(target):
            target = target(**(params or {}))
            act = getattr(target, "act", None)
            if not callable(act):
                raise AgentsynthError(f"{function!r}: class has no act(state) method")
            user = act
        elif callable(target):
            user = target if not params else functools.partial(target, **params)
        else:
            raise AgentsynthError(f"{function!r}: not callable")
        self.act = _converting(user, function)  # type: ignore[method-assign,assignment]

    def act(self, state: EpisodeState) -> Any:  # replaced per instance
        raise NotImplementedError


def _converting(user: Callable[[EpisodeState], Any], function: str) -> Callable[[EpisodeState], Any]:
    """``user`` with its result converted to actions; async stays async, sync stays sync (so a
    blocking function still runs on the episode's worker thread, not on the event loop)."""
    where = f"{function}: returned"
    if inspect.iscoroutinefunction(user) or inspect.iscoroutinefunction(type(user).__call__):
        async def act_async(state: EpisodeState) -> Any:
            return _policy_result(await user(state), where)

        return act_async

    def act(state: EpisodeState) -> Any:
        result = user(state)
        if inspect.isawaitable(result):  # a sync callable that hands back a coroutine
            return _awaited(result, where)
        return _policy_result(result, where)

    if getattr(user, "__agentsynth_inline__", False):
        act.__agentsynth_inline__ = True  # type: ignore[attr-defined]
    return act


async def _awaited(result: Any, where: str) -> Any:
    return _policy_result(await result, where)


def _policy_result(result: Any, where: str) -> Any:
    """A Turn or None as is; an action, a dict, or a list of them as actions."""
    if result is None or isinstance(result, Turn):
        return result
    if isinstance(result, (list, tuple)):
        return [to_action(a, f"{where} [{i}]") for i, a in enumerate(result)]
    if not isinstance(result, (dict, ToolCall, Answer)):
        raise TypeError(f"a policy must return a ToolCall, an Answer, a dict with 'tool'/'answer', a list of "
                        f"them or a Turn, got {type(result).__name__}")
    return to_action(result, where)


class ScriptedPolicy:
    """Plays a fixed list of actions (``{"tool": ..., "arguments": ...}`` / ``{"answer": ...}`` dicts or
    ToolCall / Answer objects), then answers: replays a transcript, or an exploit attempt of the
    adversarial test kit (``agentsynth_kernel.testing.adversarial``)."""

    def __init__(self, actions: list[Any] | Callable[[EpisodeState], list[Any]]) -> None:
        # a callable is asked once, at the first turn, when the task and the tools are known
        self.make = actions if callable(actions) else None
        self.actions = [] if callable(actions) else _actions(actions)
        self.position = 0

    @runs_inline
    def act(self, state: EpisodeState) -> Action:
        if self.make is not None:
            self.actions, self.make = _actions(self.make(state)), None
        action = self.actions[min(self.position, len(self.actions) - 1)]
        self.position += 1
        if isinstance(action, ToolCall) and not action.id:
            action = ToolCall(action.name, action.arguments, id=f"call_{self.position}")
        return action


def _actions(raw: list[Any], where: str = "actions[{}]") -> list[Action]:
    """A script of actions that ends with an answer (an empty one when it does not)."""
    actions = [to_action(a, where.format(i)) for i, a in enumerate(raw)]
    if not actions or not isinstance(actions[-1], Answer):
        actions.append(Answer(""))
    return actions


class OraclePolicy(ScriptedPolicy):
    """Replays the pack's oracle: ``oracle.py`` defines ``solve(task)`` returning the actions that
    solve it (ToolCall / Answer objects, or dicts ``{"tool": name, "arguments": {...}}`` /
    ``{"answer": text}``), or a dict ``ORACLE = {task_id: [actions]}``.
    """

    def __init__(self, task: Task, pack: Pack, file: str | None = None, base_dir: Path | None = None) -> None:
        path = Path(file) if file else pack.oracle_path
        if path is None:
            raise AgentsynthError(f"pack {pack.id!r} has no oracle (add oracle.py or 'oracle:' to the pack)")
        if not path.is_absolute():
            path = (base_dir or pack.base_dir) / path
        if not path.is_file():
            raise AgentsynthError(f"{path}: the pack's oracle file does not exist")
        actions = oracle_actions(pack, task, path)
        if actions is None:
            raise AgentsynthError(f"{path}: ORACLE has no entry for task {task.id!r}")
        super().__init__(actions)


def oracle_actions(pack: Pack, task: Task, file: Path | None = None) -> list[Action] | None:
    """The actions the pack's oracle (``file``, else ``pack.oracle_path``) gives for ``task``:
    ``solve(task)``'s, or ``ORACLE[task.id]``, as ToolCall / Answer objects and nothing more (the
    OraclePolicy ends a script without an answer with an empty one). None when there is no oracle file or the table has no
    entry for the task; an AgentsynthError naming the file when the oracle does not import or is
    not one of the two forms. ``solve`` runs at every call, so a nondeterministic oracle shows up
    in ``pack validate``'s determinism gate."""
    path = file if file is not None else pack.oracle_path
    if path is None or not path.is_file():
        return None
    try:
        module = import_file(path)
    except AgentsynthError:
        raise
    except Exception as exc:  # an oracle that does not import is the pack's bug, named as such
        raise AgentsynthError(f"{path}: the oracle does not import: {type(exc).__name__}: {exc}") from exc
    solve = getattr(module, "solve", None)
    table = getattr(module, "ORACLE", None)
    if callable(solve):
        raw = solve(task)
    elif isinstance(table, dict):
        if task.id not in table:
            return None
        raw = table[task.id]
    else:
        raise AgentsynthError(f"{path}: define solve(task) or ORACLE = {{task_id: [actions]}}")
    where = f"{path}: task {task.id!r}: action {{}}"
    return [to_action(a, where.format(i)) for i, a in enumerate(raw or [])]  # as given: no answer added


def to_action(value: Any, where: str = "action") -> Action:
    """A ToolCall/Answer from an object or a plain dict (``tool``+``arguments`` or ``answer``)."""
    if isinstance(value, (ToolCall, Answer)):
        return value
    if isinstance(value, dict):
        if "answer" in value:
            return Answer(str(value["answer"]))
        name = value.get("tool", value.get("name"))
        if isinstance(name, str):
            args = value.get("arguments", value.get("args", {}))
            if not isinstance(args, dict):
                raise AgentsynthError(f"{where}: 'arguments' must be a mapping")
            return ToolCall(name, args, id=str(value.get("id", "")))
    raise AgentsynthError(f"{where}: expected a ToolCall, an Answer, or a dict with 'tool'/'answer', got {value!r}")

