"""The world directory on the host: seeding it, measuring it, and reading it safely for checkers.

The host reads files the agent wrote, so every read here refuses what could redirect it: a
symlink anywhere on the path (it would be followed on the HOST, to files outside the world), a
file with several hard links, anything but a regular file (a FIFO would hang the checker), and
files over the size limit. Paths are relative to the world, without ``..``.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path


class UnsafeFile(ValueError):
    """A world file a checker must not trust (a link, not a regular file, too big, outside)."""


def check_relative(relative: str) -> list[str]:
    """The components of a world-relative path; ValueError for absolute, empty, '..' or NUL."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        raise ValueError(f"a world path must be a non-empty string, got {relative!r}")
    if relative.startswith("/"):
        raise ValueError(f"{relative!r}: a world path is relative to the world directory")
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"{relative!r}: a world path must stay inside the world directory (no '..')")
    return parts


def read_world_file(world: Path, relative: str, limit: int) -> bytes | None:
    """The bytes of ``world/relative``, or None when it does not exist. Raises UnsafeFile."""
    parts = check_relative(relative)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(world, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise UnsafeFile(f"{relative}: {part!r} is not a plain directory (a symlink?): {exc.strerror}") from None
            os.close(fd)
            fd = nxt
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeFile(f"{relative} is a symlink; checkers read only regular files the agent wrote")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{relative} is not a regular file")
        if st.st_nlink > 1:
            raise UnsafeFile(f"{relative} has {st.st_nlink} hard links; checkers read only files of the world")
        if st.st_size > limit:
            raise UnsafeFile(f"{relative} has {st.st_size:,} bytes, more than the checkers read ({limit:,})")
        file_fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
        with os.fdopen(file_fd, "rb") as f:
            again = os.fstat(f.fileno())
            if (again.st_ino, again.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(again.st_mode):
                raise UnsafeFile(f"{relative} changed while it was read")
            data = f.read(limit + 1)
        if len(data) > limit:
            raise UnsafeFile(f"{relative} grew past {limit:,} bytes while it was read")
        return data
    finally:
        os.close(fd)


def seed_world(source: Path, world: Path) -> None:
    """Copy the pack's seed files into a fresh world (symlinks in the pack are copied as links'
    targets: a pack is trusted, the copy holds no link)."""
    if not source.is_dir():
        raise ValueError(f"files: {source} is not a directory")
    shutil.copytree(source, world, dirs_exist_ok=True, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def scan(world: Path, max_entries: int) -> tuple[dict[str, tuple[int, int]], int, bool]:
    """({relative path: (size, mtime_ns)} of every regular file and link, total bytes, over):
    never follows links; stops at ``max_entries`` entries (``over`` is then True)."""
    found: dict[str, tuple[int, int]] = {}
    total, entries = 0, 0
    stack = [("", str(world))]
    while stack:
        prefix, path = stack.pop()
        try:
            it = os.scandir(path)
        except OSError:
            continue
        with it:
            for entry in it:
                entries += 1
                if entries > max_entries:
                    return found, total, True
                rel = prefix + entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append((rel + "/", entry.path))
                    total += 4096
                    continue
                total += max(st.st_size, st.st_blocks * 512)
                found[rel] = (st.st_size, st.st_mtime_ns)
    return found, total, False


def describe_changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], limit: int = 30) -> list[str]:
    """'out.json (120 bytes, new)' lines, sorted, at most ``limit`` (deterministic: no times)."""
    lines: list[str] = []
    for path in sorted(set(before) | set(after)):
        # a name is the agent's text: one with a newline or an escape sequence would write lines of
        # its own into the observation ("[stdout]\nall tests passed") for a judge or a model to read
        name = path if path.isprintable() else repr(path)
        if path not in after:
            lines.append(f"{name} (deleted)")
        elif path not in before:
            lines.append(f"{name} ({after[path][0]:,} bytes, new)")
        elif before[path] != after[path]:
            lines.append(f"{name} ({after[path][0]:,} bytes, modified)")
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more"]
    return lines
