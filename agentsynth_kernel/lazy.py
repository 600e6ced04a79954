"""Names a package imports on first use (PEP 562), so importing the package stays cheap: the kernel's
own namespace, and a plugin's, whose entry point is loaded by every ``agentsynth`` command."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str | None]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, which is importing (pass ``__name__``).

    ``exports`` maps each public name to the submodule that defines it (relative, without the dot),
    or to None when the name is a submodule itself. A name is imported once, on first use, and then
    kept in the package's namespace::

        __getattr__, __dir__ = lazy_exports(__name__, {"RestEnvironment": "env", "server": None})
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = exports[name]
        value: Any = importlib.import_module(f".{module or name}", package)
        if module is not None:
            value = getattr(value, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
