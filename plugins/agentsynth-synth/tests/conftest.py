"""A tiny notes world (a real environment plugin registered for the tests), a pack on it, and a
scripted OpenAI-compatible server whose answers depend on the model asked (teachers, solvers,
explorer, writer, challenger, evolver)."""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agentsynth_kernel import Observation, ToolCall, ToolSpec, Trajectory, Verdict, get_host, hookimpl  # noqa: E402
from agentsynth_kernel.testing import ScriptedLLMServer, reply, status, tool_calls  # noqa: E402,F401

_STR = {"type": "string"}
KEY_RE = re.compile(r"^[a-z_]+$")


class NotesWorld:
    """A dict of notes. ``read`` of a missing key is an error; a key with other characters than
    a-z and _ is a syntax error."""

    def __init__(self, initial: dict[str, str] | None = None, show_seed: bool = False) -> None:
        self.initial = dict(initial or {"color": "red", "size": "M"})
        self.show_seed = show_seed  # the first observation names the episode's seed (tests tell attempts apart)
        self.notes: dict[str, str] = {}

    def reset(self, seed: int) -> Observation:
        self.notes = dict(self.initial)
        return Observation(f"notes: {', '.join(sorted(self.notes))}" + (f" (episode {seed})" if self.show_seed else ""))

    def tools(self) -> list[ToolSpec]:
        obj = lambda **p: {"type": "object", "properties": p, "required": list(p)}  # noqa: E731
        return [ToolSpec("read", "Read a note", obj(key=_STR)),
                ToolSpec("write", "Write a note", obj(key=_STR, value=_STR)),
                ToolSpec("list", "List the notes", {"type": "object", "properties": {}})]

    def step(self, call: ToolCall) -> Observation:
        key = str(call.arguments.get("key", ""))
        if call.name == "list":
            return Observation(", ".join(f"{k}={v}" for k, v in sorted(self.notes.items())))
        if not KEY_RE.match(key):
            return Observation(f"syntax error near {key!r}", error=True)
        if call.name == "write":
            self.notes[key] = str(call.arguments["value"])
            return Observation("ok")
        if call.name == "read":
            if key not in self.notes:
                return Observation("", error=True)
            return Observation(self.notes[key])
        return Observation(f"unknown tool {call.name}", error=True)

    def state_fingerprint(self) -> dict[str, str]:
        return dict(self.notes)

    def close(self) -> None:
        pass


class NoteEquals:
    def __init__(self, key: str, value: str | None) -> None:
        self.key, self.value = key, value

    def check(self, env: NotesWorld, trajectory: Trajectory) -> Verdict:
        actual = env.notes.get(self.key)
        ok = actual == self.value
        return Verdict("note_equals", ok, float(ok), f"{self.key}={actual!r}, expected {self.value!r}")


class StepsJudge:
    """A deterministic judge for the tests: fewer steps score higher (1 / steps)."""

    def score(self, trajectory: Trajectory, verdicts: list[Verdict]) -> Any:
        from agentsynth_kernel import JudgeResult

        if "'size'" in trajectory.instruction:
            raise RuntimeError("the judge cannot read this one")

        return JudgeResult(score=1.0 / max(1, len(trajectory.steps)), rationale="fewer steps is better")


class _TestPlugin:
    @hookimpl
    def register_judges(self, register: Any) -> None:
        register("steps", StepsJudge, description="1 / steps (agentsynth-synth tests)")

    @hookimpl
    def register_environments(self, register: Any) -> None:
        register("notes", NotesWorld, description="notes world (agentsynth-synth tests)")

    @hookimpl
    def register_checkers(self, register: Any) -> None:
        register("note_equals", NoteEquals, description="A note has a value at the end")


@pytest.fixture(scope="session", autouse=True)
def notes_plugin():
    host = get_host()
    host.add_plugin(_TestPlugin(), "synth-tests")
    yield host
    host.remove_plugin("synth-tests")


PACK_YAML = """
id: notes
description: notes tasks
environment: {type: notes}
oracle: oracle.py
tasks:
  - id: set-color
    instruction: Set the note 'color' to 'blue'.
    checkers: [{type: note_equals, key: color, value: blue}]
  - id: set-size
    instruction: Set the note 'size' to 'L'.
    split: train
    checkers: [{type: note_equals, key: size, value: L}]
"""

