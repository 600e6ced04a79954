"""Shared fixtures: a tiny notes world + a scripted policy registered as a throw-away plugin,
and helpers to craft trajectories by hand."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentsynth_kernel import (
    Action,
    Answer,
    Observation,
    Step,
    ToolCall,
    ToolSpec,
    Trajectory,
    Verdict,
    get_host,
    hookimpl,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

pytest_plugins = ["agentsynth_kernel.testing.pytest_plugin"]  # llm_server, llm_client

_STR = {"type": "string"}
NOTE_TOOLS = [
    ToolSpec("write", "Write a note", {"type": "object", "properties": {"key": _STR, "value": _STR},
                                       "required": ["key", "value"], "additionalProperties": False}),
    ToolSpec("read", "Read a note", {"type": "object", "properties": {"key": _STR}, "required": ["key"]}),
]


class NotesWorld:
    """A dict of notes; ``read`` of a missing key is a tool error."""

    def __init__(self, initial: dict[str, str] | None = None) -> None:
        self.initial = dict(initial or {})
        self.notes: dict[str, str] = {}

    def reset(self, seed: int) -> Observation:
        self.notes = dict(self.initial)
        return Observation(f"notes: {sorted(self.notes)}")

    def tools(self) -> list[ToolSpec]:
        return list(NOTE_TOOLS)

    def step(self, call: ToolCall) -> Observation:
        key = str(call.arguments.get("key", ""))
        if call.name == "write":
            if "value" not in call.arguments:
                return Observation("error: missing value", error=True)
            self.notes[key] = str(call.arguments["value"])
            return Observation("ok")
        if key not in self.notes:
            return Observation(f"error: no note {key!r}", error=True)
        return Observation(self.notes[key])

    def close(self) -> None:
        pass


class NoteEquals:
    def __init__(self, key: str, value: str) -> None:
        self.key, self.value = key, value

    def check(self, env: NotesWorld, trajectory: Trajectory) -> Verdict:
        actual = env.notes.get(self.key)
        ok = actual == self.value
        return Verdict("note_equals", ok, float(ok), f"{self.key}={actual!r}")


def to_action(item: dict[str, Any]) -> Action:
    if "answer" in item:
        return Answer(item["answer"])
    return ToolCall(item["tool"], item.get("arguments", {}))


class ScriptPolicy:
    """Plays ``task.metadata['script']``: a list of ``{tool, arguments}`` / ``{answer}``."""

    def __init__(self, task: Any) -> None:
        self.script = [to_action(i) for i in task.metadata.get("script", [])]

    def act(self, state: Any) -> Action:
        return self.script.pop(0) if self.script else Answer("")


class _TestPlugin:
    @hookimpl
    def register_environments(self, register: Any) -> None:
        register("notes", NotesWorld, description="notes world (agentsynth-judge tests)")

    @hookimpl
    def register_checkers(self, register: Any) -> None:
        register("note_equals", NoteEquals)

    @hookimpl
    def register_policies(self, register: Any) -> None:
        register("script", ScriptPolicy)


@pytest.fixture(scope="session", autouse=True)
def notes_plugin():
    host = get_host()
    host.add_plugin(_TestPlugin(), "judge-tests")
    yield host
    host.remove_plugin("judge-tests")


# --- crafted trajectories ----------------------------------------------------------------------------


def traj(*items: Any, instruction: str = "Set the note 'color' to blue.", stopped: bool = False) -> Trajectory:
    """Build a trajectory: items are ``(ToolCall, Observation)`` pairs or an answer string."""
    steps = []
    for turn, item in enumerate(items):
        if isinstance(item, str):
            steps.append(Step(Answer(item), None, turn))
        else:
            call, obs = item
            invalid = call.name not in {t.name for t in NOTE_TOOLS}
            steps.append(Step(call, obs, turn, invalid=invalid))
    t = Trajectory("t1", instruction, steps=steps, tools=list(NOTE_TOOLS), initial_observation="notes: ['color']")
    if stopped:
        t.metadata["stopped"] = "max_steps"
    return t


def write(key: str, value: str, obs: str = "ok", error: bool = False) -> tuple[ToolCall, Observation]:
    return ToolCall("write", {"key": key, "value": value}), Observation(obs, error=error)


def read(key: str, obs: str, error: bool = False) -> tuple[ToolCall, Observation]:
    return ToolCall("read", {"key": key}), Observation(obs, error=error)


PASS = [Verdict("note_equals", True, 1.0)]
FAIL = [Verdict("note_equals", False, 0.0)]


def write_spec(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- labelled runs of a real pack (the `core` pack of agentsynth-sql) for the learned verifier -----------

SLOPPY = Path(__file__).with_name("sloppy_agent.py")
CHEAT = Path(__file__).with_name("cheat_agent.py")
CHEATS = ("copy_answer", "long_confident")
CORE_POLICIES = {
    "oracle": ("oracle", 1, None),
    "noop": ("noop", 1, None),
    "random": ("{type: random, calls: 3}", 2, None),
    "sloppy": (f"{{type: callable, function: '{SLOPPY}:SloppyOracle'}}", 3, None),
    # fresh runs (other seeds), for routing: not in the training data
    "fresh-sloppy": (f"{{type: callable, function: '{SLOPPY}:SloppyOracle'}}", 3, 7),
    "fresh-random": ("{type: random, calls: 3}", 1, 7),
    # agents that game the verifier's features (no tool call)
    **{name: (f"{{type: callable, function: '{CHEAT}:{name}'}}", 1, None) for name in CHEATS},
}
TRAIN_RUNS = ("oracle", "noop", "random", "sloppy")


def run_cli(*argv: str) -> int:
    """``agentsynth ...`` in this process; its exit code."""
    from agentsynth_kernel.cli import main

    try:
        main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture(scope="session")
def core_runs(tmp_path_factory) -> dict[str, Path]:
    """Run directories of the `core` pack under a strong, a careless, a random and a do-nothing policy."""
    base = tmp_path_factory.mktemp("core-runs")
    dirs: dict[str, Path] = {}
    for name, (policy, trials, seed) in CORE_POLICIES.items():
        spec = write_spec(base / f"{name}.yaml", f"pack: core\npolicy: {policy}\ntrials: {trials}\nconcurrency: 4\n")
        args = ["run", str(spec), "--run-dir", str(base / name), "-q"] + (["--seed", str(seed)] if seed else [])
        assert run_cli(*args) == 0, name
        dirs[name] = base / name
    return dirs


@pytest.fixture(scope="session")
def verifier_file(core_runs, tmp_path_factory) -> Path:
    """A verifier trained on the training runs' verdicts (by the command a user runs)."""
    out = tmp_path_factory.mktemp("verifier") / "verifier.zip"
    report = out.with_suffix(".json")
    assert run_cli("judge", "train", *(str(core_runs[n]) for n in TRAIN_RUNS), "-o", str(out),
                   "--json", str(report)) == 0
    return out
