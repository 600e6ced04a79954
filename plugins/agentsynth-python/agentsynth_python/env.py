"""The ``python`` environment: a fresh sandboxed Python process per episode over a seeded world dir.

Tools: ``python_exec`` (code in one persistent interpreter, like a notebook: the value of a last
expression is shown) and ``shell`` (``/bin/sh -c``, same sandbox; off with ``shell: false``). The
observation is the real stdout and stderr (each capped), the traceback of an exception, and the
files the call created, changed or deleted. A call that runs past ``wall_seconds``, or a process
killed by a limit, ends with the whole sandbox killed and a fresh interpreter on the next call
(variables are lost, files are kept). A world directory that grows past ``max_world_bytes`` or
``max_files`` stops the world: every later call and every checker fails.

Checkers read the end state through :meth:`PythonEnvironment.world_for_checks` (the agent's
sandbox is killed first, so nothing changes the files while they are read) and
:meth:`PythonEnvironment.run_check` (a FRESH sandbox over the world, read-only; never the agent's
interpreter).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import attrs

from agentsynth_kernel import Bounds, InvalidValue, Observation, ToolCall, ToolSpec

from .container import ContainerSpec, to_spec
from .files import describe_changes, scan, seed_world
from .sandbox import (
    ISOLATIONS,
    Limits,
    Process,
    SandboxError,
    chown_tree,
    claim_uid,
    cpu_seconds_of,
    death_reason,
    forget_world,
    memory_of,
    owner_tag,
    package_paths,
    processes_in,
    register_world,
    release_uid,
    resolve_isolation,
    stale_dirs,
    tmp_entries,
    unlinked_files,
)

MB = 2**20


def _isolation(instance: Any, attribute: Any, value: str) -> None:
    if value not in ISOLATIONS:
        raise InvalidValue(f"isolation: expected one of {', '.join(ISOLATIONS)}, got {value!r}")


def _container(value: Any) -> ContainerSpec:
    try:
        return to_spec(value)
    except (TypeError, ValueError) as exc:
        raise InvalidValue(str(exc)) from None


@attrs.frozen
class PythonEnvSpec:
    """Parameters of ``environment: {type: python, ...}``.

    ``files``: a directory (relative to the pack) copied into each episode's world. ``packages``:
    top-level modules of the HOST environment made importable in the sandbox (read-only).
    ``isolation``: ``auto``/``bwrap`` need bubblewrap and fail with the reason when it does not
    work; ``container`` runs each sandboxed process in a Podman / Docker container (``container:``
    says which runtime and image; a missing runtime or image is an error, never a fallback);
    ``none`` runs the code as a plain subprocess with the same rlimits but no namespaces
    (trusted code only). Limits hold for every process of the sandbox; ``wall_seconds`` per call.
    """

    files: str | None = None
    packages: list[str] = attrs.field(factory=list)
    isolation: str = attrs.field(default="auto", validator=_isolation)
    container: ContainerSpec = attrs.field(factory=ContainerSpec, converter=_container)
    shell: bool = True
    intro: str = ""
    cpu_seconds: Annotated[int, Bounds(low=1, high=3600)] = 30
    wall_seconds: Annotated[float, Bounds(low=0.1, high=3600)] = 30.0
    memory_bytes: Annotated[int, Bounds(low=64 * MB)] = 1024 * MB
    max_processes: Annotated[int, Bounds(low=4, high=4096)] = 64
    max_open_files: Annotated[int, Bounds(low=16, high=65536)] = 256
    max_file_bytes: Annotated[int, Bounds(low=1024)] = 32 * MB
    max_world_bytes: Annotated[int, Bounds(low=1024)] = 64 * MB
    max_files: Annotated[int, Bounds(low=1, high=1_000_000)] = 2000
    tmp_bytes: Annotated[int, Bounds(low=MB)] = 64 * MB
    output_bytes: Annotated[int, Bounds(low=100, high=1_000_000)] = 16_000
    check_seconds: Annotated[float, Bounds(low=0.1, high=3600)] = 30.0
    max_check_bytes: Annotated[int, Bounds(low=1024)] = 8 * MB
    start_seconds: Annotated[float, Bounds(low=1, high=600)] = 60.0

    @property
    def limits(self) -> Limits:
        return Limits(cpu_seconds=self.cpu_seconds, wall_seconds=self.wall_seconds, memory_bytes=self.memory_bytes,
                      max_processes=self.max_processes, max_open_files=self.max_open_files,
                      max_file_bytes=self.max_file_bytes, tmp_bytes=self.tmp_bytes, output_bytes=self.output_bytes)

    @property
    def check_limits(self) -> Limits:
        return attrs.evolve(self.limits, wall_seconds=self.check_seconds)


_EXEC = {"type": "object", "properties": {"code": {"type": "string", "description": "Python source to run."}},
         "required": ["code"]}
_SHELL = {"type": "object", "properties": {"command": {"type": "string", "description": "A /bin/sh command line."}},
          "required": ["command"]}


class PythonEnvironment:
    """One episode's sandboxed Python world (see the module docstring)."""

    def __init__(self, spec: PythonEnvSpec | None = None, base_dir: Path | None = None, task: Any = None,
                 **params: Any) -> None:
        self.spec = spec if spec is not None else PythonEnvSpec(**params)
        self.base_dir = Path(base_dir) if base_dir is not None else Path.cwd()
        self.isolation = resolve_isolation(self.spec.isolation)
        self.runtime: Any = None
        if self.isolation == "container":
            from . import container

            self.runtime = container.probe(self.spec.container)  # ContainerError: the reason and the fix
            container.sweep(self.runtime)
        try:
            self.packages = package_paths(list(self.spec.packages))
        except ValueError as exc:
            raise InvalidValue(str(exc)) from None
        # never visible inside a sandbox, wherever the pack is installed (see sandbox.masked)
        self.hidden = [str(self.base_dir), str(Path(__file__).with_name("packs"))]
        self.source = (self.base_dir / self.spec.files) if self.spec.files else None
        if self.source is not None and not self.source.is_dir():
            raise InvalidValue(f"files: {self.source} is not a directory")
        self.world: Path | None = None
        self._root: Path | None = None
        self.proc: Process | None = None
        self.seed = 0
        self.uid: int | None = None
        self.violation = ""
        self.notes: list[str] = []
        self.frozen = False
        self._files: dict[str, tuple[int, int]] = {}
        self.restarts = 0
        self._killed_why = ""
        self.task_id = str(getattr(task, "id", ""))
        self._world_dev = -1  # the device of the world directory (files deleted there are its disk)
        self._held_world = 0
        self._in_call = False
        self._idle_cpu = 0.0  # CPU seconds the running sandbox used between calls
        self._calls = 0  # calls begun and ended (the guard counts a round as between calls if none did)
        self._cpu_mark: tuple[Process, int, float] | None = None  # the guard's last round: (sandbox, calls, CPU s)

    # --- Environment protocol (sync: the engine runs it on the episode's worker thread) ---------

    def reset(self, seed: int) -> Observation:
        self.close()
        self.seed, self.violation, self.notes, self.frozen, self.restarts = seed, "", [], False, 0
        self._idle_cpu, self._cpu_mark, self._in_call, self._calls = 0.0, None, False, 0
        _sweep()
        self._root = Path(tempfile.mkdtemp(prefix=f"agentsynth-python-{owner_tag()}-"))
        self.world = self._root / "world"
        self.world.mkdir()
        register_world(self._root)
        if self.source is not None:
            seed_world(self.source, self.world)
        self.uid = claim_uid(f"{self.task_id}:{seed}") if self.isolation in ("bwrap", "container") else None
        chown_tree(self.world, self.uid)
        self._world_dev = os.stat(self.world).st_dev
        self._start()
        self._files, _, _ = scan(self.world, self.spec.max_files)
        listing = "\n".join(f"  {p} ({s:,} bytes)" for p, (s, _) in sorted(self._files.items())) or "  (empty)"
        where = "/world" if self.isolation in ("bwrap", "container") else "the world directory"
        version = self.runtime.version if self.runtime is not None else f"{sys.version_info[0]}.{sys.version_info[1]}"
        text = (f"A Python {version} sandbox, working directory "
                f"{where} (no network). Files:\n{listing}")
        if self.spec.intro:
            text = f"{self.spec.intro}\n\n{text}"
        return Observation(text, data={"files": sorted(self._files)})

    def tools(self) -> list[ToolSpec]:
        tools = [ToolSpec("python_exec", "Run Python code in a persistent interpreter whose working directory is the "
                          "world. Shows stdout, stderr, the value of a last expression, errors and changed files.",
                          _EXEC)]
        if self.spec.shell:
            tools.append(ToolSpec("shell", "Run a shell command (/bin/sh -c) in the same sandbox.", _SHELL))
        return tools

    def step(self, call: ToolCall) -> Observation:
        if self.world is None:
            return Observation("error: the world is not running (reset first)", error=True)
        if call.name == "python_exec":
            key, op = "code", "exec"
        elif call.name == "shell" and self.spec.shell:
            key, op = "command", "shell"
        else:
            return Observation(f"error: unknown tool {call.name!r}", error=True)
        value = call.arguments.get(key)
        if not isinstance(value, str) or not value.strip():
            return Observation(f"error: {key!r} must be a non-empty string", error=True)
        if len(value) > 1_000_000:
            return Observation(f"error: {key!r} is {len(value):,} characters; at most 1,000,000", error=True)
        if self.violation:
            return Observation(f"error: the world was stopped: {self.violation}", error=True)
        if self.frozen:
            return Observation("error: the episode is over (the world is frozen for the checkers)", error=True)
        return self._call({"op": op, key: value})

    def close(self) -> None:
        self._stop()
        if self._root is not None:
            _remove(self._root)
            forget_world(self._root)
        self._root = self.world = None
        release_uid(self.uid)
        self.uid = None

    # --- the agent's process --------------------------------------------------------------------

    def _start(self) -> None:
        assert self.world is not None
        self.proc = Process(world=self.world, isolation=self.isolation, limits=self.spec.limits, mode="serve",
                            seed=self.seed, packages=self.packages, writable=True, uid=self.uid, runtime=self.runtime,
                            hidden=self.hidden)
        line, why = self.proc.read_line(time.monotonic() + self.spec.start_seconds, 4096)
        if line is None or not line.startswith(b'{"ready"'):
            detail = self.proc.stderr_text()
            self.proc.kill()
            self.proc = None
            raise SandboxError(f"agentsynth-python: the sandbox did not start ({why or 'no handshake'}): "
                               f"{detail or 'no error output'}")
        self._killed_why = ""
        self._held_world = 0
        self._idle_cpu = 0.0  # a fresh sandbox, a fresh budget (a restart costs a call)
        proc = self.proc
        threading.Thread(target=self._guard, args=(proc,), daemon=True, name="agentsynth-python-guard").start()

    def _guard(self, proc: Process) -> None:
        """Between and during calls: the world's quota, and the memory of all the sandbox's
        processes together (RLIMIT_AS bounds each process, not their sum). Kills the sandbox."""
        while proc.alive() and not proc.killed:
            started = time.monotonic()
            pids = processes_in({proc.namespace} if proc.namespace is not None else set())
            held = unlinked_files(pids)
            self._held_world = held.get(self._world_dev, 0)  # for the watchdog between rounds
            why = self._watchdog(held)
            if why:
                self.violation = self.violation or why
                proc.terminate()
                return
            why = self._over_memory(proc, pids, held) or self._over_idle_cpu(proc, pids)
            if why:
                self._killed_why = why
                proc.terminate()
                return
            if proc.oom_kills():  # a container's memory cgroup can be faster than this guard
                self._killed_why = ("killed: the sandbox's processes used more memory together than "
                                    f"{self.spec.memory_bytes:,} bytes; the kernel killed one (memory_bytes)")
                proc.terminate()
                return
            _pause(started)

    def _stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc = None

    def _over_idle_cpu(self, proc: Process, pids: list[int]) -> str:
        """Why the sandbox must be killed for the CPU it used between calls, or ''. A call is
        bounded by wall_seconds; between calls a background process chain that forks before its
        SIGXCPU ran forever, holding the host's cores while other episodes (and the run) starve.
        Counted by the guard alone, over its rounds that no call began or ended in (a call pays
        nothing for it)."""
        used, calls = cpu_seconds_of(pids), self._calls
        mark, self._cpu_mark = self._cpu_mark, (proc, calls, used)
        if mark is not None and mark[0] is proc and mark[1] == calls and not self._in_call:
            self._idle_cpu += max(0.0, used - mark[2])
        if self._idle_cpu > self.spec.cpu_seconds:
            return (f"killed: its processes used {self._idle_cpu:.1f} CPU seconds between calls, more than "
                    f"{self.spec.cpu_seconds} (cpu_seconds)")
        return ""

    def _call_starts(self) -> None:
        self._in_call = True
        self._calls += 1

    def _call_ends(self) -> None:
        self._calls += 1
        self._in_call = False

    def _over_memory(self, proc: Process, pids: list[int], held: dict[int, int]) -> str:
        """Why the sandbox must be killed for the memory it holds, or ''. Unlinked files off the
        world's device (memfds, deleted /tmp files: see :func:`unlinked_files`) count as memory."""
        used = memory_of(proc.namespace, pids)
        unnamed = sum(b for dev, b in held.items() if dev != self._world_dev)  # memfd, deleted /tmp files
        queued = proc.socket_bytes(pids) if pids else 0
        if used + unnamed + queued > self.spec.memory_bytes:
            parts = [f"{unnamed:,} in unlinked files or memfds"] if unnamed else []
            parts += [f"{queued:,} in socket buffers"] if queued else []
            what = f" (of which {' and '.join(parts)})" if parts else ""
            return (f"killed: the sandbox's processes used {used + unnamed + queued:,} bytes of memory together{what}, "
                    f"more than {self.spec.memory_bytes:,} (memory_bytes)")
        entries = tmp_entries(pids)
        if entries > self.spec.max_files:
            return f"killed: /tmp held {entries:,} files and directories, more than {self.spec.max_files:,} (max_files)"
        return ""

    def _watchdog(self, held: dict[int, int] | None = None) -> str | None:
        world = self.world  # read once: the guard thread may run while close() clears it
        if world is None:
            return None
        files, total, over = scan(world, self.spec.max_files)
        if over:
            return f"the world holds more than {self.spec.max_files:,} files (max_files)"
        hidden = held.get(self._world_dev, 0) if held is not None else self._held_world
        if total + hidden > self.spec.max_world_bytes:
            what = f" (of which {hidden:,} in deleted files still open)" if hidden else ""
            return (f"the world grew to {total + hidden:,} bytes{what}, more than {self.spec.max_world_bytes:,} "
                    "(max_world_bytes)")
        return None

    def _call(self, request: dict[str, Any]) -> Observation:
        notes: list[str] = []
        if self.proc is None or not self.proc.alive():
            if self.proc is not None:
                self._stop()
            if self._killed_why:  # the guard killed it between calls: say why
                notes.append(f"(the sandbox was {self._killed_why.removeprefix('killed: ')} and was killed)")
            self._start()
            self.restarts += 1
            notes.append("(a fresh Python process was started: variables of earlier calls are gone)")
        assert self.proc is not None
        limits = self.spec.limits
        self._call_starts()
        try:
            self.proc.send(request)
            line, why = self.proc.read_line(time.monotonic() + limits.wall_seconds, 4 * limits.output_bytes + 200_000,
                                            tick=self._watchdog)
        except (BrokenPipeError, OSError):
            line, why = None, "eof"
        finally:
            self._call_ends()
        reply: dict[str, Any] | None = None
        if line is not None:
            try:
                reply = _reply(json.loads(line))
            except (ValueError, RecursionError):
                reply = None
        if reply is None:
            return self._lost(why or "garbled", notes)
        return self._render(reply, notes)

    def _lost(self, why: str, notes: list[str]) -> Observation:
        """The call did not answer: kill the sandbox and say why."""
        assert self.proc is not None
        proc = self.proc
        if why == "eof":
            try:
                proc.proc.wait(timeout=10)
            except Exception:
                pass
        code = proc.proc.poll()
        self._stop()
        if self.violation:
            why = self.violation
        if why == "timeout":
            text = (f"error: the call ran past its wall-time limit of {self.spec.wall_seconds:g} s; every process of "
                    "the sandbox was killed")
        elif why == "eof":
            oom = (f"killed: out of memory (the container's memory limit of {self.spec.memory_bytes:,} bytes, "
                   "memory_bytes)") if proc.oom else ""
            text = f"error: the Python process ended: {self._killed_why or oom or death_reason(code, self.spec.limits)}"
        elif why == "oversized" or why == "garbled":
            text = "error: the Python process wrote garbage to its control channel; it was killed"
        else:  # the watchdog
            self.violation = why
            text = f"error: the world was stopped: {why}"
        if not self.violation:
            text += ". The next call starts a fresh interpreter (files in the world are kept)."
        files = self._changed()
        if files:
            text += "\nFiles changed: " + ", ".join(files)
        return Observation("\n".join([*notes, text]), error=True, data={"killed": why, "files": files})

    def _changed(self) -> list[str]:
        assert self.world is not None
        files, total, over = scan(self.world, self.spec.max_files)
        if (over or total > self.spec.max_world_bytes) and not self.violation:
            self.violation = self._watchdog() or "the world is over its limits"
        changes = describe_changes(self._files, files)
        self._files = files
        return changes

    def _render(self, reply: dict[str, Any], notes: list[str]) -> Observation:
        parts = list(notes)
        for stream in ("stdout", "stderr"):
            text, size = str(reply.get(stream) or ""), int(reply.get(f"{stream}_bytes") or 0)
            if size:
                cut = f"\n[... {size - len(text.encode()):,} more bytes not shown]" if size > len(text.encode()) else ""
                parts.append(f"[{stream}]\n{text.rstrip(chr(10))}{cut}")
        if reply.get("status"):
            parts.append(f"[{reply['status']}]")
        error = str(reply.get("error") or "")
        if error:
            parts.append(error.rstrip("\n"))
        if reply.get("value") is not None:
            parts.append(str(reply["value"]))
        files = self._changed()
        if files:
            parts.append("Files changed: " + ", ".join(files))
        if self.violation:
            parts.append(f"error: the world was stopped: {self.violation}")
            self._stop()
        failed = bool(error) or bool(self.violation) or (reply.get("status") not in (None, "exit status 0"))
        text = "\n".join(parts) or "(no output)"
        return Observation(text, error=failed, data={"files": files, "status": reply.get("status")})

    # --- what checkers use ----------------------------------------------------------------------

    def world_for_checks(self) -> Path:
        """The world directory with every process of the agent's sandbox dead (frozen)."""
        if self.world is None:
            raise RuntimeError("the python world is closed")
        if not self.frozen:
            self._stop()
            self.frozen = True
            self._changed()
        return self.world

    def run_check(self, mode: str, *, request: dict[str, Any] | None = None, argv: list[str] | None = None,
                  check_files: list[tuple[str, str]] | None = None) -> tuple[bytes, str, int | None]:
        """Run a checker's process in a FRESH sandbox over the frozen world (read-only):
        (stdout bytes, why it stopped early or '', exit code)."""
        world = self.world_for_checks()
        limits = self.spec.check_limits
        proc = Process(world=world, isolation=self.isolation, limits=limits, mode=mode, seed=self.seed,
                       packages=self.packages, writable=False, check_files=check_files, uid=self.uid,
                       extra={"argv": argv} if argv is not None else None, runtime=self.runtime,
                       hidden=self.hidden)
        guard = threading.Thread(target=self._memory_guard, args=(proc,), daemon=True, name="agentsynth-python-guard")
        guard.start()
        try:
            if request is not None:
                proc.send(request)
            proc.close_stdin()
            data, why = proc.read_all(time.monotonic() + limits.wall_seconds, self.spec.max_check_bytes)
            code = None
            if not why:
                try:
                    code = proc.proc.wait(timeout=max(1.0, limits.wall_seconds))
                except Exception:
                    why = "timeout"
            return data, why, code
        finally:
            proc.kill()

    def _memory_guard(self, proc: Process) -> None:
        """A checker's processes run the agent's code when they import it: bound their sum too."""
        while proc.alive() and not proc.killed:
            started = time.monotonic()
            pids = processes_in({proc.namespace} if proc.namespace is not None else set())
            if self._over_memory(proc, pids, unlinked_files(pids)) or proc.oom_kills():
                proc.terminate()
                return
            _pause(started)

    def evaluate(self, expr: str, *, setup: str = "", world_on_path: bool = False,
                 check_files: list[tuple[str, str]] | None = None) -> Any:
        """The JSON value of ``expr`` computed in a fresh sandbox; raises CheckError with why not."""
        nonce = secrets.token_hex(16)
        data, why, code = self.run_check("eval", request={"nonce": nonce, "expr": expr, "setup": setup,
                                                          "world_on_path": world_on_path}, check_files=check_files)
        if why:
            raise CheckError(f"the checker process stopped: {why} (check_seconds={self.spec.check_seconds:g})")
        lines = data.splitlines()
        if len(lines) != 1 or not lines[0].startswith(nonce.encode() + b" "):
            raise CheckError("the checker's result channel held something other than the checker's one result "
                             f"({len(lines)} line(s)); exit {code}")
        try:
            result = json.loads(lines[0][len(nonce) + 1:])
        except (ValueError, RecursionError):  # RecursionError: nested past what the host parses
            raise CheckError("the checker's result is not JSON the host can read") from None
        # the runner always writes {"value": ...} or {"error": "..."}; anything else was written by the
        # agent's code (world_on_path: it runs in the checker and can find the nonce)
        if not isinstance(result, dict) or len(result) != 1 or not ("value" in result or "error" in result):
            raise CheckError("the checker's result is not the runner's {value} / {error} document")
        if "error" in result:
            raise CheckError(str(result["error"])[:2000])
        return result["value"]


