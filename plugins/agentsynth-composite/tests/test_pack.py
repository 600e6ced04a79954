"""The sql-python pack on the real sql and python worlds (bubblewrap sandbox): every gate of
`pack validate`, the children's own exploits through the composite doing real work in their
worlds, and a python world that cannot start."""

from __future__ import annotations

import asyncio

import attrs
import pytest

from agentsynth_kernel import ComponentSpec, EpisodeConfig, ToolCall, get_host, load_pack, run_episode
from agentsynth_kernel.testing.adversarial import assert_unfarmable, exploits_for
from conftest import has_sandbox

pytest.importorskip("agentsynth_sql")
pytest.importorskip("agentsynth_python")
needs_bwrap = pytest.mark.skipif(not has_sandbox(), reason="bubblewrap (bwrap) is not installed")


def play(pack, task, actions, timeout=90):
    config = EpisodeConfig(ComponentSpec("scripted", {"actions": actions}), timeout=timeout)
    return asyncio.run(run_episode(get_host(), pack, task, 0, 0, config))


@needs_bwrap
@pytest.mark.slow
def test_sql_python_passes_every_gate():
    """Every gate (about 200 episodes in sandboxes: a minute on 2 cores); the integration test
    runs the same through the CLI."""
    from agentsynth_kernel import validate_pack

    pack, gates = validate_pack("sql-python", concurrency=3, timeout=90)
    assert pack is not None and len(pack.tasks) == 4
    bad = {g.name: g.problems for g in gates if g.status != "pass"}
    assert bad == {}, bad
    robustness = next(g for g in gates if g.name == "robustness")
    assert "robustness 100%" in robustness.note


@needs_bwrap
def test_the_oracle_passes_every_task_and_the_floors_none():
    pack = load_pack("sql-python")
    oracle = __import__("agentsynth_kernel.importing", fromlist=["import_file"]).import_file(pack.oracle_path)
    for task in pack.tasks:
        result = play(pack, task, oracle.ORACLE[task.id])
        assert result.status == "passed", (task.id, result.why)
        assert [v.checker.split(".")[0] for v in result.verdicts] == [c.params["world"] for c in task.checkers]
        # half the work (one world only) fails: every task is checked in both worlds
        for world in ("db", "py"):
            half = [a for a in oracle.ORACLE[task.id] if "answer" in a or a["tool"].startswith(world + "__")]
            assert play(pack, task, half).status == "failed", (task.id, world)


@needs_bwrap
def test_the_composite_s_and_the_sql_world_s_exploits_farm_nothing_on_one_task():
    """The default suite's share of the audit (all of it is in the slow gate test)."""
    pack = load_pack("sql-python")
    chosen = [e for e in exploits_for(pack) if not e.name.startswith("composite.python.")]
    assert len(chosen) >= 30
    outcomes = assert_unfarmable(pack, chosen, tasks=["flag-outliers"], concurrency=3, timeout=90)
    assert len(outcomes) == len(chosen)
    assert not [o for o in outcomes if o.status == "error"], [o.describe() for o in outcomes if o.status == "error"]


@needs_bwrap
@pytest.mark.parametrize("name, tool", [("composite.sql.temp_table_shadow", "db__sql_execute"),
                                        ("composite.sql.dump_answer", "db__sql_query"),
                                        ("composite.python.symlink_file_out", "py__python_exec"),
                                        ("composite.python.read_host", "py__python_exec")])
def test_children_s_exploits_act_in_their_world_through_the_composite(name, tool):
    pack = load_pack("sql-python")
    exploit = {e.name: e for e in exploits_for(pack)}[name]
    result = play(pack, pack.tasks[0], lambda state: exploit.actions(state, pack))
    calls = [s for s in result.trajectory.steps if isinstance(s.action, ToolCall)]
    assert calls and all(s.action.name == tool or s.action.name.startswith(tool.split("__")[0])
                         for s in calls), [s.action.name for s in calls]
    assert not any(s.invalid for s in calls)  # real calls of the world's tools, not refused names
    assert result.status != "passed", result.why
    if exploit.host_check is not None:
        assert exploit.host_check() is None


