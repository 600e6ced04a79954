"""agentsynth-browser: headless Chromium driven by Playwright as an outcome-checked environment.

Names are imported on first use.
"""

from __future__ import annotations

from agentsynth_kernel import lazy_exports

__all__ = ["BrowserEnvironment", "find_chromium", "shutdown"]

_EXPORTS: dict[str, str | None] = {  # name -> the submodule it comes from (None: the submodule itself)
    **dict.fromkeys(("BrowserEnvironment",), "environment"),
    **dict.fromkeys(("find_chromium", "shutdown"), "launcher"),
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
