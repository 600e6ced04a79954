"""agentsynth-browser: headless Chromium driven by Playwright as an outcome-checked environment."""

from .environment import BrowserEnvironment
from .launcher import find_chromium, shutdown

__all__ = ["BrowserEnvironment", "find_chromium", "shutdown"]
