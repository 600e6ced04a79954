"""Load user code named in specs: ``package.module:attr`` or ``path/to/file.py:attr``."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import AgentsynthError

_locks_guard = threading.Lock()
_locks: dict[str, threading.RLock] = {}  # one per file: a file that hangs at import blocks only itself
_by_path: dict[str, tuple[ModuleType, tuple[int, int]]] = {}  # path -> (module, its file's mtime and size)


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def import_file(path: Path) -> ModuleType:
    """Import a Python file as a module (cached by path and imported again when the file changes,
    so a long-lived ``agentsynth serve`` sees an edited oracle; otherwise it runs once per process).

    Thread-safe: episodes running on worker threads never see a half-executed module, and a file
    that hangs at import (an oracle stuck in a loop) holds up only the episodes that import it."""
    key = str(path)
    cached = _by_path.get(key)  # the common case: one stat, no path resolution, no hashing
    stamp = _stamp(path)
    if cached is not None and cached[1] == stamp:
        return cached[0]
    with _locks_guard:
        lock = _locks.setdefault(key, threading.RLock())
    with lock:
        cached = _by_path.get(key)
        if cached is None or cached[1] != stamp:
            module = _import_file(path.resolve(), fresh=cached is not None)
            _by_path[key] = (module, stamp)
            return module
        return cached[0]


def _import_file(path: Path, *, fresh: bool = False) -> ModuleType:
    name = "agentsynth_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if fresh:  # the file changed since it was imported
        sys.modules.pop(name, None)
    module = sys.modules.get(name)
    if module is not None:
        return module
    if not path.is_file():
        raise AgentsynthError(f"{path}: file not found")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AgentsynthError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise AgentsynthError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    except BaseException:  # sys.exit() at import: never leave a half-run module behind
        sys.modules.pop(name, None)
        raise
    return module


class CodeRef:
    """Marks a factory parameter that names code, ``Annotated[str, CodeRef()]``: when the spec is
    loaded, the file or module must exist, and a relative ``file.py`` is made absolute against the
    folder of the file that names it (so a spec's ``agent.py:act`` works with any pack)."""

    def __repr__(self) -> str:
        return "CodeRef()"


def _split(ref: str) -> tuple[str, str]:
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise AgentsynthError(f"{ref!r}: expected 'module:function' or 'file.py:function'")
    return target, attr


def code_ref_problem(ref: str, base_dir: Path | None) -> str | None:
    """Why ``ref`` cannot be loaded (checked at load time; a file is not run), or None."""
    try:
        target, _ = _split(ref)
    except AgentsynthError as exc:
        return str(exc)
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        return None if path.is_file() else f"file not found: {path}"
    try:  # imports the parent packages of a dotted name, not the module itself
        found = importlib.util.find_spec(target)
    except Exception as exc:
        return f"cannot import module {target!r}: {type(exc).__name__}: {exc}"
    return None if found is not None else f"no module named {target!r}"


def absolute_code_ref(ref: str, base_dir: Path) -> str:
    """``file.py:attr`` with the file made absolute against ``base_dir``; modules are left as they are."""
    target, attr = _split(ref)
    if not target.endswith(".py") or Path(target).is_absolute():
        return ref
    return f"{os.path.abspath(base_dir / target)}:{attr}"


def import_object(ref: str, *, base_dir: Path | None = None) -> Any:
    """Resolve ``module:attr`` / ``file.py:attr`` (relative files against ``base_dir``)."""
    target, attr = _split(ref)
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        module = import_file(path)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise AgentsynthError(f"{ref!r}: cannot import module {target!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AgentsynthError(f"{ref!r}: module {target!r} has no attribute {attr!r}") from None
    return obj
