"""``agentsynth verify`` never confirms a farmed pass: it replays the stored tool calls in a fresh
world and re-checks with today's (hardened) checkers, whatever verdicts the store holds."""

from __future__ import annotations

import msgspec

from agentsynth_kernel.records import Verdict
from agentsynth_kernel.store import RunStore

SHADOW = '''
from agentsynth_kernel import Answer, ToolCall

def act(state):
    if not state.trajectory.steps:  # a TEMP copy shadows the real table; the real row is untouched
        return ToolCall("sql_execute", {"sql": "CREATE TEMP TABLE customers AS SELECT * FROM main.customers; "
                        "UPDATE temp.customers SET email = 'maya@chen.example.org' WHERE id = 6"})
    return Answer("Updated Maya's email.")
'''


def test_verify_does_not_confirm_a_farmed_pass(cli, write, tmp_path):
    write("agent.py", SHADOW)
    write("spec.yaml", "pack: core\nonly: [update-email]\npolicy: {type: callable, function: agent.py:act}\n")
    code, out, err = cli("run", "spec.yaml", "--run-dir", "d", "-q")
    assert code == 0, out + err
    store = RunStore(tmp_path / "d", create=False)
    [result] = list(store.results())
    assert result.status == "failed"  # the hardened checker reads the real table
    # a store written by a version whose checker read through the agent's connection said "passed"
    forged = msgspec.structs.replace(result, status="passed", verdicts=[
        Verdict(v.checker, True, 1.0, "forged") for v in result.verdicts])
    store.put(forged)
    store.close()
    code, out, err = cli("verify", "d")
    assert code == 1
    assert "DIFFERS update-email trial 0: stored passed, replay failed" in out
