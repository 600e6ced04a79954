"""The `core` pack: shape, oracle 100 %, floors 0 %, and half-done work fails."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from agentsynth_kernel import (
    Answer,
    ComponentSpec,
    RunSpec,
    ToolCall,
    build,
    execute,
    get_host,
    import_file,
    load_pack,
    to_action,
)
from agentsynth_sql.world import split_statements


@pytest.fixture(scope="module")
def core():
    return load_pack("core")


@pytest.fixture(scope="module")
def oracle(core):
    return import_file(core.oracle_path).ORACLE


def play(pack, task_id, actions):
    """Run actions in a fresh world of the task and return every checker's verdict."""
    host = get_host()
    task = next(t for t in pack.tasks if t.id == task_id)
    env = build("environment", pack.task_environment(task), host=host, base_dir=pack.base_dir)
    env.start(0)
    steps = [to_action(a) for a in actions]
    from agentsynth_kernel import Step, Trajectory

    traj = Trajectory(task.id, task.instruction)
    for action in steps:
        obs = env.run(action) if isinstance(action, ToolCall) else None
        if obs is not None:
            assert not obs.error, obs.content
        traj.steps.append(Step(action, obs))
    checkers = [build("checker", c, host=host) for c in pack.task_checkers(task)]
    verdicts = [getattr(c, "evaluate", c.check)(env, traj) for c in checkers]
    env.shutdown()
    return verdicts


def test_pack_shape(core):
    assert core.id == "core" and len(core.tasks) >= 16
    splits = Counter(t.split for t in core.tasks)
    assert splits["train"] >= 8 and splits["test"] >= 6
    tiers = Counter(t.tier for t in core.tasks)
    assert set(tiers) == {"1-lookup", "2-update-one", "3-update-many", "4-consistency", "5-refuse"}
    assert all(n >= 4 for n in tiers.values())
    for task in core.tasks:  # every task reads the world's end state
        assert any(c.type in ("sql", "no_collateral") for c in core.task_checkers(task)), task.id


def _rates(core, policy: str, trials: int = 1):
    spec = RunSpec(policy=ComponentSpec(policy), trials=trials, seed=7, concurrency=4)
    report = asyncio.run(execute(spec, core))
    return report.results


def test_oracle_passes_everything(core):
    results = _rates(core, "oracle")
    failed = {r.task_id: [v.detail for v in r.verdicts if not v.passed] or r.error for r in results if not r.passed}
    assert not failed
    assert len(results) == len(core.tasks)


@pytest.mark.parametrize("policy", ["noop", "random", "claim_success"])
def test_floors_pass_nothing(core, policy):
    results = _rates(core, policy, trials=2 if policy == "random" else 1)
    assert [r.task_id for r in results if r.passed] == []
    assert all(r.status == "failed" for r in results), [r.error for r in results if r.status == "error"]


def _writes(oracle, task_id):
    return [a for a in oracle[task_id] if a.get("tool") == "sql_execute"]


@pytest.mark.parametrize("task_id", ["refund-and-restock", "cancel-and-void", "transfer-stock", "partial-refund",
                                     "merge-duplicate-customer"])
def test_changing_one_table_and_forgetting_the_other_fails(core, oracle, task_id):
    script = _writes(oracle, task_id)[0]["arguments"]["sql"]
    statements = [s for s in split_statements(script) if s.upper() not in ("BEGIN", "COMMIT")]
    assert len(statements) >= 2
    for keep in range(1, len(statements)):  # every strict prefix of the work is a failure
        partial = [{"tool": "sql_execute", "arguments": {"sql": s}} for s in statements[:keep]]
        verdicts = play(core, task_id, [*partial, {"answer": "done"}])
        assert not all(v.passed for v in verdicts), (task_id, keep)
    full = [{"tool": "sql_execute", "arguments": {"sql": s}} for s in statements]
    assert all(v.passed for v in play(core, task_id, [*full, {"answer": "done"}]))


def test_right_change_plus_collateral_damage_fails_and_names_the_row(core):
    verdicts = play(core, "mark-shipped", [
        {"tool": "sql_execute", "arguments": {"sql": "UPDATE orders SET status = 'shipped' WHERE status = 'paid'"}},
        {"answer": "done"},
    ])
    assert not verdicts[0].passed
    assert "update orders row 1003: status: 'paid' -> 'shipped'" in verdicts[0].detail


def test_acting_on_a_refuse_task_fails(core):
    verdicts = play(core, "refund-already-refunded", [
        {"tool": "sql_execute", "arguments": {"sql": "INSERT INTO refunds (order_id, amount_cents, reason) "
                                                     "VALUES (1002, 4500, 'again')"}},
        {"answer": "Order 1002 was already refunded; I refunded it again."},
    ])
    no_collateral = next(v for v in verdicts if v.checker == "no_collateral")
    assert not no_collateral.passed and "insert refunds row 2" in no_collateral.detail


def test_lookup_needs_the_right_answer(core):
    assert not all(v.passed for v in play(core, "order-total", [{"answer": "It is $57.00"}]))
    assert all(v.passed for v in play(core, "order-total", [{"answer": "The total is $56.99"}]))


def test_answer_is_required_even_when_nothing_changes(core):
    verdicts = play(core, "unknown-order", [Answer("Done. I have completed the task successfully.")])
    assert [v.passed for v in verdicts] == [True, False]
