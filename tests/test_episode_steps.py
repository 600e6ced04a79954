"""Watching an episode step by step (a live viewer, a playground) without changing it."""

from __future__ import annotations

import asyncio

from agentsynth_kernel.engine import trajectory_bytes
from agentsynth_kernel.episode import EpisodeConfig, run_episode
from agentsynth_kernel.spec import ComponentSpec, load_run_spec


def _episode(kv_spec, host, on_step=None):
    spec, pack = load_run_spec(kv_spec, host=host)
    task = next(t for t in pack.tasks if t.id == "set-b")
    config = EpisodeConfig(ComponentSpec("oracle"), 10, 30.0, None)
    return asyncio.run(run_episode(host, pack, task, 0, 7, config, on_step=on_step))


def test_on_step_sees_every_step_as_it_is_recorded(kv_spec, host):
    seen = []
    result = _episode(kv_spec, host, on_step=lambda step: seen.append(step))
    assert result.passed
    assert seen == result.trajectory.steps and len(seen) == 2
    assert seen[0].action.name == "set" and seen[0].observation is not None


def test_an_observer_that_raises_is_dropped_and_the_episode_is_the_same(kv_spec, host):
    calls = []

    def broken(step):
        calls.append(step)
        raise RuntimeError("viewer crashed")

    watched = _episode(kv_spec, host, on_step=broken)
    plain = _episode(kv_spec, host)
    assert watched.passed and len(calls) == 1
    assert trajectory_bytes(watched) == trajectory_bytes(plain)
