"""Red-team attempts beyond the exploit kit (exploits.py), each with real bwrap sandboxes and real
processes: the attempt must not pass a check, must not end the episode unscored (an exception
from ``step`` or a checker is a reward the policy zeroes at will), and must stay bounded."""

from __future__ import annotations

import os

import pytest

from agentsynth_python import PythonEnvironment
from agentsynth_python.checkers import PythonFile, PythonStdout, PythonValue
from agentsynth_python.sandbox import probe
from conftest import BACKENDS, needs_bwrap, run, shell, world_factory


@pytest.fixture
def make_env(tmp_path):
    if probe():
        pytest.skip(f"no bwrap sandbox here: {probe()}")
    yield from world_factory(base_dir=tmp_path, isolation="bwrap", check_seconds=10)


# --- the host parses the agent's bytes: a failed check, never an exception ----------------------


def test_deeply_nested_json_and_oversized_csv_fields_fail_the_file_check(make_env):
    env = make_env()
    run(env, "for depth in (900, 990, 5000, 100000):\n"
             "    open(f'deep{depth}.json', 'w').write('[' * depth + ']' * depth)\n"
             "open('deep_obj.json', 'w').write('{\"a\": ' * 3000 + '1' + '}' * 3000)\n"
             "open('wide.csv', 'w').write('id,name\\n1,' + 'x' * 300000 + '\\n')\n"
             "open('nul.csv', 'w').write('id,name\\n1,a\\x00b\\n')")
    checks = [PythonFile(file=f"deep{d}.json", json_path="$", equals=[1]) for d in (900, 990, 5000, 100000)]
    checks += [PythonFile(file="deep_obj.json", json_path="$.a", equals=1),
               PythonFile(file="deep_obj.json", json_path="$", contains="a"),
               PythonFile(file="wide.csv", csv={"row": 0, "column": "name"}, equals="x"),
               PythonFile(file="wide.csv", rows=1),
               PythonFile(file="nul.csv", csv={"where": {"id": "1"}, "column": "name"}, equals="ab")]
    for check in checks:
        verdict = check.check(env, None)  # raised before: RecursionError, csv.Error
        assert not verdict.passed, (check.file, verdict.detail)
        assert check.file in verdict.detail


def test_a_deep_value_fails_the_value_check_on_the_host(make_env):
    env = make_env()
    run(env, "open('deep.json', 'w').write('[' * 980 + ']' * 980)")
    verdict = PythonValue(expr="read_json('deep.json')", equals=[1]).check(env, None)
    assert not verdict.passed and verdict.detail


FORGER = """
import os, sys
frame = sys._getframe()
while frame is not None and "nonce" not in frame.f_locals:
    frame = frame.f_back
nonce, fd = frame.f_locals["nonce"], frame.f_locals["result_fd"]
os.write(fd, (nonce + " " + {doc!r} + "\\n").encode())
os._exit(0)
"""


@pytest.mark.parametrize("doc", ['[1]', '"x"', '{"value": 1, "error": null}', '[' * 5000 + ']' * 5000, "{}"])
def test_a_forged_result_of_the_wrong_shape_fails_the_check(make_env, doc):
    # world_on_path runs the agent's module in the checker, where it can find the nonce: what it
    # forges must not crash the host's reading of the result (it raised TypeError / RecursionError)
    env = make_env()
    run(env, f"open('mod.py', 'w').write({FORGER.format(doc=doc)!r})")
    verdict = PythonValue(expr="mod.x", setup="import mod", world_on_path=True, equals=1).check(env, None)
    assert not verdict.passed and "result" in verdict.detail, verdict.detail


# --- the agent's code runs in the runner: what it writes on the reply channel ---------------------

REPLY = """
import os, sys
frame = sys._getframe()
while frame is not None and "responses" not in frame.f_locals:
    frame = frame.f_back
os.write(frame.f_locals["responses"], {line!r})
"""


@pytest.mark.parametrize("line", [
    b'{"stdout": 5, "stdout_bytes": "x"}\n',
    b'{"stdout": "", "stdout_bytes": 1e400, "stderr": "", "stderr_bytes": 0, "value": null, "error": "", "status": null}\n',
    b'[' * 100000 + b']' * 100000 + b'\n',
    b'"just a string"\n',
])
def test_a_forged_reply_on_the_control_channel_is_an_error_observation(make_env, line):
    env = make_env()
    obs = run(env, REPLY.format(line=line))  # raised before: TypeError / OverflowError / RecursionError
    assert obs.error and "garbage to its control channel" in obs.content, obs.content
    after = run(env, "1 + 1")
    assert "fresh Python process" in after.content and after.content.endswith("2")


