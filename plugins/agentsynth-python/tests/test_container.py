"""The container backend: the command lines it builds (limits, mounts, no network) without a
runtime, its clear errors (no runtime, no daemon, no image) with real lookups, and, where Podman
or Docker works, a real stale-container sweep. The world contract itself runs on both backends
in test_sandbox.py and test_checkers.py; the pack and the exploit kit in test_pack.py /
test_adversarial.py."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentsynth_kernel import ComponentSpec, EpisodeConfig, get_host, load_pack, run_episode
from agentsynth_python import PythonEnvironment
from agentsynth_python import container as c
from agentsynth_python.sandbox import RUNNER, Limits
from conftest import needs_container

PODMAN = c.Runtime("podman", "/usr/bin/podman", "agentsynth-python:bookworm", None, "runc", "python3", 1.0)
DOCKER = c.Runtime("docker", "/usr/bin/docker", "agentsynth-python:bookworm", None, None, "python3", None)


def argv_for(rt: c.Runtime, **over):
    params = dict(name="agentsynth-py-x", world=Path("/tmp/w/world"), writable=True,
                  limits=Limits(memory_bytes=256 * 2**20, max_processes=32, max_open_files=100, max_file_bytes=2**20,
                                tmp_bytes=8 * 2**20),
                  uid=1234567, packages=[("/venv/site-packages/attrs", "attrs")], runner=RUNNER,
                  check_files=[("/pack/checks/t.py", "t.py")], env={"HOME": "/world", "KEY": "v"},
                  command=["python3", "-I", "/.agentsynth/runner.py"], pidfile="/tmp/p/pid")
    params.update(over)
    return c.run_argv(rt, **params)


def pairs(argv: list[str]) -> set[tuple[str, str]]:
    return set(zip(argv, argv[1:], strict=False))


def test_the_run_command_line_holds_every_limit_and_no_network():
    argv = argv_for(PODMAN)
    assert argv[:4] == ["/usr/bin/podman", "--runtime", "runc", "run"]
    flags = pairs(argv)
    for pair in [("--network", "none"), ("--cap-drop", "ALL"), ("--security-opt", "no-new-privileges"),
                 ("--memory", str(256 * 2**20)), ("--memory-swap", str(256 * 2**20)), ("--pids-limit", "36"),
                 ("--ulimit", "nofile=100:100"), ("--ulimit", "nproc=32:32"), ("--ulimit", f"fsize={2**20}:{2**20}"),
                 ("--tmpfs", f"/tmp:rw,size={8 * 2**20},mode=1777,nosuid,nodev"), ("--cpus", "1"),
                 ("--user", "1234567:1234567"), ("--pidfile", "/tmp/p/pid"), ("--log-driver", "none"),
                 ("--pull", "never"), ("--ipc", "private"), ("--workdir", "/world")]:
        assert pair in flags, pair
    assert "--read-only" in argv and "--read-only-tmpfs=false" in argv and "--init" in argv
    assert "--privileged" not in argv and not any(a.startswith("--network=") or a == "host" for a in argv)
    # the image, then the command, last
    assert argv[-4:] == ["agentsynth-python:bookworm", "python3", "-I", "/.agentsynth/runner.py"]


def test_mounts_world_rw_for_the_agent_and_everything_else_read_only():
    agent = pairs(argv_for(PODMAN))
    assert ("-v", "/tmp/w/world:/world:rw") in agent
    assert ("-v", f"{RUNNER}:/.agentsynth/runner.py:ro") in agent
    assert ("-v", "/venv/site-packages/attrs:/.agentsynth/site/attrs:ro") in agent
    assert ("-v", "/pack/checks/t.py:/check/t.py:ro") in agent
    checker = argv_for(PODMAN, writable=False)
    assert ("-v", "/tmp/w/world:/world:ro") in pairs(checker)
    volumes = [b for a, b in zip(checker, checker[1:], strict=False) if a == "-v"]
    assert all(v.endswith(":ro") for v in volumes) and len(volumes) == 4
    # only the variables given: no --env-host, no host variable
    envs = [b for a, b in zip(checker, checker[1:], strict=False) if a == "--env"]
    assert envs == ["HOME=/world", "KEY=v"] and "--env-host" not in checker


def test_a_rootfs_goes_last_and_docker_gets_its_own_flags():
    rootfs = c.Runtime("podman", "/usr/bin/podman", None, "/srv/rootfs", None, "python3", 0.5)
    argv = argv_for(rootfs)
    assert argv[1] == "run"  # the configured OCI runtime
    assert argv[-5:-3] == ["--rootfs", "/srv/rootfs"] and ("--cpus", "0.5") in pairs(argv)
    docker = argv_for(DOCKER, pidfile=None)
    assert docker[:2] == ["/usr/bin/docker", "run"] and "--pidfile" not in docker and "--cpus" not in docker
    assert "--read-only-tmpfs=false" not in docker and ("--network", "none") in pairs(docker)
    assert c.remove_argv(PODMAN, "podman", "/usr/bin/podman", ["a", "b"]) == [
        "/usr/bin/podman", "--runtime", "runc", "rm", "-f", "-t", "0", "--ignore", "a", "b"]
    assert c.remove_argv(DOCKER, "docker", "/usr/bin/docker", ["a"]) == ["/usr/bin/docker", "rm", "-f", "a"]


def test_container_names_carry_a_live_owner():
    name = c.container_name()
    assert name.startswith(c.NAME_PREFIX) and c._owner_alive(name)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{c.NAME_PREFIX}{c.owner_tag().rsplit('-', 2)[0]}-{dead.pid}-12345-abcd"
    assert not c._owner_alive(stale)


def test_bad_container_settings_are_errors_naming_the_key(tmp_path):
    with pytest.raises(ValueError, match="container.runtime: expected one of auto, podman, docker, got 'lxc'"):
        PythonEnvironment(base_dir=tmp_path, isolation="container", container={"runtime": "lxc"})
    with pytest.raises(ValueError, match="container.imag: unknown key"):
        PythonEnvironment(base_dir=tmp_path, isolation="container", container={"imag": "x"})
    with pytest.raises(ValueError, match="container.cpus"):
        PythonEnvironment(base_dir=tmp_path, isolation="container", container={"cpus": 0})


def test_no_runtime_on_path_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a real lookup that finds nothing
    c.probe.cache_clear()
    try:
        with pytest.raises(c.ContainerError, match="no container runtime: neither podman nor docker is on PATH"):
            PythonEnvironment(base_dir=tmp_path, isolation="container")
        with pytest.raises(c.ContainerError, match="no container runtime: docker is not on PATH"):
            PythonEnvironment(base_dir=tmp_path, isolation="container", container={"runtime": "docker"})
    finally:
        c.probe.cache_clear()


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client on PATH")
def test_a_docker_client_without_a_daemon_is_an_infrastructure_error(tmp_path):
    code, _ = c._run(["docker", "version", "--format", "{{.Server.Version}}"], timeout=30)
    if code == 0:
        pytest.skip("a Docker daemon answers here")
    with pytest.raises(c.ContainerError, match="docker does not answer.*daemon is not reachable"):
        c.probe(c.ContainerSpec(runtime="docker"))


@pytest.mark.skipif(shutil.which("podman") is None, reason="no container runtime: podman is not on PATH")
def test_a_missing_image_or_rootfs_names_the_build_command(tmp_path):
    with pytest.raises(c.ContainerError, match="image 'agentsynth-python:no-such-tag' not found in podman.*"
                       "agentsynth python build-image --runtime podman --tag agentsynth-python:no-such-tag"):
        c.probe(c.ContainerSpec(runtime="podman", image="agentsynth-python:no-such-tag"))
    with pytest.raises(c.ContainerError, match="is not a root file system.*build-image --rootfs"):
        c.probe(c.ContainerSpec(runtime="podman", rootfs=str(tmp_path)))


def test_an_unstartable_container_world_is_an_environment_error(tmp_path):
    """Through the real engine: the episode fails as infrastructure, with the reason; no bwrap fallback."""
    pack_dir = tmp_path / "pack"
    shutil.copytree(load_pack("python-data").base_dir, pack_dir)
    text = (pack_dir / "pack.yaml").read_text()
    (pack_dir / "pack.yaml").write_text(text.replace("  type: python\n", "  type: python\n  isolation: container\n"
                                                     "  container: {image: 'agentsynth-python:no-such-tag'}\n", 1))
    pack = load_pack(pack_dir)
    assert pack.environment.params["isolation"] == "container"
    config = EpisodeConfig(ComponentSpec("oracle"), max_steps=5, timeout=120)
    result = asyncio.run(run_episode(get_host(), pack, pack.tasks[0], 0, 0, config))
    assert result.status == "error" and result.error_kind == "environment", result
    assert "no container runtime" in result.error or "build-image" in result.error, result.error


@needs_container
def test_a_stale_container_of_a_dead_owner_is_swept():
    """A container whose agentsynth died with its reaper (named after a dead owner) is removed
    by the next run's sweep; a live owner's container is not."""
    rt = c.probe(c.ContainerSpec())
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = c.owner_tag().rsplit("-", 2)[0]
    stale = f"{c.NAME_PREFIX}{host}-{dead.pid}-12345-{os.urandom(2).hex()}"
    live = c.container_name()
    base = [rt.path, *(["--runtime", rt.oci_runtime] if rt.oci_runtime else []), "run", "-d", "--init",
            "--network", "none", "--pull", "never", "--ulimit", "nofile=64:64", "--ulimit", "nproc=64:64"]
    for name in (stale, live):
        image = ["--rootfs", rt.rootfs] if rt.rootfs else [str(rt.image)]
        done = subprocess.run([*base, "--name", name, *image, "sleep", "600"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    try:
        assert {stale, live} <= set(c.our_containers(rt))
        c._swept.discard(rt.path)
        assert stale in c.sweep(rt)
        left = set(c.our_containers(rt))
        assert stale not in left and live in left
    finally:
        subprocess.run(c.remove_argv(rt, rt.kind, rt.path, [stale, live]), capture_output=True)
    assert live not in c.our_containers(rt)  # one already gone does not keep rm from removing the rest


def test_the_readme_commands_run(tmp_path):
    """The README's container commands: build-image (dry run: the exact pipeline) and status."""
    from click.testing import CliRunner

    from agentsynth_python.cli import python

    runner = CliRunner()
    dry = runner.invoke(python, ["build-image", "--dry-run", "--rootfs", str(tmp_path / "root"),
                                 "--include", "python3-numpy"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("mmdebstrap --variant=essential --include=python3,python3-numpy ")
    assert f"bookworm {tmp_path / 'root'} http://deb.debian.org/debian" in dry.output
    if shutil.which("podman") or shutil.which("docker"):
        image = runner.invoke(python, ["build-image", "--dry-run", "--tag", "t:1"])
        assert image.exit_code == 0 and "--format=tar bookworm - " in image.output and " import - t:1" in image.output
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    refused = runner.invoke(python, ["build-image", "--rootfs", str(tmp_path / "full")])
    assert refused.exit_code != 0 and "exists and is not empty" in refused.output
    status = runner.invoke(python, ["status"])
    assert "bwrap: " in status.output and "container: " in status.output
    from conftest import container_problem

    assert ("container: works" in status.output) == (not container_problem()), status.output


@pytest.mark.skipif(os.environ.get("AGENTSYNTH_PYTHON_CONTAINER_FULL") != "1" or shutil.which("mmdebstrap") is None
                    or shutil.which("podman") is None,
                    reason="builds a Debian root file system from the mirror (~30 s, ~150 MB): needs podman, "
                           "mmdebstrap and AGENTSYNTH_PYTHON_CONTAINER_FULL=1")
def test_build_image_makes_a_rootfs_the_backend_runs(tmp_path):
    from click.testing import CliRunner

    from agentsynth_kernel import ToolCall
    from agentsynth_python.cli import python

    root = tmp_path / "rootfs"
    built = CliRunner().invoke(python, ["build-image", "--rootfs", str(root)])
    assert built.exit_code == 0, built.output
    env = PythonEnvironment(base_dir=tmp_path, isolation="container", container={"rootfs": str(root)})
    try:
        env.reset(0)
        obs = env.step(ToolCall("python_exec", {"code": "import sys, os\n(sys.version_info[:2], os.getcwd())"}))
        assert "(3, 11), '/world'" in obs.content, obs.content
    finally:
        env.close()
        shutil.rmtree(root, ignore_errors=True)


@needs_container
def test_closing_a_world_removes_its_containers(tmp_path):
    """The agent's container and each checker's are removed once they are killed (off the reset
    path, but before leaked_containers answers); nothing of this process is left."""
    from agentsynth_kernel import ToolCall
    from agentsynth_python.sandbox import leaked_containers

    env = PythonEnvironment(base_dir=tmp_path, isolation="container")
    env.reset(0)
    first = env.proc.container
    assert "2" in env.step(ToolCall("python_exec", {"code": "1 + 1"})).content
    rt = env.runtime
    assert first in c.mine(rt)
    env.reset(1)  # a fresh container per episode
    second = env.proc.container
    assert second != first
    assert env.evaluate("1 + 1") == 2  # a checker's own container
    env.close()
    assert leaked_containers() == []
    assert not {first, second} & set(c.mine(rt))
