"""Hook implementations: what this plugin registers with the kernel.

A starting point that already passes ``agentsynth pack validate``: a world with state (a list of
notes), a checker that reads that state after the episode (never the agent's words), and a pack
with an oracle. Replace the notes with the real thing and keep the tests passing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsynth_kernel import Observation, ToolCall, ToolSpec, Verdict, hookimpl

PACKS = Path(__file__).parent / "packs"


class __Class__Environment:
    """A fresh world per episode: ``initial`` notes, tools to add and list them."""

    def __init__(self, initial: list[str] | None = None) -> None:
        self.initial = list(initial or [])
        self.notes: list[str] = []

    def reset(self, seed: int) -> Observation:
        self.notes = list(self.initial)
        return Observation(f"{len(self.notes)} note(s)")

    def tools(self) -> list[ToolSpec]:
        return [
            ToolSpec("add_note", "Add a note", {"type": "object", "properties": {"text": {"type": "string"}},
                                                "required": ["text"]}),
            ToolSpec("list_notes", "List the notes", {"type": "object", "properties": {}}),
        ]

    def step(self, call: ToolCall) -> Observation:
        if call.name == "add_note":
            text = str(call.arguments.get("text", ""))[:1000]
            if not text:
                return Observation("error: text is empty", error=True)
            self.notes.append(text)
            return Observation(f"added note {len(self.notes)}")
        if call.name == "list_notes":
            return Observation("\n".join(self.notes) or "(no notes)")
        return Observation(f"error: unknown tool {call.name!r}", error=True)

    def close(self) -> None:
        self.notes = []


class NoteExists:
    """Passes when the world holds exactly this note at the end (read from the world's state)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def check(self, env: __Class__Environment, trajectory: Any) -> Verdict:
        found = self.text in env.notes
        return Verdict("note_exists", found, 1.0 if found else 0.0,
                       f"{'found' if found else 'no'} note {self.text!r} among {len(env.notes)}")


@hookimpl
def register_environments(register: Any) -> None:
    register("__name__", __Class__Environment, description="__description__")


@hookimpl
def register_checkers(register: Any) -> None:
    register("__name___note_exists", NoteExists, description="The world holds this note at the end")


@hookimpl
def register_packs(register: Any) -> None:
    register("__name__-demo", PACKS / "__name__-demo", description="Two tasks that add notes (a working example)")
