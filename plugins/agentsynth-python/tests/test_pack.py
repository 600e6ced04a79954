"""The python-data pack through the real engine: every gate of `pack validate` passes (oracle
100 %, determinism, 0 % floors, robustness against the adversarial kit), and a world that
cannot start is an infrastructure error with its reason."""

from __future__ import annotations

import asyncio

from agentsynth_kernel import ComponentSpec, EpisodeConfig, get_host, load_pack, run_episode, validate_pack
from conftest import container_pack, needs_bwrap, needs_container_full


@needs_bwrap
def test_python_data_passes_every_gate():
    pack, gates = validate_pack("python-data", concurrency=3, timeout=90)
    assert pack is not None and len(pack.tasks) == 8
    bad = {g.name: g.problems for g in gates if g.status != "pass"}
    assert bad == {}, bad
    robustness = next(g for g in gates if g.name == "robustness")
    assert "robustness 100%" in robustness.note


@needs_container_full
def test_python_data_passes_every_gate_on_the_container_backend(tmp_path):
    pack, gates = validate_pack(container_pack(tmp_path), concurrency=3, timeout=180)
    assert pack is not None and len(pack.tasks) == 8 and pack.environment.params["isolation"] == "container"
    bad = {g.name: g.problems for g in gates if g.status != "pass"}
    assert bad == {}, bad
    robustness = next(g for g in gates if g.name == "robustness")
    assert "robustness 100%" in robustness.note


def test_an_unstartable_world_is_an_environment_error(monkeypatch, tmp_path):
    from agentsynth_python import sandbox

    pack = load_pack("python-data")
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    sandbox.probe.cache_clear()
    try:
        config = EpisodeConfig(ComponentSpec("oracle"), max_steps=5, timeout=60)
        result = asyncio.run(run_episode(get_host(), pack, pack.tasks[0], 0, 0, config))
    finally:
        sandbox.probe.cache_clear()
    assert result.status == "error" and result.error_kind == "environment"
    assert "bubblewrap is not installed" in result.error
