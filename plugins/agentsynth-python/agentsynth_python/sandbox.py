"""The sandbox: a bubblewrap (``bwrap``) container per process, a Podman / Docker container per
process (``isolation: container``, see container.py: same runner, same paths, same bookkeeping
of pid namespaces), or no isolation when asked for.

What a sandbox sees (bwrap mode): ``/usr`` (and the ``/bin``, ``/lib`` ... links) and the Python
install read-only, the packages the world lists read-only under ``/.agentsynth/site``, the world
directory at ``/world`` (read-write for the agent, read-only for checkers), a private ``/tmp``
tmpfs of bounded size, its own ``/proc`` and a minimal ``/dev``. Nothing else of the host: no
``/etc``, ``/root``, ``/home``, ``/work`` or host ``/tmp``. It has its own network namespace (only
a loopback of its own: no network), pid, IPC and UTS namespaces, and a new session.

Limits: the runner sets RLIMIT_AS / CPU / NPROC / NOFILE / FSIZE (hard = soft) before any agent
code runs. When agentsynth runs as root, bwrap runs privileged and the runner drops to a fresh
uid of its own (so RLIMIT_NPROC applies and counts only this sandbox's processes); otherwise
bwrap makes a user namespace and the limits apply to the invoking user inside it.

Killing: SIGKILL to bwrap's process group; ``--die-with-parent`` takes the sandbox's pid 1 with
it and the kernel kills every process of the pid namespace. :func:`reap` then checks ``/proc``
for any process left in that namespace and kills it, so no daemon survives an episode.
"""

from __future__ import annotations

import functools
import json
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

RUNNER = Path(__file__).with_name("runner.py")
INSIDE_WORLD = "/world"
INSIDE_RUNNER = "/.agentsynth/runner.py"
INSIDE_SITE = "/.agentsynth/site"
INSIDE_CHECK = "/check"
MARKER = "agentsynth-python-sandbox"
ISOLATIONS = ("auto", "bwrap", "container", "none")


class SandboxError(RuntimeError):
    """The sandbox cannot be had (no bwrap, namespaces refused) or failed to start: an
    infrastructure failure, never a silent downgrade."""

    agentsynth_error_kind = "environment"


@attrs.frozen
class Limits:
    """What bounds every process of a sandbox (the agent's and the checkers')."""

    cpu_seconds: int = 30
    wall_seconds: float = 30.0
    memory_bytes: int = 1024 * 2**20
    max_processes: int = 64
    max_open_files: int = 256
    max_file_bytes: int = 32 * 2**20
    tmp_bytes: int = 64 * 2**20
    output_bytes: int = 16_000

    def runner(self) -> dict[str, int]:
        return {"cpu_seconds": self.cpu_seconds, "memory_bytes": self.memory_bytes,
                "max_processes": self.max_processes, "max_open_files": self.max_open_files,
                "max_file_bytes": self.max_file_bytes}


# --- probing ------------------------------------------------------------------------------------


@functools.cache
def probe() -> str:
    """'' when bwrap sandboxes work here, else why not (checked once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return ("bubblewrap is not installed (Debian: apt-get install bubblewrap); it gives each episode its own "
                "network, pid and mount namespaces")
    argv = [bwrap, *_namespace_flags(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to run: {exc}"
    if done.returncode != 0:
        return (f"bwrap cannot create namespaces here ({done.stderr.strip()[:300] or done.returncode}); the kernel "
                "may forbid unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone / "
                "user.max_user_namespaces)")
    return ""


def privileged() -> bool:
    return os.geteuid() == 0


def _namespace_flags() -> list[str]:
    flags = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session"]
    if not privileged():
        flags.insert(0, "--unshare-user")
    return flags


def resolve_isolation(isolation: str) -> str:
    """'bwrap', 'container' or 'none'; raises SandboxError when bwrap is required and does not
    work ('container' is probed by :func:`agentsynth_python.container.probe`)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation: expected one of {', '.join(ISOLATIONS)}, got {isolation!r}")
    if isolation in ("none", "container"):
        return isolation
    problem = probe()
    if problem:
        raise SandboxError(f"agentsynth-python: no sandbox: {problem}. Refusing to run agent code unisolated; "
                           "set 'isolation: none' only for trusted code")
    return "bwrap"


# --- what a sandbox binds -----------------------------------------------------------------------


def python_install() -> tuple[str, list[str]]:
    """(the real interpreter, the install directories to bind): the base install, not a venv."""
    exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable) or sys.executable)
    dirs = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)})
    return exe, dirs


