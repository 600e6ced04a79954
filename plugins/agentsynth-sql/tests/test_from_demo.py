"""``agentsynth pack new NAME --from-demo FILE`` on real SQLite worlds: the pack written checks
exactly what the demonstration changed (values, not counts), passes every gate of `pack validate`,
and no agent that does less, more or something else passes it."""

from __future__ import annotations

import contextlib
import io
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from agentsynth_kernel import ComponentSpec, RunSpec, load_pack, run
from agentsynth_kernel.cli import main

SCHEMA = """\
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL UNIQUE);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     status TEXT NOT NULL DEFAULT 'pending', total_cents INTEGER NOT NULL);
CREATE TABLE notes (body TEXT, data BLOB);
CREATE TABLE tags (sku TEXT, tag TEXT, PRIMARY KEY (sku, tag)) WITHOUT ROWID;
"""
SEED = """\
INSERT INTO customers VALUES (1, 'Ann', 'ann@example.com'), (2, 'Bob', 'bob@example.com');
INSERT INTO orders VALUES (1, 1, 'pending', 1200), (2, 1, 'pending', 500), (3, 2, 'shipped', 990);
INSERT INTO notes VALUES ('first', NULL);
INSERT INTO tags VALUES ('MUG', 'kitchen'), ('HAT', 'winter');
"""

SHIP = "UPDATE orders SET status = 'shipped' WHERE id = 2"
ADD_CY = "INSERT INTO customers (name, email) VALUES ('Cy', 'cy@example.com')"


def _demo_text(actions: list[dict[str, Any]], **extra: Any) -> str:
    doc = {"environment": {"type": "sql", "schema": "schema.sql", "seed": "seed.sql"}, "id": "ship-and-add",
           "instruction": "Mark order 2 as shipped and add the customer Cy (cy@example.com).", "actions": actions,
           **extra}
    return yaml.safe_dump(doc, sort_keys=False)


DEMO = _demo_text([
    {"tool": "sql_query", "arguments": {"sql": "SELECT * FROM orders WHERE id = 2"}},
    {"tool": "sql_execute", "arguments": {"sql": SHIP}},
    {"tool": "sql_execute", "arguments": {"sql": ADD_CY}},
    {"answer": "Order 2 is shipped and Cy is a customer."},
])


@pytest.fixture
def world(tmp_path: Path) -> Path:
    (tmp_path / "schema.sql").write_text(SCHEMA)
    (tmp_path / "seed.sql").write_text(SEED)
    return tmp_path


@attrs.define
class Result:
    exit_code: int
    output: str


