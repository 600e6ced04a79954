"""Loading the plugin (what every ``agentsynth`` command does) must stay cheap: its entry-point
module imports none of the heavy dependencies its components use only when they run."""

from __future__ import annotations

from agentsynth_kernel.testing import plugin_load_imports

# the entry point's module, and what importing it (and running its register_* hooks) must not import
ENTRY_POINT = "agentsynth_synth.plugin"
HEAVY = ("agentsynth_kernel.llm",)


def test_loading_the_plugin_imports_no_heavy_dependency():
    result = plugin_load_imports(ENTRY_POINT, HEAVY)
    assert result["errors"] == []
    assert result["hooks"], "the module implements no hook: it is not the plugin"
    assert result["loaded"] == [], f"loading the plugin imported {result['loaded']}"