# The runner's reply to a call. The agent's code runs in the runner's process and can write its own
# "reply" on the channel: only this shape is rendered; anything else is a garbled channel (the
# sandbox is killed), never an exception in step() that would end the episode unscored.
_REPLY_TYPES: dict[str, tuple[type, ...]] = {
    "stdout": (str,), "stderr": (str,), "stdout_bytes": (int,), "stderr_bytes": (int,), "value": (str, type(None)),
    "error": (str,), "status": (str, type(None)),
}


def _reply(doc: Any) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        return None
    if set(doc) == {"error"} and isinstance(doc["error"], str):  # the runner could not capture output
        return doc
    if set(doc) != set(_REPLY_TYPES):
        return None
    for key, types in _REPLY_TYPES.items():
        value = doc[key]
        if not isinstance(value, types) or isinstance(value, bool):
            return None
        if isinstance(value, int) and not 0 <= value < 2**62:
            return None
    return doc


def _pause(started: float) -> None:
    """Between two guard rounds: 0.25 s, or twice what the round took. A sandbox makes its round
    dear (64 processes with 256 descriptors each: ~16,000 readlinks), and the guard holds the GIL
    of the process every episode runs in: it spends at most a third of a core on one sandbox."""
    time.sleep(max(0.25, 2 * (time.monotonic() - started)))


