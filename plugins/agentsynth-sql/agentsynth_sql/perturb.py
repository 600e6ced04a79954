"""Perturbed siblings of SQL tasks, for ``pack audit``: the world's identifiers relabelled.

Every single-column primary key value that can be told apart from other data (integers of three
or more digits, text of three or more characters) gets a new value (``1005`` -> ``8005``,
``MUG-02`` -> ``MUG-02Z``) in the seed SQL, the instruction, the checkers and ``allowed_changes``.
The pack's oracle, relabelled the same way, must still pass; the original transcript, which names
the old ids, must not. Tasks checked on the answer get no sibling: relabelling ids does not change
an answer (an email, a total), so a memorised answer would pass the sibling too.
"""

from __future__ import annotations

import re
from typing import Any

ANSWER_CHECKERS = {"answer_contains", "answer_number", "sql_answer"}
INT_OFFSET = 7000


def perturb_sql_task(pack: Any, task: Any, seed: int) -> Any:
    from agentsynth_kernel.testing.adversarial import PerturbedTask, relabeller

    from .env import SqlEnvSpec
    from .world import open_copy, quote, read_source, snapshot_for

    cspec = pack.task_environment(task)
    if cspec.type != "sql" or any(c.type in ANSWER_CHECKERS for c in pack.task_checkers(task)):
        return None
    params = {k: v for k, v in cspec.params.items() if k != "type"}
    try:
        spec = SqlEnvSpec(**params)
        seed_sql, seed_db = read_source(spec.seed, pack.base_dir, "seed")
        snapshot = snapshot_for(spec.schema, spec.seed, base_dir=pack.base_dir, foreign_keys=spec.foreign_keys)
    except (TypeError, ValueError, OSError):
        return None
    if seed_db is not None or not seed_sql.strip():
        return None  # a binary seed database cannot be relabelled as text
    tokens = set(re.findall(r"\w[\w.@-]*", seed_sql))
    mapping: dict[str, str] = {}
    conn = open_copy(snapshot)
    try:
        for table in snapshot.tables:
            info = conn.execute(f"PRAGMA table_info({quote(table)})").fetchall()
            keys = [c[1] for c in info if c[5]]
            if len(keys) != 1:
                continue
            for (value,) in conn.execute(f"SELECT {quote(keys[0])} FROM {quote(table)}"):
                new = _relabelled(value)
                if new is not None and new not in tokens and str(value) in tokens:
                    mapping[str(value)] = new
    finally:
        conn.close()
    if not mapping:
        return None
    relabel = relabeller(mapping)
    return PerturbedTask.by_mapping(pack, task, mapping, environment={"seed": relabel(seed_sql)})


def _relabelled(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 100:
        return str(value + INT_OFFSET)
    if isinstance(value, str) and len(value) >= 3 and re.fullmatch(r"[\w.@-]+", value):
        return value + "Z"
    return None
