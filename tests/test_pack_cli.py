"""``agentsynth pack new|validate|list`` on the kv testworld: every gate passing and failing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsynth_kernel import hookimpl

GOOD = """
id: kvgood
environment: {type: kv, initial: {a: "0"}}
tasks:
  - id: set-a
    tier: 1
    split: train
    instruction: Set a to 1
    checkers: [{type: kv_equals, key: a, value: "1"}]
  - id: set-b
    tier: 2
    split: test
    instruction: Set b to 2 and say so
    checkers:
      - {type: kv_equals, key: b, value: "2"}
      - {type: answer_contains, text: "b is 2"}
"""

ORACLE = """
ORACLE = {
    "set-a": [{"tool": "set", "arguments": {"key": "a", "value": "1"}}, {"answer": "done"}],
    "set-b": [{"tool": "set", "arguments": {"key": "b", "value": "2"}}, {"answer": "b is 2"}],
}
"""

# Validation runs the random policy; the kv world's `sleep` tool would block it for up to 100 s.
FAST = ("--timeout", "0.5", "--random-trials", "2")


def gates(tmp_path: Path, name: str = "g.json") -> dict[str, dict]:
    data = json.loads((tmp_path / name).read_text())
    return {g["name"]: g for g in data["gates"]}


@pytest.fixture
def good(write):
    write("kvgood/oracle.py", ORACLE)
    return write("kvgood/pack.yaml", GOOD).parent


def test_a_good_pack_passes_every_gate(cli, good, tmp_path):
    code, out, err = cli("pack", "validate", "kvgood", *FAST, "--json", "g.json")
    assert code == 0, out + err
    result = gates(tmp_path)
    assert list(result) == ["schema", "unique-ids", "world-state-checkers", "oracle", "determinism", "floors",
                            "robustness"]
    assert all(g["status"] == "pass" and not g["problems"] for g in result.values())
    assert "all gates pass" in out


def validate_with(cli, write, tmp_path, pack_yaml: str, oracle: str | None = ORACLE):
    if oracle is not None:
        write("p/oracle.py", oracle)
    write("p/pack.yaml", pack_yaml)
    code, out, err = cli("pack", "validate", "p", *FAST, "--json", "g.json")
    return code, out, gates(tmp_path)


def test_schema_gate_fails_with_the_path(cli, write, tmp_path):
    code, out, result = validate_with(cli, write, tmp_path, GOOD.replace("instruction: Set a", "instructions: Set a"))
    assert code == 1 and result["schema"]["status"] == "fail"
    assert any("tasks[0].instructions: unknown key (did you mean 'instruction'?)" in p for p in result["schema"]["problems"])
    assert {result[n]["status"] for n in ("oracle", "determinism", "floors")} == {"skip"}
    code, out, result = validate_with(cli, write, tmp_path, GOOD.replace("type: kv,", "type: kvv,"))
    assert code == 1 and any("environment.type: unknown environment 'kvv'" in p for p in result["schema"]["problems"])


def test_unique_ids_gate(cli, write, tmp_path):
    code, out, result = validate_with(cli, write, tmp_path, GOOD.replace("id: set-b", "id: set-a"))
    assert code == 1 and result["unique-ids"]["status"] == "fail"
    assert "tasks[1].id: duplicate task id 'set-a' (also tasks[0])" in result["unique-ids"]["problems"][0]
    assert result["schema"]["status"] == "pass"


def test_world_state_checker_gate(cli, write, tmp_path):
    pack = GOOD.replace('      - {type: kv_equals, key: b, value: "2"}\n', "")
    code, out, result = validate_with(cli, write, tmp_path, pack)
    assert code == 1 and result["world-state-checkers"]["status"] == "fail"
    assert result["world-state-checkers"]["problems"] == [
        "task 'set-b': no checker reads the world's end state (only answer_contains, which read the trajectory); "
        "add one that checks the outcome"
    ]


def test_oracle_gate_names_the_failing_task(cli, write, tmp_path):
    code, out, result = validate_with(cli, write, tmp_path, GOOD, ORACLE.replace('"value": "2"', '"value": "3"'))
    assert code == 1 and result["oracle"]["status"] == "fail"
    [problem] = result["oracle"]["problems"]
    assert problem.startswith("task 'set-b': the oracle does not pass (failed): kv_equals: b='3', expected '2'")
    assert "oracle: task 'set-b'" in out


def test_oracle_gate_without_an_oracle(cli, write, tmp_path):
    code, out, result = validate_with(cli, write, tmp_path, GOOD, oracle=None)
    assert code == 1 and "the pack has no oracle" in result["oracle"]["problems"][0]
    assert result["determinism"]["status"] == "pass" and "random policy only" in result["determinism"]["note"]


def test_determinism_gate(cli, write, tmp_path):
    noisy = ORACLE.replace('{"answer": "done"}',
                           '{"tool": "set", "arguments": {"key": "noise", "value": str(__import__("time").perf_counter_ns())}}, '
                           '{"answer": "done"}')
    noisy = noisy.replace("ORACLE = {", "def solve(task):\n    return _table()[task.id]\n\ndef _table():\n    return {")
    code, out, result = validate_with(cli, write, tmp_path, GOOD, noisy)
    assert result["oracle"]["status"] == "pass", result["oracle"]["problems"]
    assert code == 1 and result["determinism"]["status"] == "fail"
    assert result["determinism"]["problems"] == [
        "task 'set-a': policy oracle: two runs with seed 0 differ: step 1: the action differs"
    ]


def test_floor_gate(cli, write, tmp_path):
    pack = GOOD + """
  - id: already-true
    tier: 1
    instruction: Make sure a is 0
    checkers: [{type: kv_equals, key: a, value: "0"}]
