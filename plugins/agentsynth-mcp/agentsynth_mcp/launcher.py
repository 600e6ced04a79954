"""How a server (or a setup command) is started: dies with agentsynth, cannot grow a file past the
world's quota, and, where Linux Landlock is available, cannot write outside its episode.

The launcher is a few lines of Python exec'd before the real command (``python -c LAUNCHER ...
command args``); the pid stays the same. It

- asks Linux to SIGTERM the process when agentsynth dies, even by SIGKILL (``PR_SET_PDEATHSIG``),
- sets ``RLIMIT_FSIZE`` so no single file can grow past ``max_world_bytes`` in one call (Python
  servers get ``EFBIG``; others are killed by ``SIGXFSZ``, which fails the episode),
- restricts every write (create, write, truncate, remove, link, rename) to the episode's world
  and temporary directories plus ``writable`` paths with a Landlock ruleset (reads stay free).
  Without Landlock (other kernels, other systems) the command runs unconfined.
"""

from __future__ import annotations

import os
import sys

LAUNCHER = r"""
import ctypes, os, resource, signal, sys
ppid, fsize, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
writable, argv = sys.argv[4:4 + count], sys.argv[4 + count:]
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != ppid:
    sys.exit(0)  # agentsynth is already gone
if fsize > 0:
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
if count:
    abi = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    if abi >= 1:
        files = 1 << 1 | (1 << 14 if abi >= 3 else 0)  # WRITE_FILE, TRUNCATE
        dirs = files | sum(1 << b for b in range(4, 13)) | (1 << 13 if abi >= 2 else 0)  # REMOVE_*, MAKE_*, REFER
        handled = ctypes.c_uint64(dirs)
        fd = libc.syscall(444, ctypes.byref(handled), 8, 0)
        class Beneath(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]
        for path in writable:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            rule = Beneath(dirs if os.path.isdir(path) else files, pfd)
            libc.syscall(445, fd, 1, ctypes.byref(rule), 0)
            os.close(pfd)
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        if libc.syscall(446, fd, 0) != 0:
            sys.stderr.write("agentsynth-mcp: Landlock restriction failed; running unconfined\n")
        os.close(fd)
os.execvp(argv[0], argv)
"""


def launch_argv(argv: list[str], *, max_file_bytes: int = 0, writable: list[str] | None = None) -> list[str]:
    """``argv`` wrapped by the launcher (Linux; elsewhere unchanged). ``writable`` None or empty:
    writes are not confined."""
    if not sys.platform.startswith("linux"):
        return argv
    paths = [os.path.abspath(os.path.expanduser(p)) for p in writable or []]
    return [sys.executable, "-c", LAUNCHER, str(os.getpid()), str(int(max_file_bytes)), str(len(paths)), *paths,
            *argv]
