"""The container backend of the python world: one Podman / Docker container per sandboxed process.

Same contract as the bubblewrap backend (``sandbox.py``): the same runner at
``/.agentsynth/runner.py``, the world bind-mounted at ``/world`` (read-write for the agent,
read-only for checkers), hidden checker files at ``/check``, host packages at
``/.agentsynth/site``, a private ``/tmp`` tmpfs of ``tmp_bytes``. The root file system is the
image's (a minimal Debian with ``python3``, built by ``agentsynth python build-image``) and
read-only. ``--network none`` (a loopback of its own), ``--cap-drop ALL``, ``no-new-privileges``,
the runtime's default seccomp profile, a memory cgroup of ``memory_bytes`` (no swap), a pids
cgroup of ``max_processes``, ``--cpus``, and the runner's rlimits inside. ``--init`` makes a
tiny init pid 1, so the runner can be killed like any process and orphans are reaped.

Killing: SIGKILL to the container's init (its host pid, from ``--pidfile`` / ``inspect``) takes
every process of its pid namespace with it; then ``rm -f`` drops the container. A container's
processes are children of the runtime's monitor (conmon / containerd), not of agentsynth, so a
killed agentsynth would leave them running: a *reaper* process in a session of its own holds a
pipe from agentsynth and removes every container still registered when that pipe closes (any
death of agentsynth, SIGKILL included). Container names carry the owner's pid and start time, so
a later run also sweeps containers of an owner that is gone (a reaper that was killed too).
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

RUNTIMES = ("auto", "podman", "docker")
OCI_RUNTIMES = ("auto", "default", "runc", "crun")
DEFAULT_IMAGE = "agentsynth-python:bookworm"
NAME_PREFIX = "agentsynth-py-"
BUILD_HINT = "agentsynth python build-image"


class ContainerError(RuntimeError):
    """No working container runtime / image: an infrastructure failure with its reason."""

    agentsynth_error_kind = "environment"


def _choice(options: tuple[str, ...]) -> Any:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value not in options:
            raise ValueError(f"container.{attribute.name}: expected one of {', '.join(options)}, got {value!r}")

    return check


def _positive(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and not (0 < value <= 1024):
        raise ValueError(f"container.{attribute.name}: expected a number of CPUs in (0, 1024], got {value!r}")


@attrs.frozen
class ContainerSpec:
    """``container:`` of a python world with ``isolation: container``.

    ``runtime``: ``podman`` / ``docker``, or ``auto`` (podman, then docker, on PATH). ``image``: a
    local image (``agentsynth python build-image`` makes the default); or ``rootfs``: a directory
    holding a root file system (podman only; ``build-image --rootfs DIR`` makes one).
    ``oci_runtime`` (podman): ``auto`` tries the configured one, then ``runc`` (crun refuses
    hybrid cgroup v1/v2 hosts). ``python``: the interpreter inside. ``cpus``: the CPU quota.
    """

    runtime: str = attrs.field(default="auto", validator=_choice(RUNTIMES))
    image: str = DEFAULT_IMAGE
    rootfs: str | None = None
    oci_runtime: str = attrs.field(default="auto", validator=_choice(OCI_RUNTIMES))
    python: str = "python3"
    cpus: float | None = attrs.field(default=1.0, validator=_positive)


def to_spec(value: Any) -> ContainerSpec:
    """A ``container:`` mapping (or a ContainerSpec) as a ContainerSpec; ValueError naming the key."""
    if isinstance(value, ContainerSpec):
        return value
    if value is None:
        return ContainerSpec()
    if not isinstance(value, dict):
        raise ValueError(f"container: expected a mapping, got {type(value).__name__}")
    known = {f.name for f in attrs.fields(ContainerSpec)}
    extra = sorted(set(value) - known)
    if extra:
        raise ValueError(f"container.{extra[0]}: unknown key (expected {', '.join(sorted(known))})")
    return ContainerSpec(**value)


@attrs.frozen
class Runtime:
    """A container runtime that was probed and works: what every container command line needs."""

    kind: str  # podman / docker
    path: str
    image: str | None
    rootfs: str | None
    oci_runtime: str | None  # podman --runtime, or None for the configured one
    python: str
    cpus: float | None
    version: str = "3"  # of the Python inside, as "3.11"

    def base(self) -> list[str]:
        return [self.path]


# --- command lines ----------------------------------------------------------------------------


def run_argv(rt: Runtime, *, name: str, world: Path, writable: bool, limits: Any, uid: int | None,
             packages: Sequence[tuple[str, str]], runner: Path, check_files: Sequence[tuple[str, str]] | None,
             env: dict[str, str], command: Sequence[str], pidfile: str | None = None,
             masks: Sequence[str] = ()) -> list[str]:
    """The ``podman run`` / ``docker run`` command line of one sandboxed process."""
    argv = [rt.path]
    if rt.kind == "podman" and rt.oci_runtime:
        argv += ["--runtime", rt.oci_runtime]
    argv += ["run", "-i", "--name", name, "--label", "agentsynth-python=1", "--init", "--log-driver", "none",
             "--network", "none", "--hostname", "sandbox", "--read-only", "--cap-drop", "ALL",
             "--security-opt", "no-new-privileges", "--ipc", "private",
             "--memory", str(limits.memory_bytes), "--memory-swap", str(limits.memory_bytes),
             "--pids-limit", str(limits.max_processes + 4),  # + init and the runner's own
             "--ulimit", f"nofile={limits.max_open_files}:{limits.max_open_files}",
             "--ulimit", f"nproc={limits.max_processes}:{limits.max_processes}",
             "--ulimit", f"fsize={limits.max_file_bytes}:{limits.max_file_bytes}",
             "--ulimit", "core=0:0",
             "--tmpfs", f"/tmp:rw,size={limits.tmp_bytes},mode=1777,nosuid,nodev",
             "--shm-size", str(min(limits.tmp_bytes, 64 * 2**20)),
             "--workdir", "/world"]
    if rt.kind == "podman":
        argv += ["--read-only-tmpfs=false", "--pull", "never"]
        if pidfile:
            argv += ["--pidfile", pidfile]
    else:
        argv += ["--pull", "never"]
    if rt.cpus:
        argv += ["--cpus", f"{rt.cpus:g}"]
    if uid is not None:
        argv += ["--user", f"{uid}:{uid}"]
    elif rt.kind == "podman" and os.geteuid() != 0:
        argv += ["--userns", "keep-id"]  # rootless: the process is the invoking user, as are the world's files
    else:
        argv += ["--user", f"{os.getuid()}:{os.getgid()}"]
    argv += ["-v", f"{world}:/world:{'rw' if writable else 'ro'}", "-v", f"{runner}:/.agentsynth/runner.py:ro"]
    for host_path, inside in packages:
        argv += ["-v", f"{host_path}:/.agentsynth/site/{inside}:ro"]
    for host_path, inside in check_files or []:
        argv += ["-v", f"{host_path}:/check/{inside}:ro"]
    for inside in masks:  # the pack inside a bound package: covered (see sandbox.masked)
        # empty: podman would copy the directory's files up into the tmpfs (docker does not)
        argv += ["--tmpfs", f"{inside}:ro,size=4k,mode=0555{',notmpcopyup' if rt.kind == 'podman' else ''}"]
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    if rt.rootfs:
        argv += ["--rootfs", rt.rootfs]  # must be last: what follows is the command
    else:
        argv += [str(rt.image)]
    return [*argv, *command]


def remove_argv(rt: Runtime | None, kind: str, path: str, names: Sequence[str]) -> list[str]:
    """Remove containers at once (SIGKILL, no grace period)."""
    argv = [path]
    if rt is not None and rt.kind == "podman" and rt.oci_runtime:
        argv += ["--runtime", rt.oci_runtime]
    argv += ["rm", "-f"]
    if kind == "podman":
        argv += ["-t", "0", "--ignore"]  # one already gone must not keep the others
    return [*argv, *names]


# --- probing ----------------------------------------------------------------------------------


def _run(argv: list[str], timeout: float = 60) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        return 127, str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return done.returncode, (done.stderr.strip() or done.stdout.strip())[-600:]


def find_runtime(name: str) -> tuple[str, str]:
    """(kind, path) of the runtime ``name`` (or the first of podman / docker for ``auto``)."""
    kinds = ("podman", "docker") if name == "auto" else (name,)
    for kind in kinds:
        path = shutil.which(kind)
        if path:
            return kind, path
    wanted = "neither podman nor docker is" if name == "auto" else f"{name} is not"
    raise ContainerError(f"agentsynth-python: no container runtime: {wanted} on PATH (Debian: apt-get install "
                         "podman runc; or Docker Engine with a running daemon); or use 'isolation: bwrap'")


@functools.cache
def probe(spec: ContainerSpec) -> Runtime:
    """A Runtime for ``spec`` that starts containers here, checked once per process (a real
    ``run ... python3 -c`` with the backend's flags), or ContainerError with the reason and fix."""
    kind, path = find_runtime(spec.runtime)
    code, out = _run([path, "version", "--format", "{{.Server.Version}}" if kind == "docker" else "{{.Version}}"])
    if code != 0:
        raise ContainerError(f"agentsynth-python: {kind} does not answer ({out or code}): "
                             + ("the Docker daemon is not reachable (is dockerd running, DOCKER_HOST right?)"
                                if kind == "docker" else "podman is not usable here"))
    if spec.rootfs:
        if kind != "podman":
            raise ContainerError(f"container.rootfs: only podman runs a container from a directory; {kind} needs "
                                 f"an image ({BUILD_HINT} --runtime {kind})")
        root = Path(spec.rootfs)
        if not (root / "usr").is_dir():
            raise ContainerError(f"container.rootfs: {root} is not a root file system (no usr/); build one with "
                                 f"'{BUILD_HINT} --rootfs {root}'")
    else:
        exists = [path, "image", "inspect", spec.image] if kind == "docker" else [path, "image", "exists", spec.image]
        code, out = _run(exists)
        if code != 0:
            raise ContainerError(f"agentsynth-python: container image {spec.image!r} not found in {kind} ({out or 'no such image'}); "
                                 f"build it with '{BUILD_HINT} --runtime {kind} --tag {spec.image}'")
    options: list[str | None] = [None]
    if kind == "podman":
        if spec.oci_runtime in ("runc", "crun"):
            options = [spec.oci_runtime]
        elif spec.oci_runtime == "auto" and shutil.which("runc"):
            options = [None, "runc"]
    problems = []
    for oci in options:
        rt = Runtime(kind, path, None if spec.rootfs else spec.image, spec.rootfs, oci, spec.python, spec.cpus)
        problem, version = _smoke(rt)
        if not problem:
            return attrs.evolve(rt, version=version)
        problems.append(f"{'--runtime ' + oci if oci else 'the default OCI runtime'}: {problem}")
    hint = ""
    if any("hybrid mode" in p for p in problems):
        hint = " (crun refuses hybrid cgroup v1/v2 hosts: apt-get install runc)"
    raise ContainerError(f"agentsynth-python: {kind} cannot run the sandbox container: {'; '.join(problems)}{hint}")


def _smoke(rt: Runtime) -> tuple[str, str]:
    """('', Python version) when a container with the backend's flags starts and runs Python,
    else (why not, '')."""
    from .sandbox import RUNNER, Limits

    world = Path(tempfile.mkdtemp(prefix="agentsynth-python-probe-"))
    name = container_name()
    try:
        os.chmod(world, 0o755)
        argv = run_argv(rt, name=name, world=world, writable=False, limits=Limits(), uid=None, packages=[],
                        runner=RUNNER, check_files=None, env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
                        command=[rt.python, "-I", "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        code, out = _run(argv, timeout=120)
        if code != 0 or not out.strip():
            return (out or f"exit status {code}"), ""
        return "", out.strip().splitlines()[-1]
    finally:
        _run(remove_argv(rt, rt.kind, rt.path, [name]))
        shutil.rmtree(world, ignore_errors=True)


# --- names, the reaper and the sweep ------------------------------------------------------------


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "0"


_OWNER = f"{socket.gethostname()[:20]}-{os.getpid()}-{_start_time(os.getpid())}"


def owner_tag() -> str:
    """host-pid-starttime of this process (recomputed after a fork)."""
    global _OWNER
    if f"-{os.getpid()}-" not in _OWNER:
        _OWNER = f"{socket.gethostname()[:20]}-{os.getpid()}-{_start_time(os.getpid())}"
    return _OWNER


def container_name() -> str:
    return f"{NAME_PREFIX}{owner_tag()}-{secrets.token_hex(4)}"


def _owner_alive(name: str) -> bool:
    """Whether the agentsynth process named in a container's name runs (on this host)."""
    rest = name[len(NAME_PREFIX):]
    parts = rest.rsplit("-", 3)
    if len(parts) != 4:
        return True  # not ours to judge
    host, pid, start, _ = parts
    if host != socket.gethostname()[:20]:
        return True
    return pid.isdigit() and _start_time(int(pid)) == start


REAPER = r"""
import json, signal, subprocess, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
listing, remove = json.loads(sys.argv[1]), sys.argv[2:]
live = set()
for line in sys.stdin:
    line = line.strip()
    if line.startswith('+'):
        live.add(line[1:])
    elif line.startswith('-'):
        live.discard(line[1:])
for attempt in range(20):  # rm can lose a race with the runtime's own cleanup of a stopping container
    if not live:
        break
    try:
        subprocess.run(remove + sorted(live), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=300)
        names = subprocess.run(listing, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        if names.returncode == 0:
            live &= set(names.stdout.split())
    except Exception:
        pass
    if live:
        time.sleep(min(0.25 * 2 ** attempt, 5))
"""

_reaper: dict[str, Any] = {}
_reaper_lock = threading.Lock()
_swept: set[str] = set()


def _reaper_for(rt: Runtime) -> Any:
    """The pipe to this process's reaper for ``rt`` (started at first use)."""
    key = f"{rt.path}:{rt.oci_runtime}"
    with _reaper_lock:
        entry = _reaper.get(key)
        if entry is not None and entry["pid"] == os.getpid() and entry["proc"].poll() is None:
            return entry["pipe"]
        listing = [*rt.base(), "ps", "-a", "--filter", f"name={NAME_PREFIX}", "--format", "{{.Names}}"]
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", REAPER, json.dumps(listing),
                                 *remove_argv(rt, rt.kind, rt.path, [])],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
        _reaper[key] = {"proc": proc, "pipe": proc.stdin, "pid": os.getpid()}
        return proc.stdin


def reaper_pid(rt: Runtime) -> int | None:
    entry = _reaper.get(f"{rt.path}:{rt.oci_runtime}")
    return entry["proc"].pid if entry else None


def register(rt: Runtime, name: str) -> None:
    """Before a container starts: the reaper removes it if agentsynth dies."""
    pipe = _reaper_for(rt)
    with _reaper_lock:
        pipe.write(f"+{name}\n".encode())
        pipe.flush()


def unregister(rt: Runtime, name: str) -> None:
    with _reaper_lock:
        entry = _reaper.get(f"{rt.path}:{rt.oci_runtime}")
        if entry is None or entry["proc"].poll() is not None:
            return
        try:
            entry["pipe"].write(f"-{name}\n".encode())
            entry["pipe"].flush()
        except OSError:
            pass


def our_containers(rt: Runtime) -> list[str]:
    """Names of every container (running or not) this backend made, of any owner."""
    code, out = _run([*rt.base(), "ps", "-a", "--filter", f"name={NAME_PREFIX}", "--format", "{{.Names}}"])
    if code != 0:
        return []
    return [n for n in out.split() if n.startswith(NAME_PREFIX)]


def mine(rt: Runtime) -> list[str]:
    """Containers of this process that exist (there must be none once their worlds are closed)."""
    prefix = f"{NAME_PREFIX}{owner_tag()}-"
    return [n for n in our_containers(rt) if n.startswith(prefix)]


def sweep(rt: Runtime) -> list[str]:
    """Once per process: remove containers whose owner process is gone (a run that was killed
    together with its reaper). Returns what it removed."""
    if rt.path in _swept:
        return []
    _swept.add(rt.path)
    stale = [n for n in our_containers(rt) if not _owner_alive(n)]
    if stale:
        _run(remove_argv(rt, rt.kind, rt.path, stale), timeout=300)
    return stale


# --- a running container's host pid -------------------------------------------------------------


def init_pid(rt: Runtime, name: str, pidfile: str | None, proc: subprocess.Popen[bytes], deadline: float) -> int | None:
    """The host pid of the container's init (podman's --pidfile; docker inspect), or None when the
    container's processes are not on this kernel (a remote daemon) or it ended first."""
    while time.monotonic() < deadline:
        if pidfile:
            try:
                text = Path(pidfile).read_text().strip()
                if text.isdigit():
                    return int(text)
            except OSError:
                pass
        else:
            code, out = _run([*rt.base(), "inspect", "--format", "{{.State.Pid}}", name], timeout=30)
            if code == 0 and out.strip().isdigit() and int(out.strip()) > 0:
                return int(out.strip())
        if proc.poll() is not None:
            return None
        time.sleep(0.01)
    return None


def oom_file(pid: int) -> str | None:
    """The host file that counts the OOM kills in the memory cgroup of process ``pid`` (cgroup
    v1 ``memory.oom_control`` or v2 ``memory.events``), or None."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidate = f"/sys/fs/cgroup/memory{path}/memory.oom_control"
            if os.path.exists(candidate):
                return candidate
    for line in lines:
        if line.startswith("0::"):
            candidate = f"/sys/fs/cgroup{line[3:]}/memory.events"
            if os.path.exists(candidate):
                return candidate
    return None


def oom_kills(path: str | None) -> int:
    """How many processes the kernel's OOM killer killed in that cgroup (0 when unknown)."""
    if path is None:
        return 0
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def oom_killed(rt: Runtime, name: str) -> bool:
    code, out = _run([*rt.base(), "inspect", "--format", "{{.State.OOMKilled}}", name], timeout=30)
    return code == 0 and out.strip().lower() == "true"


def kill_init(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def describe(rt: Runtime) -> str:
    what = f"rootfs {rt.rootfs}" if rt.rootfs else f"image {rt.image}"
    oci = f" --runtime {rt.oci_runtime}" if rt.oci_runtime else ""
    return f"{rt.kind}{oci}, {what}"