"""
    oracle = ORACLE.replace("ORACLE = {", 'ORACLE = {\n    "already-true": [{"answer": "a is 0"}],')
    code, out, result = validate_with(cli, write, tmp_path, pack, oracle)
    assert code == 1 and result["floors"]["status"] == "fail"
    problems = result["floors"]["problems"]
    for policy in ("noop", "random", "claim_success"):
        assert any(p.startswith(f"task 'already-true': passes under the {policy} policy") for p in problems), problems
    assert not any("set-a" in p for p in problems)


def test_validate_a_missing_pack(cli, tmp_path):
    code, out, _ = cli("pack", "validate", "nowhere", "--json", "g.json")
    assert code == 1
    result = gates(tmp_path)
    assert result["schema"]["status"] == "fail" and "no such pack" in result["schema"]["problems"][0]


# --- new ------------------------------------------------------------------------------------------


class KVScaffolder:
    """A throw-away plugin that scaffolds kv packs (what agentsynth-sql does for SQL)."""

    @hookimpl
    def scaffold_pack(self, name, directory, environment, schema):
        if environment != "kv":
            return None
        if schema is not None:
            raise ValueError(f"{schema}: kv packs have no schema")
        (directory / "pack.yaml").write_text(GOOD.replace("id: kvgood", f"id: {name}"))
        (directory / "oracle.py").write_text(ORACLE)
        return [directory / "pack.yaml", directory / "oracle.py"]


def test_new_uses_the_scaffold_hook_and_the_result_validates(cli, host, tmp_path):
    host.add_plugin(KVScaffolder(), "kv-scaffolder")
    code, out, err = cli("pack", "new", "mine", "--env", "kv")
    assert code == 0, err
    assert "wrote mine/pack.yaml" in out and "next: agentsynth pack validate mine" in out
    code, out, err = cli("pack", "validate", "mine", *FAST)
    assert code == 0, out
    code, _, err = cli("pack", "new", "mine", "--env", "kv")
    assert code == 2 and "already exists and is not empty" in err
    (tmp_path / "s.sql").write_text("x")
    code, _, err = cli("pack", "new", "other", "--env", "kv", "--from-schema", "s.sql")
    assert code == 2 and "s.sql: kv packs have no schema" in err and not (tmp_path / "other").exists()


def test_new_without_a_scaffolder_writes_a_bare_skeleton(cli, host, tmp_path):
    code, out, err = cli("pack", "new", "bare", "--env", "kv", "--dir", "packs")
    assert code == 0, err
    assert "wrote a bare skeleton" in out
    text = (tmp_path / "packs" / "bare" / "pack.yaml").read_text()
    assert "type: kv" in text and "id: bare" in text
    code, out, _ = cli("pack", "validate", "packs/bare", *FAST, "--json", "g.json")
    assert code == 1 and gates(tmp_path)["world-state-checkers"]["problems"] == ["task 'example': has no checkers"]


def test_new_rejects_bad_names_and_unknown_environments(cli, host):
    code, _, err = cli("pack", "new", "bad name", "--env", "kv")
    assert code == 2 and "not a valid pack name" in err
    code, _, err = cli("pack", "new", "x", "--env", "kvv")
    assert code == 2 and "unknown environment 'kvv' (did you mean 'kv'?)" in err


def test_list_shows_registered_packs(cli, host, tmp_path, good):
    class Packs:
        @hookimpl
        def register_packs(self, register):
            register("kvgood", good, description="a test pack")

    host.add_plugin(Packs(), "test-packs")
    code, out, _ = cli("pack", "list")
    assert code == 0 and "kvgood  (test-packs)  a test pack" in out


class _Wrapper:
    """A checker that wraps another: whether it reads the world depends on its parameters."""

    world_state = False  # ignored when world_state_for decides

    @staticmethod
    def world_state_for(params):
        return params.get("inner") == "state"


def test_a_checker_decides_from_its_parameters_whether_it_reads_the_world(host):
    from agentsynth_kernel import hookimpl
    from agentsynth_kernel.commands.pack import is_world_state
    from agentsynth_kernel.spec import ComponentSpec

    class P:
        @hookimpl
        def register_checkers(self, register):
            register("hk_wrapper", _Wrapper)

    host.add_plugin(P(), "wrapper-test")
    assert is_world_state(ComponentSpec("hk_wrapper", {"inner": "state"}), host)
    assert not is_world_state(ComponentSpec("hk_wrapper", {"inner": "answer"}), host)


def test_pack_teach_writes_the_oracle_episodes_as_gold_sft_records(cli, kv_spec, write, tmp_path):
    write("kvpack/oracle.py", """