@needs_bwrap
@pytest.mark.slow
def test_the_python_world_s_hostile_exploits_through_the_composite():
    """Fork bomb, memory, disk, CPU, descriptors, output, network, writes outside ... (the python
    plugin limits these to its own pack's task ids): here on one task of sql-python."""
    from agentsynth_composite.exploits import through_composite

    pack = load_pack("sql-python")
    host = get_host()
    mine = [through_composite(e, "python", tasks=("region-revenue",)) for group in
            host.pm.hook.adversarial_exploits(environment="python", pack=None) for e in group or () if e.tasks]
    assert len(mine) >= 8
    outcomes = assert_unfarmable(pack, mine, concurrency=2, timeout=120)
    assert len(outcomes) == len(mine)


@needs_bwrap
def test_a_sql_checker_pointed_at_the_python_world_is_an_error_not_a_pass():
    pack = load_pack("sql-python")
    task = pack.tasks[0]
    inner = task.checkers[0].params["checker"]
    swapped = attrs.evolve(task, checkers=[ComponentSpec("composite", {"world": "py", "checker": inner})])
    oracle = __import__("agentsynth_kernel.importing", fromlist=["import_file"]).import_file(pack.oracle_path)
    result = play(pack, swapped, oracle.ORACLE[task.id])
    assert result.status == "error" and result.error_kind == "checker"
    assert "needs the 'sql' environment, got PythonEnvironment" in result.error


def test_a_python_world_that_cannot_start_is_an_environment_error_naming_it(monkeypatch, tmp_path):
    from agentsynth_python import sandbox

    pack = load_pack("sql-python")
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    sandbox.probe.cache_clear()
    try:
        result = play(pack, pack.tasks[0], [{"answer": "x"}], timeout=60)
    finally:
        sandbox.probe.cache_clear()
    assert result.status == "error" and result.error_kind == "environment"
    assert "world 'py' (python)" in result.error and "bubblewrap is not installed" in result.error


@needs_bwrap
def test_a_perturbed_sibling_relabels_the_sql_world_and_a_memorised_transcript_fails_it():
    """The sql world relabels its ids (order 110 -> 7110) through the composite: in its seed, the
    instruction and every checker (the python world's expected file too); the oracle relabelled
    the same way passes the sibling, the original transcript does not."""
    from agentsynth_kernel.testing.adversarial import sibling_problems

    pack = load_pack("sql-python")
    task = next(t for t in pack.tasks if t.id == "flag-outliers")
    sibling = get_host().pm.hook.perturb_task(pack=pack, task=task, seed=0)
    assert sibling is not None
    checkers = {c.params["world"]: c.params["checker"] for c in sibling.task.checkers}
    assert checkers["db"]["expect"] == [7110, 7120] and checkers["py"]["equals"] == "7110\n7120"
    assert "(7110," in sibling.task.environment["worlds"]["db"]["seed"]
    assert sibling.task.environment["worlds"]["py"]["type"] == "python"
    assert asyncio.run(sibling_problems(pack, task, host=get_host(), timeout=90)) == ("ok", "")


def test_an_answer_checker_of_the_sql_plugin_reads_its_world_through_composite_answer(tmp_path):
    """sql_answer reads the expected value from its world and decides on the answer: wrapped in
    composite_answer it works unchanged (and the world-state gate does not count it)."""
    from packs import write_pack

    env = {"type": "composite", "worlds": {"db": {"type": "sql", "schema": "CREATE TABLE t (name TEXT);",
                                                   "seed": "INSERT INTO t VALUES ('alpha'), ('beta');"}}}
    checker = {"type": "composite_answer", "world": "db",
               "checker": {"type": "sql_answer", "query": "SELECT name FROM t WHERE rowid = 2",
                           "distractors": "SELECT name FROM t"}}
    task = {"id": "second", "instruction": "Which name is in the second row?", "checkers": [checker]}
    pack = load_pack(write_pack(tmp_path / "ans", env, [task]))
    good = play(pack, pack.tasks[0], [{"tool": "db__sql_query", "arguments": {"sql": "SELECT name FROM t"}},
                                      {"answer": "beta"}])
    assert good.status == "passed", good.why
    assert good.verdicts[0].checker.startswith("db.")
    assert play(pack, pack.tasks[0], [{"answer": "alpha or beta"}]).status == "failed"