def package_paths(names: list[str]) -> list[tuple[str, str]]:
    """(host path, name inside /.agentsynth/site) for each importable top-level package of the
    host environment, plus its vendored ``NAME.libs`` directory; ValueError for a missing one."""
    import importlib.util

    found: list[tuple[str, str]] = []
    for name in names:
        if not name.isidentifier():
            raise ValueError(f"packages: {name!r} is not a top-level module name")
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin in (None, "built-in", "frozen") and not spec.submodule_search_locations:
            raise ValueError(f"packages: {name!r} is not installed in the host environment ({sys.executable})")
        if spec.submodule_search_locations:
            path = os.path.realpath(list(spec.submodule_search_locations)[0])
        else:
            path = os.path.realpath(str(spec.origin))
        found.append((path, os.path.basename(path)))
        libs = os.path.join(os.path.dirname(path), f"{name}.libs")
        if os.path.isdir(libs):
            found.append((os.path.realpath(libs), f"{name}.libs"))
    return found


def _dirs_for(path: str, done: set[str]) -> list[str]:
    """``--dir`` for every parent of ``path`` not made yet, traversable (mode 0711) by the sandbox
    uid: bwrap would make them like the host's (``/root`` is 0700)."""
    flags: list[str] = []
    parts = Path(path).parts[1:-1]
    for i in range(len(parts)):
        d = "/" + "/".join(parts[: i + 1])
        if d in done or d in ("/usr",) or d.startswith("/usr/"):
            continue
        done.add(d)
        flags += ["--perms", "0711", "--dir", d]
    return flags


def masked(hidden: list[str], packages: list[tuple[str, str]], *, host_system: bool) -> list[str]:
    """Where each of the ``hidden`` host directories (the pack: its pack.yaml holds the expected
    values, its oracle the answers, its checks the hidden tests) appears inside a sandbox, to be
    covered with an empty tmpfs. A pack installed as package data of a system-wide install
    (``pip install`` into /usr/local, or into the base Python) is under a tree the sandbox binds
    read-only: ``/usr`` and the Python install (``host_system``: bwrap, where they are the
    host's), or a directory of ``packages``."""
    trees: list[tuple[str, str]] = [(p, f"{INSIDE_SITE}/{name}") for p, name in packages]
    if host_system:
        trees += [("/usr", "/usr"), *((d, d) for d in python_install()[1])]
        trees += [(str(Path("/") / link), f"/{link}") for link in ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
                  if (Path("/") / link).is_dir() and not (Path("/") / link).is_symlink()]
    needed = [python_install()[0], str(RUNNER), *(p for p, _ in packages)]  # what the sandbox runs stays
    inside: list[str] = []
    for path in hidden:
        real = os.path.realpath(path)
        if any(n == real or n.startswith(real.rstrip("/") + "/") for n in needed):
            continue
        for tree, where in trees:
            if real != tree and real.startswith(tree.rstrip("/") + "/") and os.path.isdir(real):
                inside.append(where + real[len(tree.rstrip("/")):])
    return sorted(set(inside))


def bwrap_argv(world: Path, *, writable: bool, limits: Limits, packages: list[tuple[str, str]],
               check_files: list[tuple[str, str]] | None = None, status_fd: int | None = None,
               hidden: list[str] | None = None) -> list[str]:
    """The bwrap command line (without the command)."""
    bwrap = shutil.which("bwrap") or "bwrap"
    argv = [bwrap, *_namespace_flags(), "--ro-bind", "/usr", "/usr"]
    for link in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / link
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), f"/{link}"]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), f"/{link}"]
    made: set[str] = set()
    _, installs = python_install()
    for d in installs:
        if d != "/usr" and not d.startswith("/usr/"):
            argv += _dirs_for(d, made)
            argv += ["--ro-bind", d, d]
    argv += ["--perms", "0755", "--dir", "/.agentsynth", "--ro-bind", str(RUNNER), INSIDE_RUNNER,
             "--perms", "0755", "--dir", INSIDE_SITE]
    for host_path, name in packages:
        argv += ["--ro-bind", host_path, f"{INSIDE_SITE}/{name}"]
    if check_files:
        argv += ["--perms", "0755", "--dir", INSIDE_CHECK]
        for host_path, name in check_files:
            argv += ["--ro-bind", host_path, f"{INSIDE_CHECK}/{name}"]
    for inside in masked(hidden or [], packages, host_system=True):
        argv += ["--perms", "0555", "--size", "4096", "--tmpfs", inside]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(limits.tmp_bytes),
             "--tmpfs", "/tmp", "--bind" if writable else "--ro-bind", str(world), INSIDE_WORLD,
             "--chdir", INSIDE_WORLD, "--hostname", "sandbox", "--clearenv"]
    if status_fd is not None:
        argv += ["--json-status-fd", str(status_fd)]
    return argv


