"""The sandbox against hostile code, with real bwrap processes: every limit is enforced (the
process is stopped with the right reason), nothing of the host is reachable, and no process
survives an episode."""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from agentsynth_kernel import ToolCall
from agentsynth_python import PythonEnvironment, SandboxError
from agentsynth_python.sandbox import leaked_processes, probe, processes_in
from conftest import BACKENDS, needs_bwrap, run, shell, world_factory


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Every test of the world contract runs on both backends (bwrap, a Podman / Docker container)."""
    return request.param


@pytest.fixture
def make_env(tmp_path, backend):
    yield from world_factory(base_dir=tmp_path, isolation=backend)


def test_a_persistent_interpreter_shows_output_values_errors_and_files(make_env):
    env = make_env()
    first = run(env, "x = 20\nprint('hello')\nx + 1")
    assert first.content == "[stdout]\nhello\n21" and not first.error
    made = run(env, "open('out.txt', 'w').write('abc')\nx * 2")
    assert "40" in made.content and "out.txt (3 bytes, new)" in made.content
    boom = run(env, "def f():\n    return 1 / 0\nf()")
    assert boom.error and "ZeroDivisionError" in boom.content and "return 1 / 0" in boom.content
    assert "runner.py" not in boom.content  # the runner's own frames are not shown
    sub = shell(env, "echo from-sh; echo err >&2; exit 3")
    assert "from-sh" in sub.content and "[stderr]\nerr" in sub.content and "exit status 3" in sub.content
    assert sub.error


def test_no_network_not_even_the_hosts_loopback(make_env):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.1)
    hits = []

    def accept():
        try:
            hits.append(server.accept())
        except OSError:
            pass

    port = server.getsockname()[1]
    env = make_env()
    obs = run(env, f"import socket\nfor host in ('127.0.0.1', '1.1.1.1'):\n    try:\n"
                   f"        socket.create_connection((host, {port}), timeout=3)\n        print(host, 'CONNECTED')\n"
                   "    except OSError as exc:\n        print(host, type(exc).__name__)\n"
                   "import os\nsorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else None")
    accept()
    server.close()
    assert "CONNECTED" not in obs.content and "127.0.0.1 ConnectionRefusedError" in obs.content
    assert "1.1.1.1 OSError" in obs.content  # network unreachable: no route at all
    assert hits == []


def test_nothing_of_the_host_filesystem_is_visible(make_env, tmp_path, backend):
    secret = Path("/tmp") / f"agentsynth-python-test-secret-{os.getpid()}"
    secret.write_text("s3cret")
    os.environ["AGENTSYNTH_PYTHON_TEST_SECRET"] = "s3cret-env"
    try:
        env = make_env()
        obs = run(env, "import os\nfound = []\n"
                       f"for p in ['/etc/shadow', '/root/.bashrc', '/work', {str(secret)!r}, "
                       f"{sys.base_prefix if backend == 'container' else '/etc'!r}, "
                       f"{str(tmp_path)!r}, {'/etc/passwd' if backend == 'bwrap' else '/home/x'!r}, "
                       f"{'/home' if backend == 'bwrap' else '/etc/agentsynth'!r}, {os.getcwd()!r}]:\n"
                       "    found.append((p, os.path.exists(p)))\n"
                       "print(found)\nprint(sorted(os.listdir('/')), sorted(os.listdir('/tmp')))\n"
                       "print('SECRET' in str(dict(os.environ)).upper(), os.getuid() != 0, os.getcwd())")
    finally:
        del os.environ["AGENTSYNTH_PYTHON_TEST_SECRET"]
        secret.unlink()
    assert "True)" not in obs.content.split("\n")[1], obs.content  # not one of those paths exists inside
    if backend == "bwrap":
        assert "['.agentsynth', 'bin', 'dev', 'lib', 'lib64', 'proc', 'root', 'sbin', 'tmp', 'usr', 'world']" in obs.content
    else:  # the image's own Debian (its /etc, not the host's), read-only; /etc/shadow unreadable to the sandbox uid
        assert "'.agentsynth'" in obs.content and "'world'" in obs.content and "'etc'" in obs.content
    assert "False True /world" in obs.content  # no host variable, not root, in the world
    ro = run(env, "import os\nfor p in ['/usr/x', '/.agentsynth/runner.py', '/root/x', '/etc/x', '/x']:\n    try:\n"
                  "        open(p, 'a').write('x')\n        print(p, 'WRITTEN')\n"
                  "    except OSError as exc:\n        print(p, exc.strerror)")
    lines = ro.content.splitlines()[1:]
    assert len(lines) == 5 and all(line.endswith(("Read-only file system", "Permission denied", "/etc/x No such file or directory")) for line in lines)


def test_fork_bomb_hits_the_process_limit_and_nothing_survives_the_episode(make_env):
    env = make_env(max_processes=16)
    namespace = env.proc.namespace
    obs = run(env, "import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n"
                   "            time.sleep(3600)\n            os._exit(0)\n        n += 1\n"
                   "except OSError as exc:\n    print('stopped after', n, exc.errno)")
    assert "stopped after" in obs.content and " 11" in obs.content  # EAGAIN
    assert int(obs.content.split("stopped after ")[1].split()[0]) < 16
    assert len(processes_in({namespace})) >= 10
    env.close()
    assert processes_in({namespace}) == [] and leaked_processes() == []


def test_a_setsid_daemon_dies_with_the_episode(make_env):
    env = make_env()
    namespace = env.proc.namespace
    obs = run(env, "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                   "        while True:\n            time.sleep(0.1)\n    os._exit(0)\n"
                   "time.sleep(0.2)\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    assert int(obs.content.split()[-1]) >= 3  # pid 1, the interpreter and the daemon
    world = env.world
    env.close()
    assert processes_in({namespace}) == [] and leaked_processes() == []
    assert not world.exists()


def test_memory_limit_raises_memory_error(make_env):
    env = make_env(memory_bytes=256 * 2**20)
    obs = run(env, "x = bytearray(1024 * 2**20)")
    assert obs.error and "MemoryError" in obs.content
    assert run(env, "1 + 1").content == "2"  # the interpreter survived


def test_cpu_limit_kills_with_the_reason(make_env):
    env = make_env(cpu_seconds=1, wall_seconds=600)
    obs = run(env, "while True:\n    pass")
    assert obs.error and "CPU time limit of 1 s exceeded" in obs.content
    again = run(env, "2 + 2")
    assert "fresh Python process" in again.content and "4" in again.content


def test_wall_limit_kills_the_whole_sandbox_and_keeps_files(make_env):
    env = make_env(wall_seconds=1)
    run(env, "open('kept.txt', 'w').write('k')\nx = 5")
    old = env.proc.namespace
    obs = shell(env, "sleep 1000 & sleep 1000")
    assert obs.error and "wall-time limit of 1 s" in obs.content
    assert processes_in({old}) == []
    after = run(env, "print(open('kept.txt').read())\n'x' in dir()")
    assert "fresh Python process" in after.content and "[stdout]\nk\nFalse" in after.content


def test_file_size_and_open_file_limits(make_env):
    env = make_env(max_file_bytes=1 * 2**20, max_open_files=32)
    big = run(env, "open('big.bin', 'wb').write(b'0' * (2 * 2**20))")
    assert big.error and "File too large" in big.content
    fds = run(env, "fs = []\nwhile True:\n    fs.append(open('/dev/null'))")
    assert fds.error and "Too many open files" in fds.content


def test_a_world_past_its_quota_is_stopped_and_fails_its_checks(make_env):
    from agentsynth_python.checkers import PythonFile

    env = make_env(max_world_bytes=3 * 2**20, max_file_bytes=2 * 2**20)
    obs = run(env, "open('out.txt', 'w').write('fine')\nfor i in range(100):\n"
                   "    open(f'f{i}', 'wb').write(b'0' * 2**20)")
    assert obs.error and "max_world_bytes" in obs.content
    assert "the world was stopped" in run(env, "1").content
    verdict = PythonFile(file="out.txt", equals="fine").check(env, None)
    assert not verdict.passed and "broke a limit" in verdict.detail


def test_killing_everything_inside_only_restarts_the_interpreter(make_env):
    env = make_env()
    obs = run(env, "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n"
                   "os.kill(os.getpid(), signal.SIGKILL)")
    assert obs.error and "ended: killed (SIGKILL" in obs.content
    assert "3" in run(env, "1 + 2").content


def test_output_is_capped(make_env):
    env = make_env(output_bytes=1000)
    obs = run(env, "print('A' * 5_000_000)")
    assert len(obs.content) < 2000 and "more bytes not shown" in obs.content


def test_host_packages_are_importable_read_only(make_env):
    env = make_env(packages=["attr", "attrs"])
    obs = run(env, "import attrs, os\nprint(attrs.__file__)\nos.access(os.path.dirname(attrs.__file__), os.W_OK)")
    assert "/.agentsynth/site/attrs/__init__.py" in obs.content and obs.content.endswith("False")
    with pytest.raises(ValueError, match="not installed"):
        PythonEnvironment(packages=["no_such_package_xyz"])


@needs_bwrap
def test_isolation_none_is_explicit_and_missing_bwrap_is_an_error(tmp_path, monkeypatch):
    from agentsynth_python import sandbox

    env = PythonEnvironment(base_dir=tmp_path, isolation="none")
    try:
        env.reset(0)
        assert run(env, "import os\nos.getcwd()").content.strip("'").endswith("/world")
    finally:
        env.close()
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH: a real lookup failure
    sandbox.probe.cache_clear()
    try:
        with pytest.raises(SandboxError, match="bubblewrap is not installed.*isolation: none"):
            PythonEnvironment(base_dir=tmp_path)
    finally:
        sandbox.probe.cache_clear()
        monkeypatch.undo()
        assert probe() == ""


def test_bad_tool_input_is_an_error_observation(make_env):
    env = make_env(shell=False)
    assert [t.name for t in env.tools()] == ["python_exec"]
    assert env.step(ToolCall("shell", {"command": "ls"})).error
    assert env.step(ToolCall("python_exec", {"code": 5})).error
    assert "SyntaxError" in run(env, "def (").content


def test_concurrent_sandboxes_are_separate(make_env):
    a, b = make_env(), make_env()
    run(a, "open('mine.txt', 'w').write('a')")
    results = {}

    def look(name, env):
        results[name] = run(env, "import os\nsorted(os.listdir('.'))").content

    threads = [threading.Thread(target=look, args=(n, e)) for n, e in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "mine.txt" in results["a"] and "mine.txt" not in results["b"]


def test_a_background_writer_is_stopped_between_calls(make_env):
    import time

    env = make_env(max_world_bytes=4 * 2**20, max_file_bytes=2**20)
    run(env, "import subprocess\nsubprocess.Popen(['sh', '-c', 'i=0; while :; do i=$((i+1)); "
             "head -c 1000000 /dev/zero > f$i; done'])")
    deadline = time.monotonic() + 120  # a bound on a hang, not a speed requirement
    while not env.violation and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "max_world_bytes" in env.violation
    assert "the world was stopped" in run(env, "1").content


def test_the_memory_of_all_processes_together_is_bounded(make_env):
    env = make_env(memory_bytes=128 * 2**20, wall_seconds=120)
    obs = run(env, "import subprocess, sys\nkids = [subprocess.Popen([sys.executable, '-c', "
                   "'import time; x = b\"x\" * (60 * 2**20); time.sleep(600)']) for _ in range(6)]\n"
                   "[k.wait() for k in kids]")
    # the guard sums the processes' memory; a container's memory cgroup may OOM-kill one first:
    # either way the whole sandbox is killed with that reason
    assert obs.error and "memory together" in obs.content and "memory_bytes" in obs.content, obs.content
    # the runtime's monitor (conmon) marks an OOM kill with a file in its cwd: never in the world
    assert "Files changed" not in obs.content and list(env.world_for_checks().iterdir()) == []


@needs_bwrap
def test_a_sandbox_outlives_the_thread_that_started_it(tmp_path):
    # bwrap's parent-death signal follows the starting THREAD: sandboxes are started from one
    # long-lived thread, so an engine worker thread that ends does not kill a running episode
    env = PythonEnvironment(base_dir=tmp_path)
    try:
        starter = threading.Thread(target=env.reset, args=(0,))
        starter.start()
        starter.join()
        run(env, "x = 41")
        obs = run(env, "x + 1")
        assert obs.content == "42" and env.restarts == 0
    finally:
        env.close()


CHILD = """
import sys, time
from agentsynth_python import PythonEnvironment
from agentsynth_kernel import ToolCall
env = PythonEnvironment(isolation=sys.argv[1])
env.reset(0)
env.step(ToolCall("python_exec", {"code": "import os\\nif os.fork() == 0:\\n    os.setsid()\\n    import time\\n"
                                          "    while True: time.sleep(1)"}))
print(env.proc.namespace, env.proc.container, flush=True)
time.sleep(600)  # SIGKILLed here, without closing anything
"""


def test_every_sandbox_process_dies_when_agentsynth_is_sigkilled(tmp_path, backend):
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "child.py").write_text(CHILD)
    proc = subprocess.Popen([sys.executable, "child.py", backend], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.split()[0].isdigit(), proc.stderr.read()
        namespace, name = int(line.split()[0]), line.split()[1]
        assert len(processes_in({namespace})) >= 2
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 60  # a bound on a hang, not a speed requirement
    while processes_in({namespace}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_in({namespace}) == []
    if backend == "container":  # the container itself is gone too (its reaper removed it): no orphan
        from agentsynth_python import container

        rt = container.probe(container.ContainerSpec())
        while name in container.our_containers(rt) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert name not in container.our_containers(rt)

