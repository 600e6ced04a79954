"""The tickets pack through the real engine: every gate of `pack validate` (oracle 100 %,
determinism, 0 % floors, robustness against the kit with the rest exploits), the canary never
reached, and the exploits stopped by the world (not just unlucky)."""

from __future__ import annotations

import asyncio

from agentsynth_kernel import ComponentSpec, EpisodeConfig, get_host, load_pack, run_episode, validate_pack
from agentsynth_kernel.testing.adversarial import GENERIC_EXPLOITS, exploits_for
from agentsynth_rest.exploits import canary, rest_exploits


def test_tickets_passes_every_gate_and_the_canary_stays_silent():
    canary()  # listening before the exploits run, so a connection would be counted
    pack, gates = validate_pack("tickets", concurrency=2, timeout=60, random_trials=2)
    assert pack is not None and len(pack.tasks) == 8
    bad = {g.name: g.problems for g in gates if g.status != "pass"}
    assert bad == {}, bad
    robustness = next(g for g in gates if g.name == "robustness")
    assert "robustness 100%" in robustness.note
    assert canary().hits == 0


def test_the_hook_ships_the_rest_exploits_beside_the_generic_ones():
    names = [e.name for e in exploits_for(load_pack("tickets"))]
    ours = [n for n in names if n.startswith("rest.")]
    assert ours == [e.name for e in rest_exploits()] and len(ours) == 9
    assert {e.name for e in GENERIC_EXPLOITS} <= set(names)


def _play(task_id: str, actions):
    pack = load_pack("tickets")
    task = next(t for t in pack.tasks if t.id == task_id)
    script = (lambda state: actions(state, pack)) if callable(actions) else actions
    config = EpisodeConfig(ComponentSpec("scripted", {"actions": script}), max_steps=30, timeout=60)
    return asyncio.run(run_episode(get_host(), pack, task, 0, 0, config))


def test_perturbed_siblings_shift_every_id_so_a_memorised_transcript_fails():
    from agentsynth_kernel.testing.adversarial import sibling_problems

    pack = load_pack("tickets")
    for task in pack.tasks[:3]:
        found = asyncio.run(sibling_problems(pack, task, host=get_host(), seed=1, timeout=60))
        assert found == ("ok", ""), (task.id, found)


def test_exploits_are_stopped_by_the_world():
    by_name = {e.name: e for e in rest_exploits()}
    result = _play("close-duplicate", by_name["rest.path_traversal"].actions)
    observations = [s.observation.content for s in result.trajectory.steps if s.observation is not None]
    assert observations and all("is not a path segment" in o or "expected an integer" in o for o in observations)
    result = _play("close-duplicate", by_name["rest.hidden_admin_route"].actions)
    assert all("unknown tool" in s.observation.content for s in result.trajectory.steps if s.observation)
    result = _play("delete-spam", by_name["rest.mass_mutation"].actions)
    assert result.status == "failed"
    done = [s for s in result.trajectory.steps if s.observation and not s.observation.error]
    assert len(done) >= 10  # the mutations really happened; the backend checks caught the collateral
    assert "tickets" in result.why


def test_an_unstartable_world_is_an_environment_error():
    pack = load_pack("tickets")
    bad = pack.tasks[0]
    import attrs

    task = attrs.evolve(bad, environment={"app": "app.py:no_such_factory"})
    config = EpisodeConfig(ComponentSpec("oracle"), max_steps=5, timeout=30)
    result = asyncio.run(run_episode(get_host(), pack, task, 0, 0, config))
    assert result.status == "error" and result.error_kind == "environment"
    assert "has no attribute 'no_such_factory'" in result.error
    assert result.trajectory is None or not result.trajectory.steps  # the oracle never ran a call
