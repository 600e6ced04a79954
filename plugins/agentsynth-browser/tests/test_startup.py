"""Loading the plugin (what every ``agentsynth`` command does) must stay cheap: its entry-point
module imports none of the heavy dependencies its components use only when they run."""

from __future__ import annotations

import json
import subprocess
import sys

# the entry point's module, and what importing it (and running its register_* hooks) must not import
ENTRY_POINT = "agentsynth_browser.plugin"
HEAVY = ("playwright", "agentsynth_browser.server", "wsgiref", "http.server")


def test_loading_the_plugin_imports_no_heavy_dependency():
    code = (
        "import json, sys\n"
        "from agentsynth_kernel.plugins import PluginHost\n"
        f"import {ENTRY_POINT} as plugin\n"
        "host = PluginHost()\n"
        "info = host.add_plugin(plugin, 'under-test')\n"
        "print(json.dumps({'errors': info.errors, 'hooks': info.hooks,\n"
        f"                  'loaded': sorted(m for m in {HEAVY!r} if m in sys.modules)}}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    result = json.loads(out.splitlines()[-1])
    assert result["errors"] == []
    assert result["hooks"], "the module implements no hook: it is not the plugin"
    assert result["loaded"] == [], f"loading the plugin imported {result['loaded']}"