_last_sweep = 0.0


def _sweep() -> None:
    """Remove the worlds of agentsynth processes that died without closing them (at most once a
    minute per process: a temporary directory can be large)."""
    global _last_sweep
    now = time.monotonic()
    if _last_sweep and now - _last_sweep < 60:
        return
    _last_sweep = now
    for path in stale_dirs():
        with contextlib.suppress(OSError):
            _remove(Path(path))


def _remove(root: Path) -> None:
    """Delete a world, also one the agent made hard to delete: mode-000 directories, and nesting
    deeper than the recursion limit (``shutil.rmtree`` recursed: 1,500 nested directories, well
    inside ``max_files``, raised RecursionError in close() and left the world on the host's disk
    for good, episode after episode). Iterative, through one directory descriptor at a time (paths
    could pass PATH_MAX; a descriptor per level could pass RLIMIT_NOFILE); links are unlinked,
    never followed. Every process of the world is dead by now: nothing moves while it runs."""
    if not os.path.lexists(root):
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    _unlock_dir(str(root))
    fd = os.open(root, flags)
    names: list[str] = []  # the path from root to where fd is
    try:
        while True:
            with os.scandir(fd) as it:
                entries = list(it)
            sub = None
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    sub = sub or entry.name
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.name, dir_fd=fd)
            if sub is not None:
                _unlock_dir(sub, fd)
                inner = os.open(sub, flags, dir_fd=fd)
                os.close(fd)
                fd, names = inner, [*names, sub]
                continue
            if not names:
                break
            outer = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd, name, names = outer, names[-1], names[:-1]
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(root)


def _unlock_dir(name: str, dir_fd: int | None = None) -> None:
    """Let the host list and empty a directory the agent made mode 000 (matters when not root),
    through an O_PATH descriptor: never a link put where the directory was."""
    with contextlib.suppress(OSError):
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{fd}", 0o700)
        finally:
            os.close(fd)


class CheckError(RuntimeError):
    """A checker's sandboxed computation failed (the check fails with this reason)."""