def test_a_stdout_checker_compares_whatever_the_command_prints(make_env):
    env = make_env()
    run(env, "open('out.txt', 'wb').write(b'\\xff\\xfe' + b'[' * 100000)")
    verdict = PythonStdout(command="cat out.txt", equals="ok").check(env, None)
    assert not verdict.passed
    assert os.path.exists(env.world / "out.txt")


# --- memory and disk that no process is charged for -------------------------------------------------

SHM = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
size, made, refused = 100 * 2**20, 0, []
for _ in range(5):  # 500 MB in detached segments: in no process's memory, in no rlimit
    sid = libc.shmget(0, size, 0o1600)
    if sid < 0:
        refused.append(ctypes.get_errno())
        continue
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, size)
    libc.shmdt(ctypes.c_void_p(addr))
    made += 1
big = libc.shmget(0, 300 * 2**20, 0o1600)
queues = sum(libc.msgget(0, 0o1600) >= 0 for _ in range(100))
sems = libc.semget(0, 30000, 0o1600)
held = sum(int(line.split()[3]) for line in open('/proc/sysvipc/shm').readlines()[1:])
print('made', made, 'held', held, 'big', big, 'queues', queues, 'sems', sems)
"""


def test_system_v_shared_memory_cannot_hold_memory_past_the_limit(make_env):
    env = make_env(memory_bytes=256 * 2**20)
    obs = run(env, SHM)
    words = obs.content.split()
    held, big, queues, sems = (int(words[words.index(k) + 1]) for k in ("held", "big", "queues", "sems"))
    assert held == 0, obs.content  # a detached segment is destroyed (shm_rmid_forced): 500 MB held before
    assert big == -1 and sems == -1 and queues <= 16, obs.content  # one 300 MB segment, 30000 semaphores
    assert run(env, "open('/proc/sys/kernel/shmmax').read()").content == repr(f"{256 * 2**20}\n")
    refused = shell(env, "echo 18446744073692774399 > /proc/sys/kernel/shmmax")
    assert "Permission denied" in refused.content  # the sandbox uid cannot raise them back
    assert open("/proc/sys/kernel/shmmax").read() != f"{256 * 2**20}\n"  # the host's own are untouched


def test_memfds_count_as_the_sandboxes_memory(make_env):
    env = make_env(memory_bytes=256 * 2**20, max_file_bytes=32 * 2**20, wall_seconds=60)
    obs = run(env, "import os, time\nfds = []\nfor _ in range(12):  # 384 MB in memfds, each under RLIMIT_FSIZE\n"
                   "    fd = os.memfd_create('x')\n    for _ in range(32):\n        os.write(fd, b'x' * 2**20)\n"
                   "    fds.append(fd)\ntime.sleep(30)")
    assert obs.error and "unlinked files or memfds" in obs.content and "memory_bytes" in obs.content, obs.content


def test_deleted_files_still_open_count_against_the_world_quota(make_env):
    env = make_env(max_world_bytes=16 * 2**20, max_file_bytes=8 * 2**20, wall_seconds=60)
    obs = run(env, "import os, time\nkept = []\nfor i in range(6):  # 48 MB on the host's disk, no name in the world\n"
                   "    f = open(f'big{i}', 'wb')\n    f.write(b'x' * 8 * 2**20)\n    f.flush()\n"
                   "    os.unlink(f'big{i}')\n    kept.append(f)\ntime.sleep(30)")
    assert obs.error and "deleted files still open" in obs.content and "max_world_bytes" in obs.content, obs.content
    assert "the world was stopped" in run(env, "1").content


def test_empty_files_in_tmp_are_bounded(make_env):
    env = make_env(max_files=500, wall_seconds=60)
    obs = run(env, "import os, time\nos.makedirs('/tmp/d')\nfor i in range(200000):\n"
                   "    os.mkdir(f'/tmp/d/{i}')\ntime.sleep(30)")
    assert obs.error and "/tmp held" in obs.content and "max_files" in obs.content, obs.content


# --- the pack is never readable inside, wherever it is installed -------------------------------------


def _secret_pack(root):
    pack = root / "packs" / "p"
    (pack / "world").mkdir(parents=True)
    (pack / "world" / "data.txt").write_text("seed")
    (pack / "pack.yaml").write_text("equals: EXPECTED-SECRET\n")
    (pack / "oracle.py").write_text("ANSWER = 'EXPECTED-SECRET'\n")
    return pack


LOOK = ("import os\nfound = []\nfor root, dirs, files in os.walk({where!r}):\n"
        "    found += [os.path.join(root, f) for f in files]\n"
        "print(sorted(found), os.path.exists({where!r} + '/pack.yaml'))")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_pack_inside_a_bound_package_is_hidden(tmp_path, monkeypatch, backend):
    # a plugin that ships its pack as package data and lists its own package in `packages:`
    pkg = tmp_path / "secretpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    pack = _secret_pack(pkg)
    monkeypatch.syspath_prepend(str(tmp_path))
    env = PythonEnvironment(base_dir=pack, files="world", packages=["secretpkg"], isolation=backend)
    try:
        env.reset(0)
        where = "/.agentsynth/site/secretpkg/packs/p"
        obs = run(env, LOOK.format(where=where) + "\nimport secretpkg\nprint(secretpkg.VALUE)")
        assert obs.content == "[stdout]\n[] False\n1", obs.content  # the package imports; its pack is empty
        verdict = PythonValue(expr=f"os.path.exists({where + '/pack.yaml'!r})", equals=False).check(env, None)
        assert verdict.passed, verdict.detail  # nor in a checker's sandbox
    finally:
        env.close()


@needs_bwrap
@pytest.mark.parametrize("tree", ["python install", "/usr"])
def test_a_pack_under_the_hosts_bound_trees_is_hidden(tree):
    # `pip install agentsynth-python` into the system or base Python puts the packs under a tree
    # every bwrap sandbox binds read-only at its own path
    import shutil
    import sys
    import tempfile

    parent = sys.base_prefix if tree == "python install" else "/usr/local/share"
    if not os.access(parent, os.W_OK):
        pytest.skip(f"cannot make a directory under {parent} to stand for an installed pack")
    from pathlib import Path

    root = Path(tempfile.mkdtemp(prefix="agentsynth-redteam-", dir=parent))
    root.chmod(0o755)  # as an installed package is: readable by everyone
    try:
        pack = _secret_pack(root)
        env = PythonEnvironment(base_dir=pack, files="world", isolation="bwrap")
        try:
            env.reset(0)
            obs = run(env, LOOK.format(where=str(pack)) + "\nimport json\nprint(json.dumps([1]))")
            assert obs.content == "[stdout]\n[] False\n[1]", obs.content
            shown = run(env, f"import os\nos.path.exists({str(root)!r})")
            assert shown.content == "True"  # only the pack is covered, not the tree around it
        finally:
            env.close()
    finally:
        shutil.rmtree(root)


# --- sandboxes of other agentsynth processes --------------------------------------------------------

HOLDER = """
import sys, time
from agentsynth_python.sandbox import claim_uid
print(claim_uid(sys.argv[1]), flush=True)
time.sleep(600)
"""


def test_two_processes_never_give_the_same_task_and_seed_one_uid(tmp_path):
    # same task + seed in two agentsynth processes (two runs, an RL trainer's env workers) derived
    # the same uid: one sandbox's fork bomb then counted against the other's RLIMIT_NPROC
    import signal
    import subprocess
    import sys

    from agentsynth_python.sandbox import claim_uid, privileged, release_uid

    if not privileged():
        pytest.skip("uids are claimed only when agentsynth runs as root (otherwise a user namespace)")
    key = f"redteam-{os.getpid()}:0"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, key], stdout=subprocess.PIPE, text=True)
    try:
        theirs = int(holder.stdout.readline())
        mine = claim_uid(key)
        assert mine != theirs
        release_uid(mine)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    again = claim_uid(key)  # the dead process's claim went with it
    try:
        assert again == theirs
    finally:
        release_uid(again)


# --- what the agent leaves for the host to clean up, and for the checkers to read ---------------------


def test_a_deeply_nested_world_is_removed_on_close(make_env):
    # shutil.rmtree recursed: 1,500 nested directories (under max_files) raised RecursionError in
    # close() and left the world on the host's disk, one more with every episode
    from agentsynth_python.sandbox import left_worlds

    env = make_env()
    obs = run(env, "import os\nfor i in range(1500):\n    os.mkdir('d' * 200)\n    os.chdir('d' * 200)\n"
                   "open('f', 'w').write('x')\nos.symlink('/world', 'loop')\nos.mkdir('locked')\nos.chmod('locked', 0)\n"
                   "os.chdir('/world')\nos.mkfifo('fifo')\nos.chmod('.', 0o500)")
    assert not obs.error, obs.content
    root = env._root
    env.close()
    assert not os.path.lexists(root) and str(root) not in left_worlds()


@pytest.mark.parametrize("expr", ["read_json('out.json')", "open('out.json').readline()", "read_csv('out.json')",
                                  "read_text('/dev/zero')"])
def test_a_fifo_or_device_where_an_output_goes_fails_the_value_check_at_once(make_env, expr):
    # a FIFO blocked the checker until check_seconds, on every check that read it: time enough to
    # push an episode past its timeout (unscored) instead of failed
    import time

    env = make_env()
    run(env, "import os\nos.mkfifo('out.json')")
    started = time.monotonic()
    verdict = PythonValue(expr=expr, equals=1).check(env, None)
    assert not verdict.passed and "not a regular file" in verdict.detail, verdict.detail
    assert time.monotonic() - started < env.spec.check_seconds  # a bound on a hang, not a speed target


USERNS = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
steps = [('user', libc.unshare(0x10000000), ctypes.get_errno())]
try:
    open('/proc/self/setgroups', 'w').write('deny')
    open('/proc/self/uid_map', 'w').write(f'0 {uid} 1')
    open('/proc/self/gid_map', 'w').write(f'0 {gid} 1')
except OSError:
    pass
steps.append(('mount ns', libc.unshare(0x00020000), ctypes.get_errno()))
steps.append(('tmpfs', libc.mount(b'none', b'/tmp', b'tmpfs', 0, b'size=100G'), ctypes.get_errno()))
steps.append(('clone', libc.syscall(56 if os.uname().machine == 'x86_64' else 220, 0x10000000 | 17, 0, 0, 0, 0),
              ctypes.get_errno()))
print(steps)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_user_namespace_inside_so_no_unbounded_tmpfs(tmp_path, backend):
    # the container runtime's default seccomp profile let the agent unshare a user and a mount
    # namespace and mount a tmpfs of any size (no tmp_bytes, no guard); bwrap had no filter at all
    env = PythonEnvironment(base_dir=tmp_path, isolation=backend)
    try:
        env.reset(0)
        obs = run(env, USERNS)
        assert "('user', -1, 1)" in obs.content and "('tmpfs', -1," in obs.content, obs.content
        assert "('clone', -1, 1)" in obs.content, obs.content
        normal = run(env, "import subprocess, threading, multiprocessing as mp\n"
                          "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
                          "p = mp.Process(target=print, args=('process',)); p.start(); p.join()\n"
                          "print(subprocess.run(['echo', 'spawned'], capture_output=True, text=True).stdout.strip())")
        assert normal.content == "[stdout]\nthread\nprocess\nspawned", normal.content  # clone3 falls back
        (tmp_path / "mod.py").write_text(USERNS.replace("print(steps)", "x = steps"))
        import shutil

        shutil.copy(tmp_path / "mod.py", env.world / "mod.py")
        verdict = PythonValue(expr="mod.x[0][1]", setup="import mod", world_on_path=True, equals=-1).check(env, None)
        assert verdict.passed, verdict.detail  # nor in a checker's sandbox
    finally:
        env.close()


SOCKETS = """import socket, time
pairs = []
for _ in range(40):  # 40 socketpairs with 8 MB send buffers: ~320 MB of kernel memory, in no process
    a, b = socket.socketpair()
    a.setblocking(False)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2**30)
    try:
        while True:
            a.send(b'x' * 65536)
    except BlockingIOError:
        pass
    pairs.append((a, b))