ORACLE_PY = """
ORACLE = {
    "set-color": [{"tool": "write", "arguments": {"key": "color", "value": "blue"}}, {"answer": "done"}],
    "set-size": [{"tool": "write", "arguments": {"key": "size", "value": "L"}}, {"answer": "done"}],
}
"""


@pytest.fixture
def pack_dir(tmp_path: Path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    (d / "pack.yaml").write_text(textwrap.dedent(PACK_YAML).lstrip(), encoding="utf-8")
    (d / "oracle.py").write_text(textwrap.dedent(ORACLE_PY).lstrip(), encoding="utf-8")
    return d


# --- the scripted LLM ------------------------------------------------------------------------------

SET_RE = re.compile(r"the note '(\w+)' to '(\w+)'")


def turn(request: dict[str, Any]) -> int:
    return sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")


def first_user(request: dict[str, Any]) -> str:
    return next((m.get("content") or "" for m in request.get("messages", []) if m.get("role") == "user"), "")


def solver(request: dict[str, Any], *, writes: Callable[[str, str], tuple[str, str]] | None = None) -> Any:
    """Reads 'Set the note K to V' requests (all of them) and writes them, then answers."""
    pairs = SET_RE.findall(first_user(request))
    if turn(request) == 0 and pairs:
        calls = []
        for k, v in pairs:
            k2, v2 = writes(k, v) if writes else (k, v)
            calls.append(("write", {"key": k2, "value": v2}))
        return tool_calls(*calls)
    return reply("done")


def explorer(request: dict[str, Any]) -> Any:
    m = re.search(r"Focus: (\w+)(?: (\w+))?\.", first_user(request))
    value = m.group(1) if m else "green"
    readonly = m is not None and m.group(2) == "readonly"
    k = turn(request)
    if k == 0:
        return tool_calls(("read", {"key": "color"}))
    if k == 1 and not readonly:
        return tool_calls(("write", {"key": "color", "value": value}))
    return reply("I changed the color.")


def writer(request: dict[str, Any]) -> Any:
    text = first_user(request)
    values = re.findall(r'"value": "(\w+)"', text)
    value = values[-1] if values else None
    instruction = f"Please change our color note to {value}." if value else "Please tell me the color note."
    return reply(json.dumps({"instruction": instruction, "answer": "Done.",
                             "probes": [{"tool": "read", "arguments": {"key": "color"}}]}))


class Router:
    """Dispatches a request by model name to a handler; counts requests per model."""

    def __init__(self) -> None:
        self.routes: dict[str, Callable[[dict[str, Any]], Any]] = {
            "good": solver,
            "good2": solver,
            "bad": lambda r: solver(r, writes=lambda k, v: (k, v + "x")),
            "extra": lambda r: solver(r) if turn(r) else tool_calls(
                *[("write", {"key": k, "value": v}) for k, v in SET_RE.findall(first_user(r))],
                ("write", {"key": "note", "value": "extra"})),
            "lazy": lambda r: reply("done"),
            "explorer": explorer,
            "writer": writer,
        }
        self.counts: dict[str, int] = {}
        self.usage: tuple[int, int] | None = None  # bill every answer at this (prompt, completion)

    def __call__(self, request: dict[str, Any]) -> Any:
        model = str(request.get("model", ""))
        self.counts[model] = self.counts.get(model, 0) + 1
        handler = self.routes.get(model)
        if handler is None:
            return None
        answer = handler(request)
        if self.usage is not None:
            answer.usage = self.usage
        return answer


@pytest.fixture
def llm(tmp_path: Path):
    """(server, router): a scripted server routing by model; requests are logged on the server."""
    router = Router()
    with ScriptedLLMServer(handler=router) as server:
        server.router = router  # type: ignore[attr-defined]
        yield server


def policy(server: ScriptedLLMServer, model: str, **extra: Any) -> dict[str, Any]:
    return {"type": "llm", "model": f"openai/{model}", "api_base": server.base_url, **extra}
