"""The agentsynth hooks of agentsynth-browser (entry point ``browser``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsynth_kernel import hookimpl

PACKS = Path(__file__).parent / "packs"


@hookimpl
def register_environments(register: Any) -> None:
    register("browser", "agentsynth_browser.environment:BrowserEnvironment",
             description="Headless Chromium (Playwright), a fresh context per episode, optionally on a pack's web app")


@hookimpl
def register_checkers(register: Any) -> None:
    register("page", "agentsynth_browser.checkers:PageChecker", description="The final page's DOM: selector / text / regex / count / absent")
    register("url", "agentsynth_browser.checkers:UrlChecker", description="The final URL: equals / path / contains / regex")
    register("app_db", "agentsynth_browser.checkers:AppDbChecker", description="A SQL query on the browser world's app database equals 'expected'")


@hookimpl
def register_packs(register: Any) -> None:
    register("webshop", PACKS / "webshop", description="A web shop with a SQLite backend, driven in Chromium")


@hookimpl
def run_finished(run: Any, results: Any) -> None:
    """Close the shared browsers this run used (and the Playwright driver once nothing is open)."""
    from . import launcher

    launcher.release_run(getattr(run, "run_id", "") or "")


@hookimpl
def adversarial_exploits(environment: str) -> Any:
    """The browser world's exploit attempts (``exploits.py``) for the kernel's adversarial kit."""
    from .exploits import exploits_for_environment

    return exploits_for_environment(environment)
