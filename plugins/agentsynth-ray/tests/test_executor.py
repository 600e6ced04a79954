"""The ray executor on a real local cluster: the same results as the local executor, worker death,
bad parameters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import attrs
import pytest

from agentsynth_kernel import ComponentSpec, RunSpec, execute, get_host, resolve_pack, trajectory_bytes


def _core(policy: str = "oracle", trials: int = 1, executor: ComponentSpec | None = None, **policy_params):
    spec = RunSpec(policy=ComponentSpec(policy, policy_params), pack="core", trials=trials, seed=7, concurrency=4,
                   executor=executor)
    pack = resolve_pack(spec, base_dir=Path.cwd(), source="test", host=get_host())
    return spec, pack


def _ray(**params) -> ComponentSpec:
    return ComponentSpec("ray", {"workers": 2, "per_worker": 2, **params})


@pytest.mark.parametrize("policy", ["oracle", "noop"])
def test_the_core_pack_on_ray_gives_the_local_results_byte_for_byte(ray_cluster, policy):
    spec, pack = _core(policy)
    local = asyncio.run(execute(spec, pack))
    remote = asyncio.run(execute(attrs.evolve(spec, executor=_ray()), pack))
    assert [r.key for r in remote.results] == [r.key for r in local.results]
    assert [r.status for r in remote.results] == [r.status for r in local.results]
    assert [trajectory_bytes(r) for r in remote.results] == [trajectory_bytes(r) for r in local.results]
    assert [[v.passed for v in r.verdicts] for r in remote.results] == \
        [[v.passed for v in r.verdicts] for r in local.results]
    if policy == "oracle":
        assert sum(r.passed for r in remote.results) == len(pack.tasks)  # the oracle solves every task
    else:
        assert not any(r.passed for r in remote.results)
    assert not any(r.error_kind == "environment" for r in remote.results)


DYING = '''
import os
from pathlib import Path

def act(state):
    """Kills its worker process the first time it plays task {task} (a marker file remembers)."""
    marker = Path({marker!r})
    if state.task.id == {task!r} and not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(1)
    return {{"answer": "done"}}
'''


def _dying_policy(tmp_path: Path, task: str) -> str:
    path = tmp_path / "dying.py"
    path.write_text(DYING.format(task=task, marker=str(tmp_path / "died")))
    return f"{path}:act"


def test_a_worker_that_dies_has_its_episode_played_again_on_a_fresh_worker(ray_cluster, tmp_path):
    spec, pack = _core("callable", function=_dying_policy(tmp_path, "count-pending-orders"))
    # one worker, two episodes in flight on it: both are lost with it, both wait for its replacement
    report = asyncio.run(execute(attrs.evolve(spec, executor=_ray(retries=1, workers=1)), pack,
                                 run_dir=tmp_path / "run"))
    assert (tmp_path / "died").exists()  # the worker really died
    assert len(report.results) == len(pack.tasks)
    assert not any(r.error_kind == "environment" for r in report.results), \
        [r.error for r in report.results if r.error]


def test_without_retries_a_dead_worker_fails_only_its_episode(ray_cluster, tmp_path):
    spec, pack = _core("callable", function=_dying_policy(tmp_path, "count-pending-orders"))
    # one episode per worker at a time: what the dead worker had in flight is exactly that one
    report = asyncio.run(execute(attrs.evolve(spec, executor=_ray(retries=0, per_worker=1)), pack))
    lost = [r for r in report.results if r.error_kind == "environment"]
    assert [r.task_id for r in lost] == ["count-pending-orders"]
    assert "died" in lost[0].error and lost[0].status == "error"
    assert len(report.results) == len(pack.tasks)  # every other episode was played (on the fresh worker)


def test_bad_executor_parameters_are_path_qualified_errors(cli, tmp_path):
    code, _, err = cli("bench", "--pack", "core", "--policy", "oracle", "--executor", "ray,workers=0")
    assert code == 2 and "executor.workers: expected an integer >= 1" in err, err
    code, _, err = cli("bench", "--pack", "core", "--policy", "oracle", "--executor", "ray,wrokers=2")
    assert code == 2 and "executor.wrokers: unknown key for executor 'ray' (did you mean 'workers'?)" in err, err
    assert "Traceback" not in err


def _elsewhere(pack, pack_id: str):
    """The pack as a driver on another machine would send it: a directory this node lacks."""
    import attrs

    from agentsynth_kernel import located

    return located(attrs.evolve(pack, id=pack_id), base_dir=Path("/nonexistent/packs/core"),
                   source="/nonexistent/packs/core/pack.yaml", content_hash=pack.content_hash)


def test_a_worker_finds_the_pack_registered_on_its_node_or_says_what_to_install(tmp_path):
    from agentsynth_kernel import located
    from agentsynth_ray.worker import EpisodeWorker

    spec, pack = _core()
    context = {"spec": spec, "config": None, "run_id": "r", "total": 1, "run_hash": "", "run_dir": None}
    worker = EpisodeWorker("w1", {**context, "pack": _elsewhere(pack, "core")}, None)
    assert worker.ready()["problem"] == "" and worker.pack.base_dir == pack.base_dir  # the node's own 'core'
    moved = _elsewhere(pack, "core")
    changed = located(moved, base_dir=moved.base_dir, source=moved.source, content_hash="sha256:other")
    problem = EpisodeWorker("w2", {**context, "pack": changed}, None).ready()["problem"]
    assert "has content hash" in problem and "install the same version" in problem
    # the same path holds another version of the pack
    edited = located(pack, base_dir=pack.base_dir, source=pack.source, content_hash="sha256:other")
    problem = EpisodeWorker("w4", {**context, "pack": edited}, None).ready()["problem"]
    assert f"{pack.base_dir} on worker" in problem and "has content hash" in problem
    problem = EpisodeWorker("w3", {**context, "pack": _elsewhere(pack, "nowhere")}, None).ready()["problem"]
    assert "/nonexistent/packs/core does not exist on worker" in problem and "runtime_env working_dir" in problem


def test_a_pack_no_worker_can_load_fails_every_episode_with_one_clear_line(ray_cluster):
    spec, pack = _core()
    report = asyncio.run(execute(attrs.evolve(spec, executor=_ray()), _elsewhere(pack, "nowhere")))
    assert len(report.results) == len(pack.tasks)
    assert all(r.status == "error" and r.error_kind == "environment" for r in report.results)
    assert "no worker could start" in report.results[0].error and "does not exist on worker" in report.results[0].error
