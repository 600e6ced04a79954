"""The full command-line path with the SQL plugin: bench on `core`, pack new --from-schema, validate."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentsynth_kernel.cli import cli

SCHEMA = """
CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE);
CREATE TABLE books (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, price REAL CHECK (price > 0),
    author_id INTEGER NOT NULL REFERENCES authors(id)
);
CREATE TABLE tags (book_id INTEGER REFERENCES books(id), tag TEXT, PRIMARY KEY (book_id, tag)) WITHOUT ROWID;
"""


def invoke(*args: str, cwd: Path | None = None):
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(cli, list(args), catch_exceptions=False)
    with runner.isolated_filesystem(temp_dir=cwd):
        return runner.invoke(cli, list(args), catch_exceptions=False)


def agentsynth(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    code = "import sys; from agentsynth_kernel.cli import main; sys.argv[0] = 'agentsynth'; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_bench_core_oracle_is_the_quickstart(tmp_path):
    out = tmp_path / "report.json"
    result = invoke("bench", "--pack", "core", "--policy", "oracle", "-k", "2", "--json", str(out),
                    "--min-pass-rate", "100%")
    assert result.exit_code == 0, result.output
    assert "4-consistency" in result.output and "gate PASS" in result.output
    report = json.loads(out.read_text())
    assert report["bench"]["overall"]["pass_at_1"] == 1.0 and report["bench"]["overall"]["pass_hat_k"] == 1.0
    assert report["bench"]["k"] == 2 and report["episodes"] == 2 * len(report["tasks"])
    assert set(report["bench"]["tiers"]) == {"1-lookup", "2-update-one", "3-update-many", "4-consistency", "5-refuse"}


def test_bench_floor_fails_the_ci_gate_and_shows_why(tmp_path):
    result = invoke("bench", "--pack", "core", "--policy", "random", "--min-pass-rate", "0.5", "--split", "test")
    assert result.exit_code == 1
    assert "gate FAIL: pass@1 0.0% vs minimum 50.0%" in result.output
    assert "failures (first failing trial of each task):" in result.output


def test_bench_compare_runs_a_paired_test(tmp_path):
    out = tmp_path / "cmp.json"
    result = invoke("bench", "--pack", "core", "--compare", "noop", "oracle", "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    test = data["comparison"]["paired_test"]
    assert test["wins_b"] == len(data["comparison"]["tasks"]) and test["wins_a"] == 0
    assert test["p_value"] < 0.001 and test["significant_at_0.05"]
    assert "paired sign test" in result.output


def test_pack_new_from_schema_then_validate(tmp_path):
    (tmp_path / "db.sql").write_text(SCHEMA)
    result = invoke("pack", "new", "library", "--from-schema", str(tmp_path / "db.sql"), "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    pack_dir = tmp_path / "library"
    assert {p.name for p in pack_dir.iterdir()} == {"pack.yaml", "schema.sql", "seed.sql", "oracle.py"}
    result = invoke("pack", "validate", str(pack_dir), "--json", str(tmp_path / "gates.json"))
    assert result.exit_code == 0, result.output
    gates = json.loads((tmp_path / "gates.json").read_text())
    assert gates["passed"] and len(gates["gates"]) >= 6 and all(g["status"] == "pass" for g in gates["gates"])
    assert gates["tasks"] >= 6
    # the generated pack is a working benchmark too
    result = invoke("bench", "--pack", str(pack_dir), "--policy", "oracle", "--min-pass-rate", "1")
    assert result.exit_code == 0, result.output


def test_pack_new_from_a_sqlite_file_and_the_default_skeleton(tmp_path):
    conn = sqlite3.connect(tmp_path / "shop.db")
    conn.executescript(SCHEMA)
    conn.close()
    assert invoke("pack", "new", "fromdb", "--from-schema", str(tmp_path / "shop.db"), "--dir", str(tmp_path)).exit_code == 0
    assert "CREATE TABLE books" in (tmp_path / "fromdb" / "schema.sql").read_text()
    assert invoke("pack", "validate", str(tmp_path / "fromdb")).exit_code == 0
    assert invoke("pack", "new", "starter", "--dir", str(tmp_path)).exit_code == 0
    result = invoke("pack", "validate", str(tmp_path / "starter"))
    assert result.exit_code == 0, result.output


def test_validate_names_the_task_when_the_oracle_is_wrong(tmp_path):
    (tmp_path / "db.sql").write_text(SCHEMA)
    invoke("pack", "new", "broken", "--from-schema", str(tmp_path / "db.sql"), "--dir", str(tmp_path))
    oracle = tmp_path / "broken" / "oracle.py"
    oracle.write_text(oracle.read_text().replace("'name_updated'", "'wrong'"))
    result = invoke("pack", "validate", str(tmp_path / "broken"))
    assert result.exit_code == 1
    assert "oracle: task 'update-authors-name': the oracle does not pass (failed): sql:" in result.output
    assert "got 'wrong', expected 'name_updated'" in result.output


def test_bad_input_is_a_clean_error_not_a_traceback(tmp_path):
    (tmp_path / "bad.sql").write_text("CREATE TABLE (;")
    proc = agentsynth("pack", "new", "x", "--from-schema", "bad.sql", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "the schema does not run in SQLite" in proc.stderr
    assert not (tmp_path / "x").exists()
    proc = agentsynth("bench", "--pack", "cor", "--policy", "oracle", cwd=tmp_path)
    assert proc.returncode == 2 and "did you mean 'core'" in proc.stderr and "Traceback" not in proc.stderr
    proc = agentsynth("bench", "--pack", "core", "--policy", "orcale", cwd=tmp_path)
    assert proc.returncode == 2 and "policy.type: unknown policy 'orcale' (did you mean 'oracle'?)" in proc.stderr


@pytest.mark.parametrize("quiet", [True])
def test_bench_json_to_stdout(tmp_path, quiet):
    proc = agentsynth("bench", "--pack", "core", "--policy", "oracle", "--only", "transfer-stock", "--json", "-",
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["counts"] == {"passed": 1, "failed": 0, "error": 0}