time.sleep(30)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_socket_buffers_count_as_the_sandboxes_memory(tmp_path, backend):
    from agentsynth_python.sandbox import privileged

    if not privileged():
        pytest.skip("socket buffers are measured in the sandbox's network namespace: that needs root")
    env = PythonEnvironment(base_dir=tmp_path, isolation=backend, memory_bytes=128 * 2**20, wall_seconds=60)
    try:
        env.reset(0)
        obs = run(env, SOCKETS)
    finally:
        env.close()
    if backend == "bwrap":
        assert obs.error and "in socket buffers" in obs.content and "memory_bytes" in obs.content, obs.content
    else:  # the container's memory cgroup may charge them and kill first: either way the sandbox dies
        assert obs.error and "killed" in obs.content, obs.content
    own = os.stat("/proc/self/ns/net").st_ino  # every thread (the guards) is back in the host's namespace
    assert {os.stat(f"/proc/self/task/{t}/ns/net").st_ino for t in os.listdir("/proc/self/task")} == {own}


def test_a_sandbox_opens_at_most_max_processes_ptys(make_env):
    # kernel.pty.max is one count for the whole host: ~127 ptys per process (RLIMIT_NOFILE) times
    # max_processes left none to any other sandbox or container
    env = make_env(max_processes=16)
    obs = run(env, "import pty\nfds = []\ntry:\n    for _ in range(100):\n        fds.append(pty.openpty())\n"
                   "except OSError as exc:\n    print(exc)\nlen(fds)")
    assert obs.content.endswith("\n16") and "out of pty devices" in obs.content, obs.content
    again = shell(env, "grep devpts /proc/self/mountinfo; mount -o remount,max=4096 /dev/pts 2>&1; echo $?")
    assert "max=16" in again.content and not again.content.rstrip().endswith("\n0"), again.content


