"""What loading a plugin imports: the check behind each plugin's start-up guard test."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from typing import Any


def plugin_load_imports(entry_point: str, watched: Iterable[str]) -> dict[str, Any]:
    """Import a plugin's entry-point module in a fresh interpreter, register it on a new host (its
    ``register_*`` hooks run), and report ``errors`` (the registration's), ``hooks`` (what the module
    implements) and ``loaded``: the modules of ``watched`` that ended up in ``sys.modules``.

    Every ``agentsynth`` command loads every plugin, so a heavy import at registration is paid by
    all of them; a plugin's test asserts ``loaded == []`` for what its components import lazily."""
    watched = tuple(watched)
    code = (
        "import json, sys\n"
        "from agentsynth_kernel.plugins import PluginHost\n"
        f"import {entry_point} as plugin\n"
        "host = PluginHost()\n"
        "info = host.add_plugin(plugin, 'under-test')\n"
        "print(json.dumps({'errors': info.errors, 'hooks': info.hooks,\n"
        f"                  'loaded': sorted(m for m in {watched!r} if m in sys.modules)}}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result
