"""The episode's world directory: where it lives, how big it is, how checkers read it safely.

- Temporary directories are named ``agentsynth-mcp-<pid>-*`` after the process that owns them, so
  that :func:`sweep_stale` can delete those whose process died without cleaning up (SIGKILL), and
  only those.
- :func:`usage` measures the world (bytes on disk, entries) for the quota checked after every step.
- :func:`read_world_file` opens a file for a checker without following any symlink, refuses files
  with more than one hard link and files over a size cap: what a checker reads is a regular file
  that lives in the world, not a link the agent planted to something outside it.
- :func:`redact` / :func:`unredact` replace the episode's temporary paths by ``<world>`` /
  ``<workdir>`` in what the agent sees (and back in its arguments), so trajectories are the same
  from one run to the next.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

PREFIX = "agentsynth-mcp-"
_OWNED = re.compile(r"^agentsynth-mcp-(?:log-)?(\d+)-")
_swept = False


def make_workdir() -> Path:
    """A fresh episode directory named after this process (see :func:`sweep_stale`)."""
    sweep_stale_once()
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    with contextlib.suppress(OSError, IndexError):  # a zombie is dead for our purpose
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return False
    return True


def sweep_stale(directory: str | Path | None = None) -> list[Path]:
    """Delete ``agentsynth-mcp-<pid>-*`` directories whose process is dead; returns what was removed.
    Directories of live processes (this one included) and other names are never touched."""
    root = Path(directory or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        match = _OWNED.match(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        pid = int(match.group(1))
        if pid == os.getpid() or _alive(pid):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.exists(entry.path):
            removed.append(Path(entry.path))
    return removed


def sweep_stale_once() -> None:
    """:func:`sweep_stale` on the first episode of this process."""
    global _swept
    if not _swept:
        _swept = True
        sweep_stale()


def usage(root: Path, max_entries: int) -> tuple[int, int]:
    """(bytes on disk, entries) under ``root``, not following links; stops counting past ``max_entries``."""
    total, count = 0, 0
    stack = [str(root)]
    while stack and count <= max_entries:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            count += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += max(st.st_blocks * 512, 0) if hasattr(st, "st_blocks") else st.st_size
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
    return total, count


class UnsafeFile(Exception):
    """A checker was asked to read something that is not a plain file of the world."""


def check_relative(path: str, key: str = "file") -> str:
    """A checker's path inside the world: relative, no ``..``; raises ValueError (a spec error)."""
    path = path.replace("{world}/", "").replace("<world>/", "")
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\\" in path:
        raise ValueError(f"{key}: {path!r} must be a relative path inside the world (no '..', not absolute)")
    return str(pure)


def read_world_file(world: Path, relative: str, max_bytes: int) -> bytes | None:
    """The bytes of ``world/relative``, or None when it does not exist. Raises :class:`UnsafeFile`
    for a symlink anywhere on the way, a file with several hard links, something that is not a
    regular file, or a file over ``max_bytes``."""
    parts = PurePosixPath(relative).parts
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dirfd = os.open(world, flags | os.O_DIRECTORY)
    except OSError as exc:
        raise UnsafeFile(f"the world directory cannot be opened: {exc}") from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                fd = os.open(part, flags | (os.O_NONBLOCK if last else os.O_DIRECTORY), dir_fd=dirfd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                where = "/".join(parts[: i + 1])
                if exc.errno in (getattr(os, "ELOOP", 40), getattr(os, "ENOTDIR", 20)):
                    if os.path.islink(os.path.join(world, where)):
                        raise UnsafeFile(f"{where} is a symbolic link (checkers never follow links)") from None
                raise UnsafeFile(f"{where}: {exc.strerror}") from None
            os.close(dirfd)
            dirfd = fd
        st = os.fstat(dirfd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{relative} is not a regular file")
        if st.st_nlink > 1:
            raise UnsafeFile(f"{relative} has {st.st_nlink} hard links (a link to a file elsewhere is not the world's)")
        if st.st_size > max_bytes:
            raise UnsafeFile(f"{relative} is {st.st_size} bytes, over the checkers' limit of {max_bytes}")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(dirfd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise UnsafeFile(f"{relative} grew over the checkers' limit of {max_bytes} bytes")
        return b"".join(chunks)
    finally:
        os.close(dirfd)


def redact(value: Any, paths: list[tuple[str, str]]) -> Any:
    """``value`` with every episode path replaced by its placeholder (strings inside lists and dicts too)."""
    if not paths:
        return value
    if isinstance(value, str):
        for path, placeholder in paths:
            if path in value:
                value = value.replace(path, placeholder)
        return value
    if isinstance(value, list):
        return [redact(v, paths) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v, paths) for v in value)
    if isinstance(value, dict):
        return {k: redact(v, paths) for k, v in value.items()}
    return value


def unredact(value: Any, paths: list[tuple[str, str]]) -> Any:
    """The agent's arguments with placeholders turned back into this episode's paths."""
    return redact(value, [(placeholder, path) for path, placeholder in paths])