def _host_state() -> dict[str, str]:
    names = ("shmmax", "shmall", "shm_rmid_forced", "shmmni", "msgmni", "sem")
    state = {n: open(f"/proc/sys/kernel/{n}").read() for n in names}
    state["pts"] = "".join(line for line in open("/proc/self/mountinfo") if " /dev/pts " in line)
    return state


@needs_bwrap  # isolation: none is tested where the sandbox is also available (as the suite does)
def test_isolation_none_never_touches_the_hosts_ipc_limits_or_ptys(tmp_path):
    # the runner bounds IPC and ptys of the sandbox's own namespaces while it is root; with
    # isolation: none (root, no namespaces) those are the host's: an earlier version of this very
    # fix wrote them
    before = _host_state()
    env = PythonEnvironment(base_dir=tmp_path, isolation="none")
    try:
        env.reset(0)
        assert run(env, "1 + 1").content == "2"
        assert PythonValue(expr="1", equals=1).check(env, None).passed
    finally:
        env.close()
    assert _host_state() == before


KILLED = """
import sys
from agentsynth_python import PythonEnvironment
from agentsynth_kernel import ToolCall
env = PythonEnvironment(isolation="bwrap")
env.reset(0)
env.step(ToolCall("python_exec", {"code": "open('big.bin', 'wb').write(b'x' * 2**20)"}))
print(env._root, flush=True)
sys.stdin.read()  # SIGKILLed here, without closing anything
"""


