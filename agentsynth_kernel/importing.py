"""Load user code named in specs: ``package.module:attr`` or ``path/to/file.py:attr``."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import AgentsynthError

_import_lock = threading.RLock()
_by_path: dict[str, ModuleType] = {}


def import_file(path: Path) -> ModuleType:
    """Import a Python file as a module (cached by resolved path, so it runs once per process).

    Thread-safe: episodes running on worker threads never see a half-executed module."""
    module = _by_path.get(str(path))  # the common case: no path resolution, no hashing
    if module is not None:
        return module
    with _import_lock:
        module = _by_path[str(path)] = _import_file(path.resolve())
        return module


def _import_file(path: Path) -> ModuleType:
    name = "agentsynth_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
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
    return module


def import_object(ref: str, *, base_dir: Path | None = None) -> Any:
    """Resolve ``module:attr`` / ``file.py:attr`` (relative files against ``base_dir``)."""
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise AgentsynthError(f"{ref!r}: expected 'module:function' or 'file.py:function'")
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