# --- seccomp: no user namespaces inside ------------------------------------------------------------

# (audit arch, unshare, clone, clone3) per machine; clone's flags are its first argument on both
_SYSCALLS = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}
# refused with ENOSYS, as container runtimes' default profiles do: kernel surface no task needs and
# a privilege escalation often starts from (io_uring_setup/enter/register, bpf, perf_event_open,
# userfaultfd, keyctl, add_key, request_key)
_DENIED = {"x86_64": (425, 426, 427, 321, 298, 323, 250, 248, 249),
           "aarch64": (425, 426, 427, 280, 241, 282, 219, 217, 218)}
_CLONE_NEWUSER = 0x10000000


@functools.cache
def seccomp_program() -> bytes | None:
    """A classic BPF seccomp filter, installed by the runner before any agent code (every backend:
    a container runtime's default profile lets an unprivileged process unshare a user and a mount
    namespace and mount a tmpfs of any size there; bwrap has no filter of its own) that refuses new user
    namespaces: ``unshare`` / ``clone`` with CLONE_NEWUSER fail with EPERM, ``clone3`` (its flags
    are behind a pointer) with ENOSYS, so libc falls back to ``clone``; any other ABI of the
    machine (i386, x32) gets ENOSYS for every call. Without it the agent became root of a user
    namespace of its own (``unshare -Urm``), where it could mount a tmpfs no limit and no guard
    sees, and namespaces (network, mount) the guard does not look into. Everything else is
    allowed but for a few calls container runtimes refuse too (``_DENIED``). None on a machine
    this table does not know (then there is no filter)."""
    import platform
    import struct

    machine = platform.machine()
    if machine not in _SYSCALLS:
        return None
    arch, unshare, clone, clone3 = _SYSCALLS[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    # (code, jump-if-true label, jump-if-false label, k); labels resolved below
    program: list[tuple[int, str | None, str | None, int]] = [
        (ld, None, None, 4), (jeq, None, "enosys", arch),  # seccomp_data.arch
        (ld, None, None, 0), (jge, "enosys", None, 0x40000000),  # seccomp_data.nr; x32 numbers
        (jeq, "enosys", None, clone3), (jeq, "flags", None, unshare), (jeq, "flags", None, clone),
        *((jeq, "enosys", None, nr) for nr in _DENIED[machine]),
        (ret, None, None, allow),
    ]
    labels = {"flags": len(program)}
    program += [(ld, None, None, 16), (jset, "eperm", None, _CLONE_NEWUSER), (ret, None, None, allow)]  # args[0]
    labels["eperm"] = len(program)
    program.append((ret, None, None, eperm))
    labels["enosys"] = len(program)
    program.append((ret, None, None, enosys))
    out = b""
    for i, (code, jt, jf, k) in enumerate(program):
        rel = [labels[j] - i - 1 if j else 0 for j in (jt, jf)]
        out += struct.pack("<HBBI", code, rel[0], rel[1], k)
    return out


def sandbox_env(seed: int, home: str) -> dict[str, str]:
    """The whole environment of a sandboxed process: nothing of the host's (no keys, no paths).
    ``python3`` on PATH is the host's base interpreter (read-only)."""
    exe, _ = python_install()
    return {"PATH": f"{os.path.dirname(exe)}:/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": str(seed % 4294967296), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            "TMPDIR": "/tmp", "USER": "sandbox"}


_uids_in_use: set[int] = set()


def claim_uid(key: str) -> int | None:
    """A uid for one episode's sandbox (root only: the sandbox drops to it), else None.

    Derived from ``key`` (task and seed), so what the agent sees (``id``, ``ls -l``) is the same
    in two runs with the same seed; never one that a running sandbox of this process holds, so
    concurrent episodes (even of the same task and seed) never share an RLIMIT_NPROC count."""
    if not privileged():
        return None
    import hashlib

    uid = 1_000_000 + int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % 1_000_000_000
    with _lock:
        while uid in _uids_in_use or not _lock_uid(uid):
            uid = 1_000_000 + (uid - 1_000_000 + 1) % 1_000_000_000
        _uids_in_use.add(uid)
    return uid


def release_uid(uid: int | None) -> None:
    if uid is not None:
        with _lock:
            _uids_in_use.discard(uid)
            _unlock_uid(uid)


# Another agentsynth process on the host (a second run, an RL trainer's env workers) derives the
# same uid from the same task and seed: its sandbox would share this one's RLIMIT_NPROC count and
# per-user kernel quotas (pipe buffers, inotify instances, pending signals), so a fork bomb here
# would stop its shell and checkers from starting. A uid is therefore also claimed host-wide: a
# POSIX lock on byte ``uid`` of one root-only file, which the kernel drops when its process dies.
_UID_LOCKS = "/run/agentsynth-python-uids.lock"
_uid_lock_fd: int | None = None


def _lock_uid(uid: int) -> bool:
    """Whether ``uid`` is now this process's on the host (no other agentsynth process holds it)."""
    global _uid_lock_fd
    import fcntl

    if _uid_lock_fd is None:
        path = _UID_LOCKS if os.access(os.path.dirname(_UID_LOCKS), os.W_OK) else os.path.join(
            tempfile.gettempdir(), os.path.basename(_UID_LOCKS))
        # kept open for the life of the process: closing any descriptor of the file drops its locks
        _uid_lock_fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.lockf(_uid_lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, uid)
    except OSError:
        return False
    return True


def _unlock_uid(uid: int) -> None:
    import fcntl

    if _uid_lock_fd is not None:
        try:
            fcntl.lockf(_uid_lock_fd, fcntl.LOCK_UN, 1, uid)
        except OSError:
            pass


# --- process bookkeeping: what is alive, what must be dead ---------------------------------------

_live: set[int] = set()  # pid namespaces of running sandboxes
# the Process (its id()) that registered each live namespace last: a namespace id freed by a
# sandbox that ended on its own may be another's by the time it is killed; that one keeps it
_live_owner: dict[int, int] = {}
_roots: set[int] = set()  # host pids of the running sandboxes' bwrap processes
_uids: set[int] = set()  # uids of this process's sandboxes (root mode), to tell them from other runs' sandboxes
_closed: set[int] = set()  # pid namespaces of sandboxes that were killed
_worlds: set[str] = set()  # world directories of open environments
_closed_worlds: set[str] = set()  # world directories of closed environments (must be gone)
_closed_containers: dict[str, Any] = {}  # name -> runtime of containers that were killed (must be gone)
_starting = 0  # containers between their start and the registration of their pid namespace
_lock = threading.Lock()
_starting_done = threading.Condition(_lock)


def _pid_ns(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _state(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"X"


def processes_in(namespaces: set[int]) -> list[int]:
    """Host pids of the live processes (zombies are dead: they run nothing and are reaped by the
    kernel as the namespace goes) whose pid namespace is one of ``namespaces``."""
    found: list[int] = []
    if not namespaces:
        return found
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            ns = _pid_ns(int(entry.name))
            if ns in namespaces and _state(int(entry.name)) not in (b"Z", b"X"):
                found.append(int(entry.name))
    return found


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def memory_of(namespace: int | None, pids: list[int] | None = None) -> int:
    """Bytes of memory the processes of a sandbox use together (proportional set size: shared
    pages are split between the processes that share them). ``pids``: its processes, when known."""
    total = 0
    for pid in pids if pids is not None else processes_in({namespace} if namespace is not None else set()):
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                for line in f:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError):
            continue
    return total


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds_of(pids: list[int]) -> float:
    """CPU seconds the sandbox's processes used, the dead ones included: each live process's own
    time plus that of the children it reaped (orphans are reaped by the sandbox's pid 1, which is
    one of ``pids``). RLIMIT_CPU bounds each process, not a chain of them that fork on SIGXCPU."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            continue
    return total / _TICK


def unlinked_files(pids: list[int]) -> dict[int, int]:
    """{device: bytes} of the files the sandbox's processes hold open or mapped that have no name
    left (deleted after opening, ``memfd_create``): no scan of a directory sees them, no rlimit
    bounds how many (RLIMIT_FSIZE bounds each), and they live as long as a descriptor or mapping
    does. On the world's device they are disk the world uses; elsewhere (a memfd, /tmp) memory."""
    seen: set[tuple[int, int]] = set()
    held: dict[int, int] = {}
    for pid in pids:
        for path in _unnamed(pid):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if st.st_nlink or not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            held[st.st_dev] = held.get(st.st_dev, 0) + st.st_blocks * 512  # what is allocated (sparse: 0)
    return held


def _unnamed(pid: int) -> list[str]:
    """/proc paths of the descriptors and mappings of ``pid`` whose file has no name: the kernel
    marks them ``(deleted)`` or names them ``/memfd:`` (one readlink per descriptor, one read of
    ``maps``, a stat only for those)."""
    found: list[str] = []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        names = []
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.endswith(" (deleted)") or target.startswith("/memfd:"):
            found.append(f"/proc/{pid}/fd/{name}")
    try:  # a mapping outlives its descriptor; map_files can be read as root only
        with open(f"/proc/{pid}/maps", "rb") as f:
            maps = f.read()
    except OSError:
        return found
    for line in maps.splitlines():
        if line.endswith(b" (deleted)") or b" /memfd:" in line:
            found.append(f"/proc/{pid}/map_files/{line.split(None, 1)[0].decode()}")
    return found


def tmp_entries(pids: list[int]) -> int:
    """Inodes in use on the sandbox's private /tmp: a tmpfs bounds its bytes (``tmp_bytes``), not
    its entries, and each empty file or directory costs kernel memory no process is charged for."""
    host_root = os.stat("/")
    for pid in pids:
        try:
            root = os.stat(f"/proc/{pid}/root")
            if (root.st_dev, root.st_ino) == (host_root.st_dev, host_root.st_ino):
                continue  # a process of a sandbox still being set up: its root is still the host's
            vfs = os.statvfs(f"/proc/{pid}/root/tmp")
        except OSError:
            continue
        return max(0, vfs.f_files - vfs.f_ffree)
    return 0


def leaked_processes() -> list[int]:
    """Processes still alive in a sandbox that was killed (there must be none): in a killed
    sandbox's pid namespace and not descended from a running sandbox (namespace ids are reused)."""
    with _lock:
        # a container that is starting may have a namespace id a killed sandbox had, and is not
        # registered yet (its processes descend from the runtime's monitor, not from us): wait
        # until none is starting, and keep new ones from starting while /proc is read
        _starting_done.wait_for(lambda: _starting == 0, timeout=120)
        dead, roots, uids = _closed - _live, set(_roots), set(_uids) or {os.getuid()}
        candidates = processes_in(dead)
    leaked = []
    for pid in candidates:
        try:
            if os.stat(f"/proc/{pid}").st_uid not in uids:
                continue  # a sandbox of another agentsynth process that got a reused namespace id
        except OSError:
            continue
        current, hops = pid, 0
        while current > 1 and current not in roots and hops < 64:
            current, hops = _parent(current), hops + 1
        if current not in roots:
            leaked.append(pid)
    return leaked


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def reap(namespace: int | None, uid: int | None = None) -> None:
    """Kill whatever is left in ``namespace`` (normally nothing: the kernel did it); only the
    processes of ``uid`` when given (a container's: a namespace id freed by it may already be
    another sandbox's, which runs as another uid)."""
    if namespace is None:
        return
    for _ in range(500):  # normally done at once; bounded, whatever the load
        left = processes_in({namespace})
        if uid is not None:
            left = [pid for pid in left if _owner(pid) == uid]
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def death_reason(returncode: int | None, limits: Limits) -> str:
    """Why a sandboxed process ended, from bwrap's exit status (128 + signal when killed)."""
    if returncode is None:
        return "it is still running"
    sig = returncode - 128 if returncode > 128 else (-returncode if returncode < 0 else 0)
    if sig == signal.SIGXCPU:
        return f"killed: CPU time limit of {limits.cpu_seconds} s exceeded (cpu_seconds)"
    if sig == signal.SIGKILL:
        return "killed (SIGKILL: CPU hard limit, memory, or a kill from inside)"
    if sig:
        return f"killed by signal {signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig}"
    return f"exited with status {returncode}"


# --- one sandboxed process ----------------------------------------------------------------------

# bwrap's --die-with-parent (PR_SET_PDEATHSIG) fires when the THREAD that started it exits, not
# the process: a sandbox started on a short-lived worker thread would die mid-episode. Every
# sandbox is started from this one thread, which lives as long as agentsynth does.
_SPAWNER: Any = None


def _popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
    global _SPAWNER
    from concurrent.futures import ThreadPoolExecutor

    with _lock:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentsynth-python-spawner")
        spawner = _SPAWNER
    proc: subprocess.Popen[bytes] = spawner.submit(subprocess.Popen, *args, **kwargs).result()
    return proc



class Process:
    """One sandboxed runner process with pipes to it (see runner.py for its modes)."""

    def __init__(self, *, world: Path, isolation: str, limits: Limits, mode: str, seed: int,
                 packages: list[tuple[str, str]], writable: bool, check_files: list[tuple[str, str]] | None = None,
                 extra: dict[str, Any] | None = None, uid: int | None = None, runtime: Any = None,
                 hidden: list[str] | None = None) -> None:
        self.limits, self.isolation = limits, isolation
        self.namespace: int | None = None
        self.uid = uid
        self.runtime = runtime  # container.Runtime for isolation 'container'
        self.container: str | None = None
        self.oom = False
        self._init: tuple[int, str] | None = None  # a container's init: (host pid, start time)
        self._oom_file: str | None = None  # a container's cgroup OOM-kill counter
        self._reaped = False
        self.diag: Any = None  # the guard's sock_diag socket in this sandbox's network namespace
        if uid is not None:
            with _lock:
                _uids.add(uid)
        exe, _ = python_install()
        inside = isolation in ("bwrap", "container")
        cwd = INSIDE_WORLD if inside else str(world)
        site = INSIDE_SITE if inside else None
        paths = [site] if site and packages else []
        if isolation == "none":
            paths = sorted({os.path.dirname(p) for p, _ in packages})
        program = seccomp_program()
        config = {"mode": mode, "limits": limits.runner(), "uid": uid, "cwd": cwd, "paths": paths, "namespaced": inside,
                  "output_bytes": limits.output_bytes, "seccomp": program.hex() if program else None, **(extra or {})}
        runner = INSIDE_RUNNER if inside else str(RUNNER)
        python = runtime.python if isolation == "container" else exe
        command = [python, "-I", "-S", "-B", runner, json.dumps(config), MARKER]
        self._stderr = tempfile.TemporaryFile()
        status_r = status_w = None
        self._status: Any = None
        home = (INSIDE_WORLD if inside else str(world)) if writable else "/tmp"
        variables = sandbox_env(seed, home)
        pidfile = None
        if not writable:  # a checker's Python reads nothing of the world's ~/.local or its cwd
            variables.update({"PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1"})
        if isolation == "bwrap":
            status_r, status_w = os.pipe()
            argv = bwrap_argv(world, writable=writable, limits=limits, packages=packages, check_files=check_files,
                              status_fd=status_w, hidden=hidden)
            for key, value in variables.items():
                argv += ["--setenv", key, value]
            argv, env = [*argv, *command], {"PATH": os.defpath}
        elif isolation == "container":
            from . import container

            variables["PATH"] = "/usr/local/bin:/usr/bin:/bin"
            self.container = container.container_name()
            self._piddir = tempfile.mkdtemp(prefix=f"agentsynth-python-pid-{owner_tag()}-")
            pidfile = os.path.join(self._piddir, "pid") if runtime.kind == "podman" else None
            argv = container.run_argv(runtime, name=self.container, world=world, writable=writable, limits=limits,
                                      uid=uid, packages=packages, runner=RUNNER, check_files=check_files,
                                      env=variables, command=command, pidfile=pidfile,
                                      masks=masked(hidden or [], packages, host_system=False))
            env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/root"),
                   **{k: v for k, v in os.environ.items() if k.startswith(("DOCKER_", "CONTAINER", "XDG_RUNTIME"))}}
            container.register(runtime, self.container)  # the reaper removes it if agentsynth dies
        else:
            argv, env = command, variables
        if self.container is not None:
            global _starting
            with _lock:
                _starting += 1
        try:
            self._start(argv, env, world, status_r, status_w, runtime, pidfile)
        finally:
            if self.container is not None:
                _done_starting()
        self._buffer = b""
        self.killed = False

    def _start(self, argv: list[str], env: dict[str, str], world: Path, status_r: int | None, status_w: int | None,
               runtime: Any, pidfile: str | None) -> None:
        """Start the process; register its pid namespace (bwrap's status fd, a container's init)."""
        try:
            # a container runtime's monitor keeps the client's cwd and writes there (conmon: an
            # 'oom' file): never in the world
            cwd = self._piddir if self.container is not None else str(world)
            self.proc = _popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                               cwd=cwd, env=env, start_new_session=True,
                               pass_fds=(status_w,) if status_w else ())
            with _lock:  # registered before its sandbox can have children: see leaked_processes
                _roots.add(self.proc.pid)
        except OSError as exc:
            raise SandboxError(f"agentsynth-python: cannot start the sandbox: {exc}") from exc
        finally:
            if status_w is not None:
                os.close(status_w)
        if status_r is not None or self.container is not None:
            if status_r is not None:
                self.namespace = self._read_namespace(status_r)
            else:
                from . import container

                init = container.init_pid(runtime, str(self.container), pidfile, self.proc, time.monotonic() + 120)
                self.namespace = _pid_ns(init) if init else None
                self._init = (init, _start_time(init)) if init and self.namespace else None
                self._oom_file = container.oom_file(init) if init else None
            if self.namespace is not None:
                with _lock:
                    _live.add(self.namespace)
                    _live_owner[self.namespace] = id(self)
                    _closed.discard(self.namespace)

    def _read_namespace(self, fd: int) -> int | None:
        """bwrap's first status document names the sandbox's pid namespace."""
        data = b""
        self._status = os.fdopen(fd, "rb", 0)  # kept open: bwrap writes its exit status here at the end
        sel = selectors.DefaultSelector()
        sel.register(self._status, selectors.EVENT_READ)
        deadline = time.monotonic() + 60
        while b"}" not in data and time.monotonic() < deadline:
            if not sel.select(timeout=1):
                if self.proc.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
        sel.close()
        try:
            return int(json.loads(data[: data.index(b"}") + 1])["pid-namespace"])
        except (ValueError, KeyError, json.JSONDecodeError):
            return None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return not self.killed and self.proc.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass

    def read_line(self, deadline: float, max_bytes: int, tick: Callable[[], str | None] | None = None,
                  poll: float = 0.25) -> tuple[bytes | None, str]:
        """One line from the process before ``deadline``: (line, '') or (None, why not).
        ``tick`` runs between waits (the world-size watchdog) and may return a reason to stop."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None, "timeout"
                if sel.select(timeout=min(poll, left)):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        return None, "eof"
                    self._buffer += chunk
                    if len(self._buffer) > max_bytes:
                        return None, "oversized"
                if tick is not None:
                    why = tick()
                    if why:
                        return None, why
        finally:
            sel.close()
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line, ""

    def read_all(self, deadline: float, max_bytes: int) -> tuple[bytes, str]:
        """Everything the process writes on stdout until it exits (capped), or why it stopped."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        data = b""
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return data, "timeout"
                if sel.select(timeout=min(1.0, left)):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        return data, ""
                    if len(data) < max_bytes:
                        data += chunk[: max_bytes - len(data)]
        finally:
            sel.close()

    def stderr_text(self, limit: int = 2000) -> str:
        self._stderr.seek(0)
        return self._stderr.read(limit).decode("utf-8", "replace").strip()

    def terminate(self) -> None:
        """Kill every process of the sandbox, from another thread (the owner then sees EOF)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        if self.container is None:
            if self._owns_namespace():
                reap(self.namespace)
        elif self.namespace is None:
            self._remove_container()
        else:
            self._reap_container()

    def _reap_container(self) -> None:
        """SIGKILL to the container's init (the kernel then kills its whole pid namespace), and
        anything of its uid left there. Once: afterwards the namespace id may be another's."""
        with _lock:
            if self._reaped or self.namespace is None or self._init is None:
                return
            self._reaped = True
        pid, start = self._init
        if _start_time(pid) == start and _pid_ns(pid) == self.namespace:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            reap(self.namespace, uid=_owner(pid) if self.uid is None else self.uid)

    def _remove_container(self) -> bool:
        """``rm -f`` the container, retried: it can lose a race with the runtime's own cleanup of
        a container that is stopping. Whether it is gone."""
        from . import container

        argv = container.remove_argv(self.runtime, self.runtime.kind, self.runtime.path, [str(self.container)])
        for attempt in range(6):
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
            if done.returncode == 0 or "no such container" in (done.stderr + done.stdout).lower():
                return True
            time.sleep(0.1 * 2 ** attempt)
        return False

    def socket_bytes(self, pids: list[int]) -> int:
        """Bytes queued in the socket buffers of the sandbox's network namespace (see sockets.py;
        0 without root). The netlink socket is made once, from one of the sandbox's processes."""
        from . import sockets

        if self.diag is None and pids:
            self.diag = sockets.diag_socket(pids[-1])
        if self.diag is None:
            return 0
        try:
            return sockets.socket_memory(self.diag)
        except OSError:
            return 0

    def kill(self) -> None:
        """Kill the whole sandbox: bwrap's group, then anything left in its pid namespace."""
        self.killed = True
        if self.diag is not None:
            self.diag.close()
        if self.container is not None:
            self._kill_container()
        _kill_group(self.proc)
        if self.container is None and self._owns_namespace():
            reap(self.namespace)
        if self.isolation == "none":
            _kill_uid_group(self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._stderr.close()
        if self._status is not None:
            self._status.close()
        if self.namespace is not None:
            with _lock:
                if _live_owner.get(self.namespace) == id(self):
                    del _live_owner[self.namespace]
                    _live.discard(self.namespace)
                    _closed.add(self.namespace)
        with _lock:
            _roots.discard(self.proc.pid)

    def _owns_namespace(self) -> bool:
        with _lock:
            return self.namespace is not None and _live_owner.get(self.namespace) == id(self)

    def _kill_container(self) -> None:
        """Every process of the container dead (SIGKILL to its pid namespace), the container removed."""
        from . import container

        died = self.proc.poll() is not None
        self._reap_container()  # init and all: the kernel empties the namespace
        if died and self.proc.returncode == 128 + signal.SIGKILL:
            self.oom = container.oom_killed(self.runtime, str(self.container))
        # synchronous: removing off the reset path (a background thread) saved ~0.4 s per reset but
        # left containers behind under load in the exploit kit (not understood: that code is gone)
        self._remove_and_forget()
        shutil.rmtree(self._piddir, ignore_errors=True)
        with _lock:
            _closed_containers[str(self.container)] = self.runtime
            while len(_closed_containers) > 4096:  # bounded over a long run: the oldest were checked by then
                del _closed_containers[next(iter(_closed_containers))]


    def oom_kills(self) -> int:
        """Processes of this container the kernel OOM-killed (its memory cgroup: all together)."""
        from . import container

        return container.oom_kills(self._oom_file) if self.container is not None else 0

    def _remove_and_forget(self) -> None:
        from . import container

        try:
            if not self._remove_container():
                return  # still registered: the reaper removes it at exit
        except (OSError, subprocess.TimeoutExpired):
            return
        container.unregister(self.runtime, str(self.container))


def _done_starting() -> None:
    global _starting
    with _starting_done:
        _starting -= 1
        _starting_done.notify_all()


def _kill_uid_group(pgid: int) -> None:
    """isolation: none — the process group is all we can kill (a setsid daemon escapes: trusted code only)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def chown_tree(path: Path, uid: int | None) -> None:
    """Give the sandbox uid the world directory (root only; the host keeps reading it as root)."""
    if uid is None:
        return
    os.chown(path, uid, uid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)


def owner_tag() -> str:
    """``PID.START`` of this process: in the name of every directory it makes in the temporary
    directory, so a later process can tell that its owner is gone (:func:`stale_dirs`)."""
    return f"{os.getpid()}.{_start_time(os.getpid())}"


_STALE = re.compile(r"agentsynth-python-(?:pid-)?(\d+)\.(\d+)-")


def stale_dirs(where: str | None = None) -> list[str]:
    """Worlds (and container pid directories) whose agentsynth process is gone: one killed by
    SIGKILL (a trainer's worker, the OOM killer) closes nothing, and each world it had open held up
    to ``max_world_bytes`` of the host's disk for good. Only plain directories of this user."""
    where = where or tempfile.gettempdir()
    found: list[str] = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return found
    for entry in entries:
        match = _STALE.match(entry.name)
        if match is None:
            continue
        pid, start = int(match.group(1)), match.group(2)
        if pid == os.getpid() or _start_time(pid) == start:
            continue  # its owner is alive
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():  # never a link someone else planted
            found.append(entry.path)
    return found


def register_world(path: Path) -> None:
    with _lock:
        _worlds.add(str(path))


def forget_world(path: Path) -> None:
    with _lock:
        _worlds.discard(str(path))
        _closed_worlds.add(str(path))


def leaked_containers() -> list[str]:
    """Containers of killed sandboxes that still exist (there must be none)."""
    from . import container

    with _lock:
        closed = dict(_closed_containers)
    left: list[str] = []
    for rt in {id(r): r for r in closed.values()}.values():
        existing = set(container.mine(rt))
        left += sorted(n for n, r in closed.items() if r is rt and n in existing)
    return left


def left_worlds() -> list[str]:
    """World directories of closed environments that still exist (there must be none)."""
    with _lock:
        closed = sorted(_closed_worlds)
    return [p for p in closed if os.path.lexists(p)]