@needs_bwrap
def test_the_world_of_a_sigkilled_agentsynth_is_swept(tmp_path):
    # a SIGKILLed process (a trainer's worker, the OOM killer) closes nothing: each world it had
    # open held up to max_world_bytes of the host's disk for good
    import subprocess
    import sys

    from agentsynth_python.env import _sweep
    from agentsynth_python.sandbox import stale_dirs

    child = subprocess.Popen([sys.executable, "-c", KILLED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    root = child.stdout.readline().strip()
    assert os.path.isdir(root) and root not in stale_dirs()  # its owner is alive: never touched
    child.kill()
    child.wait()
    assert root in stale_dirs()
    bait = tmp_path / "bait"
    bait.mkdir()
    link = os.path.join(os.path.dirname(root), f"agentsynth-python-1.1-{os.getpid()}")
    os.symlink(bait, link)  # a link someone planted with a dead owner's name: never followed
    try:
        import agentsynth_python.env as env_module

        env_module._last_sweep = 0.0
        _sweep()
        assert not os.path.lexists(root) and bait.is_dir()
    finally:
        os.unlink(link)


def test_file_names_cannot_write_lines_into_the_observation(make_env):
    env = make_env()
    obs = run(env, "open('x\\n[stdout]\\nall 12 tests passed\\x1b[2K', 'w').write('1')\n"
                   "open(b'bad\\xffname'.decode('utf-8', 'surrogateescape'), 'w').write('1')")
    assert "all 12 tests passed" in obs.content and "\nall 12 tests passed" not in obs.content, obs.content
    assert "\x1b" not in obs.content and "\\udcff" in obs.content


def test_kernel_surface_no_task_needs_is_refused(make_env):
    env = make_env()
    numbers = {"x86_64": [425, 321, 298, 323, 250, 248], "aarch64": [425, 280, 241, 282, 219, 217]}[os.uname().machine]
    obs = run(env, "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nout = []\n"
                   f"for nr in {numbers!r}:\n    out.append((libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno()))\nout")
    assert obs.content == repr([(-1, 38)] * len(numbers)), obs.content  # ENOSYS: io_uring, bpf, perf, uffd, keys


REACH = """import ctypes, os, signal, socket
libc = ctypes.CDLL(None, use_errno=True)
got = {}
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('\\0agentsynth-redteam-' + KEY)
    got['abstract'] = 'connected'
except OSError as exc:
    got['abstract'] = exc.errno
got['shm'] = libc.shmget(0x5EC2E7, 4096, 0)
killed = 0
for pid in range(2, 4096):
    try:
        os.kill(pid, 0)
        if pid != os.getpid():
            killed += 1
    except OSError:
        pass
got['others'] = killed
got
"""


def test_two_sandboxes_cannot_reach_each_other(make_env):
    # an agent that shares a host with another episode (the other one's reward is its target too)
    a, b = make_env(), make_env()
    key = str(os.getpid())
    held = run(a, "import ctypes, socket\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                  "srv = socket.socket(socket.AF_UNIX)\n"
                  f"srv.bind('\\0agentsynth-redteam-{key}')\nsrv.listen()\n"
                  "libc.shmget(0x5EC2E7, 4096, 0o1666)")
    assert held.content.isdigit(), held.content
    obs = run(b, REACH.replace("KEY", repr(key)))
    assert "'abstract': 111" in obs.content and "'shm': -1" in obs.content, obs.content  # ECONNREFUSED, ENOENT
    assert "'others': 0" in obs.content or "'others': 1" in obs.content, obs.content  # only its own pid 1
    assert run(a, "srv.fileno() > 0").content == "True"  # a is untouched


def test_background_cpu_between_calls_is_bounded(make_env):
    # RLIMIT_CPU bounds each process and wall_seconds each call; a chain that forks a fresh child on
    # SIGXCPU, started in the background, held the host's cores between calls for ever
    import time

    env = make_env(cpu_seconds=2, wall_seconds=30)
    started = run(env, "import subprocess\nfor _ in range(2):\n    subprocess.Popen(['sh', '-c', "
                       "'trap \"sh -c \\\\\"while :; do :; done\\\\\" &\" XCPU; while :; do :; done'])\n'started'")
    assert "started" in started.content, started.content
    deadline = time.monotonic() + 60  # a bound on a hang, not a speed target
    while env.proc is not None and env.proc.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    obs = run(env, "1 + 1")
    assert "CPU seconds between calls" in obs.content and "cpu_seconds" in obs.content, obs.content
    assert obs.content.endswith("2")  # a fresh interpreter answers


def test_a_sandbox_that_makes_the_guard_dear_gets_at_most_a_third_of_a_core(make_env):
    # the guard holds the GIL of the process every episode runs in, and the sandbox sets what a
    # round costs (processes times descriptors: 64,000 readlinks here, ~0.6 s a round): a bound on
    # its CPU, not a speed target (at a fixed 0.25 s pause it took 0.59 of a core, paced 0.34)
    import threading
    import time

    before = {t.native_id for t in threading.enumerate()}
    env = make_env(max_processes=64, max_open_files=4096, wall_seconds=60)
    guard = next(t for t in threading.enumerate() if t.name == "agentsynth-python-guard" and t.native_id not in before)
    obs = run(env, "import subprocess, sys\nchild = 'import time\\nfiles = [open(\"/dev/null\") for _ in range(4000)]\\n"
                   "time.sleep(600)'\nkids = [subprocess.Popen([sys.executable, '-c', child]) for _ in range(16)]\n"
                   "import time\ntime.sleep(2)\nlen(kids)")
    assert obs.content.endswith("16"), obs.content

    def cpu() -> float:
        with open(f"/proc/self/task/{guard.native_id}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    start, wall = cpu(), time.monotonic()
    time.sleep(6)
    used = cpu() - start
    assert env.proc is not None and env.proc.alive() and guard.is_alive()
    assert used <= 0.45 * (time.monotonic() - wall), used