ORACLE = {
    "set-b": [{"tool": "set", "arguments": {"key": "b", "value": "2"}}, {"answer": "done"}],
    "del-a": [{"tool": "delete", "arguments": {"key": "a"}}, {"answer": "deleted"}],
}
""")
    write("kvpack/pack.yaml", """
id: kvpack
environment: {type: kv, initial: {a: "1"}}
tasks:
  - {id: set-b, instruction: Set b to 2, split: train, checkers: [{type: kv_equals, key: b, value: "2"}]}
  - {id: del-a, instruction: Delete a, split: test, checkers: [{type: kv_equals, key: a, value: null}]}
""")
    code, out, err = cli("pack", "teach", "kvpack", "-o", "gold/train.jsonl")
    assert code == 0, err
    import json

    records = [json.loads(line) for line in (tmp_path / "gold" / "train.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in records] == ["set-b"]  # the test split stays out of training data
    messages = records[0]["messages"]
    assert messages[-1] == {"role": "assistant", "content": "done"}
    call = next(m for m in messages if m.get("tool_calls"))["tool_calls"][0]["function"]
    assert call["name"] == "set" and json.loads(call["arguments"]) == {"key": "b", "value": "2"}
    assert {t["function"]["name"] for t in records[0]["tools"]} >= {"set", "delete"}
    assert records[0]["verified"] == ["kv_equals"] and records[0]["split"] == "train"
    code, _, err = cli("pack", "teach", "kvpack", "-o", "all.jsonl", "--split", "all")
    assert code == 0 and len((tmp_path / "all.jsonl").read_text().splitlines()) == 2
    # an edited oracle is imported again in the same process (a long-lived `agentsynth serve`)
    write("kvpack/oracle.py", 'ORACLE = {"set-b": [{"answer": "done"}], "del-a": [{"answer": "no"}]}\n')
    code, _, err = cli("pack", "teach", "kvpack", "-o", "bad.jsonl")
    assert code == 1 and "the oracle did not pass set-b" in err
