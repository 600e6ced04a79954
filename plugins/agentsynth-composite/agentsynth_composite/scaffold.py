"""``agentsynth pack new NAME --env composite``: a starter pack over a sql and a python world.

One task that needs both worlds (compute in the sandbox, store in the database), checked in each,
with an oracle that solves it: the pack passes ``pack validate`` as written, and shows the shape
(worlds, WORLD__TOOL names, per-world checkers, a task override through a YAML anchor).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PACK = """\
# A composite pack: every episode runs in two worlds at once, `db` (sql) and `py` (python).
# Tools are WORLD__TOOL (db__sql_query, py__python_exec); each checker names the world it reads.
# Add tasks, then run `agentsynth pack validate {name}`.
id: {name}
description: TODO what this pack tests
system_prompt: |
  You work in two worlds: `db`, a SQLite database (db__sql_query, db__sql_execute), and `py`, a
  Python sandbox (py__python_exec, py__shell). Reply with a short final answer when you are done.
environment:
  type: composite
  worlds:
    db: &db
      type: sql
      schema: "CREATE TABLE results (name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    py: &py
      type: python
      wall_seconds: 10
oracle: oracle.py
tasks:
  - id: square-sum
    split: train
    tier: 1
    instruction: >-
      In Python, compute the sum of the squares of 1 to 10, write it to result.txt, and store it in
      the results table under the name 'square-sum'.
    environment:
      worlds:
        db: {{<<: *db, allowed_changes: {{results: {{insert: true}}}}}}
        py: *py
    checkers:
      - {{type: composite, world: db, checker: {{type: sql, query: "SELECT value FROM results WHERE name = 'square-sum'", expect: 385}}}}
      - {{type: composite, world: py, checker: {{type: python_file, file: result.txt, equals: "385"}}}}
"""

ORACLE = '''\
"""The scripted solution of every task: {task_id: [actions]} with WORLD__TOOL names."""

ORACLE = {
    "square-sum": [
        {"tool": "py__python_exec", "arguments": {"code": "total = sum(i * i for i in range(1, 11))\\n"
                                                           "open('result.txt', 'w').write(str(total))\\ntotal"}},
        {"tool": "db__sql_execute", "arguments": {"sql": "INSERT INTO results VALUES ('square-sum', 385)"}},
        {"answer": "385, in result.txt and in the results table"},
    ],
}
'''


def scaffold(name: str, directory: Path, host: Any) -> list[Path]:
    missing = [t for t in ("sql", "python") if t not in host.names("environment")]
    if missing:
        raise ValueError(f"the composite starter pack runs the {' and '.join(missing)} world(s): install "
                         + " and ".join(f"agentsynth-{t}" for t in missing))
    (directory / "pack.yaml").write_text(PACK.format(name=name), encoding="utf-8")
    (directory / "oracle.py").write_text(ORACLE, encoding="utf-8")
    return [directory / "pack.yaml", directory / "oracle.py"]
