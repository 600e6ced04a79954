"""A careless operator for the ``core`` pack (agentsynth-sql): per episode (seeded) it either plays the
pack's oracle, or stops before the writes and claims success anyway, or answers with a wrong
number, or writes other numbers than the oracle. Its runs hold passes and fails that look alike, the hard cases a verifier must sort."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import agentsynth_sql
from agentsynth_kernel import import_file

ORACLE_FILE = Path(agentsynth_sql.__file__).parent / "packs" / "core" / "oracle.py"


class SloppyOracle:
    def __init__(self) -> None:
        self.actions: list[dict[str, Any]] | None = None

    def plan(self, state: Any) -> list[dict[str, Any]]:
        script = list(import_file(ORACLE_FILE).ORACLE[state.task.id])
        mode = state.rng.choice(["oracle", "oracle", "no_writes", "wrong_number", "wrong_write"])
        if mode == "no_writes":
            return [a for a in script if a.get("tool") != "sql_execute"]
        if mode == "wrong_number":
            *calls, last = script
            text = re.sub(r"\d+", lambda m: str(int(m.group(0)) + 7), last.get("answer", "")) or "It is 7."
            return [*calls, {"answer": text}]
        if mode == "wrong_write":  # the right statements with other numbers in them
            bump = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
            return [{**a, "arguments": {"sql": bump.sub(lambda m: str(int(m.group(1)) + 1), a["arguments"]["sql"])}}
                    if a.get("tool") == "sql_execute" else a for a in script]
        return script

    def act(self, state: Any) -> Any:
        if self.actions is None:
            self.actions = self.plan(state)
        return self.actions.pop(0) if self.actions else {"answer": ""}