def agentsynth(*args: str) -> Result:
    """The command as a user runs it (``main``: errors become messages and an exit status)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return Result(int(code or 0), out.getvalue())


def pack_new(*args: str) -> Result:
    return agentsynth("pack", "new", *args)


def make(world: Path, text: str = DEMO, name: str = "shop") -> Path:
    (world / "demo.yaml").write_text(text)
    out = world / "out" / name
    result = pack_new(name, "--from-demo", str(world / "demo.yaml"), "-o", str(out))
    assert result.exit_code == 0, result.output
    return out


def attempt(pack_dir: Path, actions: list[dict[str, Any]]):
    """One episode of the `scripted` policy on the pack: the attacker's (or a solver's) actions."""
    pack = load_pack(pack_dir)
    spec = RunSpec(policy=ComponentSpec("scripted", {"actions": actions}), timeout=30)
    [result] = run(spec, pack).results
    return result


def sql(statement: str) -> dict[str, Any]:
    return {"tool": "sql_execute", "arguments": {"sql": statement}}


def test_the_pack_checks_exactly_what_changed_and_passes_validate(world):
    out = make(world)
    assert sorted(p.name for p in out.iterdir()) == ["oracle.py", "pack.yaml", "schema.sql", "seed.sql"]
    doc = yaml.safe_load((out / "pack.yaml").read_text())
    task = doc["tasks"][0]
    assert task["environment"]["collateral"] is True
    assert set(task["environment"]["allowed_changes"]) == {"customers", "orders"}
    expects = [c.get("expect") for c in task["checkers"] if c["type"] == "sql"]
    assert [[3, "Cy", "cy@example.com"]] in expects and [[2, 1, "shipped", 500]] in expects
    assert {"type": "no_collateral"} in task["checkers"]
    result = agentsynth("pack", "validate", str(out))
    assert result.exit_code == 0, result.output
    assert "all gates pass" in result.output


def test_no_agent_passes_without_doing_exactly_the_demonstrated_change(world):
    out = make(world)
    answer = {"answer": "Done."}
    attacks = {
        "nothing": [answer],
        "every order shipped": [sql("UPDATE orders SET status = 'shipped'"), sql(ADD_CY), answer],
        "a wrong value": [sql("UPDATE orders SET status = 'Shipped' WHERE id = 2"), sql(ADD_CY), answer],
        "the wrong row": [sql("UPDATE orders SET status = 'shipped' WHERE id = 1"), sql(ADD_CY), answer],
        "half the task": [sql(SHIP), answer],
        "a customer with a wrong email (row counts match)": [
            sql(SHIP), sql("INSERT INTO customers (name, email) VALUES ('Cy', 'cy@example.org')"), answer],
        "the right rows plus another change to one of them": [
            sql(SHIP), sql("UPDATE orders SET total_cents = 0 WHERE id = 2"), sql(ADD_CY), answer],
        "the customer twice": [sql(SHIP), sql(ADD_CY),
                               sql("INSERT INTO customers (name, email) VALUES ('Cy', 'cy2@example.com')"), answer],
        "an extra row elsewhere": [sql(SHIP), sql(ADD_CY), sql("INSERT INTO notes VALUES ('x', NULL)"), answer],
    }
    for what, actions in attacks.items():
        result = attempt(out, actions)
        assert result.status == "failed", f"{what}: {[(v.checker, v.detail) for v in result.verdicts]}"
    # the same change written another way passes: the checks read the end state, not the SQL text
    solved = attempt(out, [sql("UPDATE orders SET status = 'ship' || 'ped' WHERE id IN (2)"),
                           sql("INSERT INTO customers (email, name) VALUES ('cy@example.com', 'Cy')"), answer])
    assert solved.status == "passed", [(v.checker, v.detail) for v in solved.verdicts]


def test_deletes_without_rowid_tables_blobs_and_long_text_are_checked_exactly(world):
    long_text = "é" * 1500
    out = make(world, _demo_text([
        sql("DELETE FROM tags WHERE sku = 'HAT'"),
        sql("UPDATE tags SET tag = 'home' WHERE sku = 'MUG'"),
        {"tool": "sql_execute", "arguments": {"sql": "INSERT INTO notes VALUES (?, X'00ff10')", "params": [long_text]}},
        sql("DELETE FROM orders WHERE id = 3"),
    ]), name="mixed")
    doc = yaml.safe_load((out / "pack.yaml").read_text())
    checks = doc["tasks"][0]["checkers"]
    assert [[long_text, b"\x00\xff\x10"]] in [c.get("expect") for c in checks]  # whole, not a marker
    base = [sql("DELETE FROM tags WHERE sku = 'HAT'"), sql("UPDATE tags SET tag = 'home' WHERE sku = 'MUG'"),
            {"tool": "sql_execute", "arguments": {"sql": "INSERT INTO notes VALUES (?, X'00ff10')",
                                                  "params": [long_text]}},
            sql("DELETE FROM orders WHERE id = 3")]
    assert attempt(out, base).status == "passed"
    wrong = [
        base[:3] + [sql("DELETE FROM orders WHERE id >= 2")],  # a broader delete
        base[:3] + [sql("UPDATE orders SET status = 'gone' WHERE id = 3")],  # changed instead of deleted
        base[:2] + [{"tool": "sql_execute", "arguments": {"sql": "INSERT INTO notes VALUES (?, X'00ff11')",
                                                          "params": [long_text]}}, base[3]],  # one byte off
        base[:2] + [{"tool": "sql_execute", "arguments": {"sql": "INSERT INTO notes VALUES (?, X'00ff10')",
                                                          "params": [long_text[:-1] + "e"]}}, base[3]],
        [*base, sql("INSERT INTO tags VALUES ('MUG', 'extra')")],  # one row more in the WITHOUT ROWID table
        [base[0], sql("UPDATE tags SET tag = 'home' WHERE sku = 'MUG' AND tag = 'nope'"), *base[2:]],  # no update
    ]
    for actions in wrong:
        assert attempt(out, actions).status == "failed", actions


def test_a_table_the_demonstration_creates_is_checked_with_its_rows(world):
    out = make(world, _demo_text([sql("CREATE TABLE vip (customer_id INTEGER, since TEXT)"),
                                  sql("INSERT INTO vip VALUES (1, '2026-01-01')")]), name="vip")
    assert attempt(out, [sql("CREATE TABLE vip (customer_id INTEGER, since TEXT)"),
                         sql("INSERT INTO vip VALUES (1, '2026-01-01')")]).status == "passed"
    assert attempt(out, [sql("CREATE TABLE vip (customer_id INTEGER, since TEXT)")]).status == "failed"
    assert attempt(out, [sql("CREATE TABLE vip (customer_id TEXT, since TEXT)"),
                         sql("INSERT INTO vip VALUES (1, '2026-01-01')"),
                         sql("INSERT INTO vip VALUES (2, '2026-01-01')")]).status == "failed"


def test_an_answer_only_demonstration_says_it_has_only_answer_checks(world):
    (world / "demo.yaml").write_text(_demo_text(
        [{"tool": "sql_query", "arguments": {"sql": "SELECT count(*) FROM orders WHERE status = 'pending'"}},
         {"answer": "There are 2 pending orders."}], instruction="How many orders are pending?"))
    out = world / "answer"
    result = pack_new("answer", "--from-demo", str(world / "demo.yaml"), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "only answer checks" in result.output
    checks = yaml.safe_load((out / "pack.yaml").read_text())["tasks"][0]["checkers"]
    assert {"type": "answer_number", "value": 2.0} in checks and {"type": "no_collateral"} in checks
    assert attempt(out, [{"answer": "3"}]).status == "failed"
    assert attempt(out, [sql("DELETE FROM orders WHERE id = 1"), {"answer": "2"}]).status == "failed"
    assert attempt(out, [{"answer": "2 are pending"}]).status == "passed"
    validated = agentsynth("pack", "validate", str(out))  # no_collateral is its world check; floors hold
    assert validated.exit_code == 0 and "all gates pass" in validated.output, validated.output


def _fails(world: Path, text: str | None, *expected: str, name: str = "bad", demo: str | None = None) -> str:
    path = world / "demo.yaml"
    if text is not None:
        path.write_text(text)
    out = world / "out" / name
    existed = out.exists()
    result = pack_new(name, "--from-demo", demo or str(path), "-o", str(out))
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    for text_part in expected:
        assert text_part in result.output, result.output
    assert out.exists() == existed  # nothing half-written, no staging directory left behind
    assert not list(out.parent.glob(".*partial*")) if out.parent.exists() else True
    return result.output


def test_a_demonstration_that_changes_nothing_and_answers_nothing_is_refused(world):
    _fails(world, _demo_text([{"tool": "sql_query", "arguments": {"sql": "SELECT 1"}}]),
           "changed nothing", "pass an agent that does nothing")
    # a transaction left open is rolled back, as at the end of an episode: nothing changed
    _fails(world, _demo_text([sql("BEGIN"), sql(SHIP)]), "changed nothing")


def test_bad_input_is_a_path_qualified_error_and_writes_nothing(world):
    demo = str(world / "demo.yaml")
    _fails(world, None, "missing.yaml", "not found", demo=str(world / "missing.yaml"))
    _fails(world, DEMO.replace("instruction:", "instrution:"), demo, "instrution", "unknown key", "instruction")
    _fails(world, _demo_text([sql("SELECT 1"), sql("UPDATE nowhere SET x = 1")]), demo, "actions[1] (sql_execute)",
           "no such table: nowhere")
    _fails(world, _demo_text([{"tool": "sql_exec", "arguments": {"sql": SHIP}}]), "actions[0]", "sql_execute")
    _fails(world, _demo_text([{"answer": "x"}, sql(SHIP)]), "actions[0]", "must be the last")
    _fails(world, _demo_text([sql(SHIP)], environment={"type": "sql", "schema": "nope.sql"}), "nope.sql")
    _fails(world, _demo_text([sql("CREATE INDEX o ON orders(status)")]), "changed the schema", "create index")
    text = yaml.safe_dump({"pack": "core", "task": "mark-shiped", "actions": [sql(SHIP)]})
    _fails(world, text, demo, "task", "mark-shiped", "mark-shipped")
    (world / "out" / "taken").mkdir(parents=True)
    (world / "out" / "taken" / "x").write_text("mine")
    _fails(world, DEMO, "already exists", name="taken")
    assert (world / "out" / "taken" / "x").read_text() == "mine"


def test_a_demonstration_from_a_pack_task_and_from_a_stored_episode(world, tmp_path):
    # start from the core pack's task: its world and instruction; the files are copied into the new pack
    (world / "demo.yaml").write_text(yaml.safe_dump({"pack": "core", "task": "mark-shipped", "id": "ship-1005",
                                                     "actions": [sql("UPDATE orders SET status = 'shipped' "
                                                                     "WHERE id = 1005")]}))
    out = world / "from-core"
    result = pack_new("from-core", "--from-demo", str(world / "demo.yaml"), "-o", str(out))
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load((out / "pack.yaml").read_text())
    assert (out / doc["environment"]["schema"]).is_file() and (out / doc["environment"]["seed"]).is_file()
    assert attempt(out, [sql("UPDATE orders SET status = 'shipped' WHERE id >= 1005")]).status == "failed"
    # a stored episode: an agent's run with a failed call in it; the failed call is left out
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""\
        pack: {out}
        policy:
          type: scripted
          actions:
            - {{tool: sql_execute, arguments: {{sql: "UPDATE ordrs SET status = 'x'"}}}}
            - {{tool: sql_execute, arguments: {{sql: "UPDATE orders SET status = 'shipped' WHERE id = 1005"}}}}
            - {{answer: shipped}}
        """))
    ran = agentsynth("run", str(spec), "--run-dir", str(tmp_path / "run"), "-q")
    assert ran.exit_code == 0, ran.output
    again = tmp_path / "again"
    result = pack_new("again", "--from-demo", str(tmp_path / "run" / "ship-1005"), "-o", str(again))
    assert result.exit_code == 0, result.output
    assert "left out 1 call(s)" in result.output
    oracle = (again / "oracle.py").read_text()
    assert "ordrs" not in oracle and "id = 1005" in oracle
    assert attempt(again, [{"answer": "shipped"}]).status == "failed"
    _fails(tmp_path, None, "no episode", "nope", demo=str(tmp_path / "run" / "nope"))


def test_the_readme_section_runs(tmp_path, monkeypatch):
    """The README's "Packs from a demonstration": its demo.yaml and its commands, in order."""
    import re
    import shlex

    text = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = text.split("## Packs from a demonstration", 1)[1].split("\n## ", 1)[0]
    (tmp_path / "demo.yaml").write_text(re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1))
    lines = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1).strip().splitlines()
    monkeypatch.chdir(tmp_path)
    results = [agentsynth(*shlex.split(line.split("#", 1)[0])[1:]) for line in lines]
    assert [r.exit_code for r in results] == [0, 0], [r.output for r in results]
    assert "changed: update orders row 1005: status: 'paid' -> 'shipped'" in results[0].output
    assert "all gates pass" in results[1].output
    assert attempt(tmp_path / "shipping", [sql("UPDATE orders SET status = 'shipped' WHERE status = 'paid'")]
                   ).status == "failed"
