"""The executor seam: where episodes run is pluggable, everything else stays the engine's."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentsynth_kernel import hookimpl
from agentsynth_kernel.builtins.executors import LocalExecutor
from agentsynth_kernel.engine import execute, trajectory_bytes
from agentsynth_kernel.spec import ComponentSpec, load_run_spec
from agentsynth_kernel.store import RunStore

SEEN: list[str] = []


class CountingExecutor:
    """Plays every episode locally, one at a time, and records what it was asked (and when closed)."""

    def __init__(self, width: int = 1, fail: str = "") -> None:
        self.concurrency = width
        self.fail = fail
        self.local = LocalExecutor()
        self.in_flight = 0
        self.peak = 0

    async def run_episode(self, host, pack, task, trial, seed, config, run):
        SEEN.append(task.id)
        if task.id == self.fail:
            raise ConnectionError("worker lost")
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            return await self.local.run_episode(host, pack, task, trial, seed, config, run)
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        SEEN.append("closed")
        PEAKS.append(self.peak)


PEAKS: list[int] = []


class ExecutorPlugin:
    @hookimpl
    def register_executors(self, register):
        register("counting", CountingExecutor, description="test: local, counted")


@pytest.fixture
def exec_host(host):
    host.add_plugin(ExecutorPlugin(), "executor-test")
    SEEN.clear()
    PEAKS.clear()
    yield host
    host.remove_plugin("executor-test")


def _spec(kv_spec, host, **executor):
    import attrs

    spec, pack = load_run_spec(kv_spec, host=host, overrides={"trials": 3})
    if executor:
        spec = attrs.evolve(spec, executor=ComponentSpec("counting", executor), concurrency=8)
    return spec, pack


def test_a_plugged_executor_plays_the_same_episodes_as_the_local_one(exec_host, kv_spec):
    spec, pack = _spec(kv_spec, exec_host)
    local = asyncio.run(execute(spec, pack, host=exec_host))
    spec, pack = _spec(kv_spec, exec_host, width=1)
    other = asyncio.run(execute(spec, pack, host=exec_host))
    assert sorted(SEEN[:-1]) == sorted(r.task_id for r in local.results) and SEEN[-1] == "closed"
    assert PEAKS == [1]  # its own concurrency wins over the spec's 8
    assert [r.key for r in other.results] == [r.key for r in local.results]
    assert [trajectory_bytes(r) for r in other.results] == [trajectory_bytes(r) for r in local.results]
    assert all(r.passed for r in other.results)


def test_an_executor_that_loses_an_episode_fails_that_episode_not_the_run(exec_host, kv_spec, tmp_path):
    spec, pack = _spec(kv_spec, exec_host, width=2, fail="del-a")
    report = asyncio.run(execute(spec, pack, host=exec_host, run_dir=tmp_path / "run"))
    lost = [r for r in report.results if r.task_id == "del-a"]
    assert len(lost) == 3 and all(r.status == "error" and r.error_kind == "environment" for r in lost)
    assert "worker lost" in lost[0].error and lost[0].split == "train"
    assert all(r.passed for r in report.results if r.task_id == "set-b")
    assert SEEN[-1] == "closed"
    store = RunStore(tmp_path / "run")
    try:
        assert len(store.keys()) == 6  # stored like any result: a resume does not replay them by surprise
    finally:
        store.close()


def test_a_run_started_locally_resumes_on_another_executor(exec_host, kv_spec, cli, tmp_path):
    assert cli("run", str(kv_spec), "--run-dir", "d", "-q", "--trials", "2")[0] == 0
    store = RunStore(tmp_path / "d")
    store.db.execute("DELETE FROM episodes WHERE task_id = 'set-b'")
    store.db.commit()
    store.close()
    code, out, err = cli("resume", "d", "-q", "--executor", "counting,width=1", "--json", "-")
    assert code == 0, err
    assert sorted(SEEN) == ["closed", "set-b", "set-b"]
    summary = json.loads(out)
    assert summary["counts"]["passed"] == 4 and summary["complete"]


def test_unknown_executors_and_bad_parameters_are_path_qualified_errors(exec_host, kv_spec, cli):
    code, _, err = cli("run", str(kv_spec), "--no-store", "--executor", "nope")
    assert code == 2 and "--executor.type: unknown executor 'nope'" in err
    code, _, err = cli("bench", "--pack", "core-missing", "--policy", "oracle", "--executor", "nope")
    assert code == 2
    code, _, err = cli("run", str(kv_spec), "--no-store", "--executor", "counting,speed=3")
    assert code == 2 and "--executor.speed: unknown key for executor 'counting'" in err
    code, _, err = cli("run", str(kv_spec), "--no-store", "--executor", "counting,width=many")
    assert code == 2 and "--executor.width" in err


def test_the_executor_key_in_a_spec_file_is_checked_at_load(exec_host, write):
    from agentsynth_kernel.errors import SpecError

    write("oracle.py", "ORACLE = {}\n")
    path = write("spec.yaml", """
        environment: {type: kv}
        tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: a, value: "1"}]}]
        policy: noop
        executor: {type: counting, widht: 2}
    """)
    with pytest.raises(SpecError) as info:
        load_run_spec(path, host=exec_host)
    assert "executor.widht: unknown key for executor 'counting' (did you mean 'width'?)" in str(info.value)
