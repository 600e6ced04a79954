from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentsynth_kernel import ToolCall
from agentsynth_sql.env import SqlEnvironment, SqlEnvSpec
from agentsynth_sql.world import clear_cache

SCHEMA = """
CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, balance INTEGER NOT NULL CHECK (balance >= 0));
CREATE TABLE ledger (id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL REFERENCES accounts(id), amount INTEGER NOT NULL);
"""
SEED = """
INSERT INTO accounts VALUES (1, 'ann', 100), (2, 'bob', 50), (3, 'cy', 0);
INSERT INTO ledger (account_id, amount) VALUES (1, 100), (2, 50);
"""


@pytest.fixture(autouse=True)
def _fresh_snapshots():
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """schema.sql, seed.sql and a real SQLite file world.db holding the same world."""
    (tmp_path / "schema.sql").write_text(SCHEMA)
    (tmp_path / "seed.sql").write_text(SEED)
    conn = sqlite3.connect(tmp_path / "world.db")
    conn.executescript(SCHEMA + SEED)
    conn.commit()
    conn.close()
    return tmp_path


def make_env(files: Path, **params) -> SqlEnvironment:
    params.setdefault("schema", "schema.sql")
    params.setdefault("seed", "seed.sql")
    env = SqlEnvironment(SqlEnvSpec(**params), base_dir=files)
    env.start(0)
    return env


def q(env: SqlEnvironment, sql: str, **kw):
    return env.run(ToolCall("sql_query", {"sql": sql, **kw}))


def x(env: SqlEnvironment, sql: str, **kw):
    return env.run(ToolCall("sql_execute", {"sql": sql, **kw}))
