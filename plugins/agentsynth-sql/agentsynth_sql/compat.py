"""The SQL world with agentsynth-ai's tool surface, for packs imported from that project.

agentsynth-ai's SQL world has one tool, ``sql_query(query)``, which runs any statement (reads and
writes) unless the scenario says ``read_only: true``. ``environment: {type: sql_compat}`` is the
``sql`` world (same private seeded copy per episode, sandbox, limits, end-state reads) behind
that one tool, so the statements an imported pack's oracle sends run unchanged.

``agentsynth_ai_sql`` is agentsynth-ai's ``sql`` check (``equals`` exact rows in order,
``contains`` a substring of the rows as Python prints them, ``non_empty``) on the world's end
state, read as every checker here reads it, with the sql world's collateral-damage check (what
``allowed_changes`` does not allow fails) unless the world says ``collateral: false``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import attrs

from agentsynth_kernel import Observation, ToolCall, ToolSpec, Trajectory, Verdict

from .checkers import _sql_env, collateral_verdict, over_budget
from .env import SqlEnvironment, SqlEnvSpec
from .world import CheckBudgetExceeded

_QUERY_PARAMS = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "One SQLite statement."}},
    "required": ["query"],
}


@attrs.frozen
class SqlCompatSpec(SqlEnvSpec):
    """``sql``'s parameters, plus ``read_only`` (agentsynth-ai's: only SELECT / WITH run)."""

    read_only: bool = False


class SqlCompatEnvironment(SqlEnvironment):
    """The ``sql`` world with one ``sql_query(query)`` tool, read-write unless ``read_only``."""

    spec: SqlCompatSpec

    def __init__(self, spec: SqlCompatSpec | None = None, base_dir: Any = None, **params: Any) -> None:
        super().__init__(spec if spec is not None else SqlCompatSpec(**params), base_dir=base_dir)

    def tool_specs(self) -> list[ToolSpec]:
        if self.spec.read_only:
            text = "Run a read-only SQL SELECT against the database and see the rows."
        else:
            text = "Run SQL (SELECT, INSERT, UPDATE, DELETE) against the task database, one statement per call."
        return [ToolSpec("sql_query", text, _QUERY_PARAMS)]

    def run(self, call: ToolCall) -> Observation:
        if call.name != "sql_query":
            return Observation(f"error: unknown tool {call.name!r}", error=True)
        query = call.arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return Observation("error: 'query' must be a non-empty string", error=True)
        head = query.lower().lstrip("( \n\t")
        if self.spec.read_only and not head.startswith(("select", "with")):
            return Observation("error: only read-only SELECT queries are allowed", error=True)
        # the sql world's own path: its sandbox decides what a read-only statement may do
        return super().run(ToolCall("sql_execute" if not self.spec.read_only else "sql_query",
                                    {"sql": query}, id=call.id))


class AgentsynthAiSql:
    """agentsynth-ai's ``sql`` check on the end state: ``equals`` (the rows, in order, as lists),
    ``contains`` (a substring of ``str(rows)``), ``non_empty``; all that are given must hold."""

    world_state = True

    def __init__(self, query: str, equals: list[list[Any]] | None = None, contains: str | None = None,
                 non_empty: bool = False) -> None:
        if equals is None and contains is None and not non_empty:
            raise ValueError("agentsynth_ai_sql needs 'equals', 'contains' or 'non_empty: true'")
        self.query, self.equals, self.contains, self.non_empty = query, equals, contains, non_empty

    def check(self, env: Any, trajectory: Trajectory) -> Verdict:  # sync: on the episode's thread
        env = _sql_env(env)
        try:
            rows = [list(r) for r in env.query(self.query)]
        except CheckBudgetExceeded as exc:
            return over_budget(env, "agentsynth_ai_sql", exc)
        except (sqlite3.Error, ValueError) as exc:
            return Verdict("agentsynth_ai_sql", False, 0.0, f"{self.query!r}: query failed: {exc}")
        if self.equals is not None and rows != self.equals:
            return Verdict("agentsynth_ai_sql", False, 0.0, f"{self.query}: got {rows!r}, expected {self.equals!r}")
        if self.contains is not None and self.contains not in str(rows):
            return Verdict("agentsynth_ai_sql", False, 0.0, f"{self.query}: {self.contains!r} not in {rows!r}")
        if self.non_empty and not rows:
            return Verdict("agentsynth_ai_sql", False, 0.0, f"{self.query}: no rows came back")
        if getattr(env.spec, "collateral", True):  # as the sql checker: changes outside allowed_changes fail
            try:
                bad = collateral_verdict(env, "agentsynth_ai_sql")
            except CheckBudgetExceeded as exc:
                return over_budget(env, "agentsynth_ai_sql", exc)
            if bad is not None:
                return bad
        return Verdict("agentsynth_ai_sql", True, 1.0, f"{self.query}: {rows!r}"[:300])


def compat_exploits() -> list[Any]:
    """The sql world's exploits, spoken through ``sql_query(query)``: the same attacks reach the same
    world through the compat tool."""
    from agentsynth_kernel.testing.adversarial import Exploit

    from .exploits import sql_exploits

    def translated(actions: Any) -> Any:
        def play(state: Any, pack: Any) -> list[Any]:
            raw = actions(state, pack) if callable(actions) else list(actions)
            return [_translate(a) for a in raw]

        return play

    return [Exploit(e.name.replace("sql.", "sql_compat.", 1), e.description, translated(e.actions), e.tasks,
                    e.host_check) for e in sql_exploits()]


def _translate(action: Any) -> Any:
    if isinstance(action, ToolCall):
        action = {"tool": action.name, "arguments": dict(action.arguments)}
    if isinstance(action, dict) and action.get("tool") in ("sql_query", "sql_execute"):
        arguments = action.get("arguments") or {}
        return {"tool": "sql_query", "arguments": {"query": arguments.get("query", arguments.get("sql", ""))}}
    return action
