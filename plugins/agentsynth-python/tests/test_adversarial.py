"""The kernel's adversarial kit against the python-data pack: no exploit passes a task, and no
attempt touches the host (markers, watched files, leaked processes, loopback connections)."""

from __future__ import annotations

from agentsynth_kernel import load_pack
from agentsynth_kernel.testing.adversarial import GENERIC_EXPLOITS, assert_unfarmable, exploits_for
from agentsynth_python.exploits import host_untouched, python_exploits
from agentsynth_python.sandbox import leaked_containers, leaked_processes
from conftest import container_pack, needs_bwrap, needs_container_full


def test_the_hook_ships_distinct_python_exploits_with_host_checks():
    names = [e.name for e in exploits_for(load_pack("python-data"))]
    ours = [n for n in names if n.startswith("python.")]
    assert len(ours) >= 15 and len(set(ours)) == len(ours)
    assert {e.name for e in GENERIC_EXPLOITS} <= set(names)
    host_facing = [e for e in python_exploits() if e.name.split(".")[1] in
                   ("fork_bomb", "network", "write_outside", "read_host", "daemon_after_episode", "symlink_file_out")]
    assert len(host_facing) == 6 and all(e.host_check is not None for e in host_facing)


@needs_bwrap
def test_python_data_cannot_be_farmed():
    outcomes = assert_unfarmable(load_pack("python-data"), concurrency=3, timeout=90)
    tried = {o.exploit for o in outcomes}
    assert {"python.shadow_modules", "python.symlink_file_out", "python.daemon_after_episode",
            "python.forge_checker_output", "python.fork_bomb"} <= tried
    # the attempts were stopped by the sandbox, not ignored: e.g. the disk filler broke the quota
    fills = [o for o in outcomes if o.exploit == "python.disk_fill"]
    assert fills and all("max_world_bytes" in o.detail or "max_files" in o.detail for o in fills), fills
    assert host_untouched() is None
    assert leaked_processes() == []


@needs_container_full
def test_python_data_cannot_be_farmed_on_the_container_backend(tmp_path):
    pack = load_pack(container_pack(tmp_path))
    outcomes = assert_unfarmable(pack, concurrency=3, timeout=180)
    tried = {o.exploit for o in outcomes}
    assert {"python.shadow_modules", "python.symlink_file_out", "python.daemon_after_episode",
            "python.forge_checker_output", "python.fork_bomb", "python.network", "python.write_outside"} <= tried
    fills = [o for o in outcomes if o.exploit == "python.disk_fill"]
    assert fills and all("max_world_bytes" in o.detail or "max_files" in o.detail for o in fills), fills
    assert host_untouched() is None
    assert leaked_processes() == [] and leaked_containers() == []
