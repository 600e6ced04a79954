"""Hook implementations: the ``rest`` environment, its checkers, the ``tickets`` pack, exploits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsynth_kernel import hookimpl

PACKS = Path(__file__).parent / "packs"


@hookimpl
def register_environments(register: Any) -> None:
    from .env import RestEnvironment, RestEnvSpec

    register("rest", RestEnvironment, spec_cls=RestEnvSpec,
             description="Any HTTP API from its OpenAPI 3.x document (a base URL, or an ASGI app started per episode)")


@hookimpl
def register_checkers(register: Any) -> None:
    from .checkers import HttpChecker, RestDbChecker

    register("http", HttpChecker,
             description="A request of the checker's own; its status / JSON value (JSON path) equals, contains, matches")
    register("rest_db", RestDbChecker,
             description="A SELECT on the app's SQLite file, read directly from the world directory")


@hookimpl
def register_packs(register: Any) -> None:
    register("tickets", PACKS / "tickets",
             description="8 helpdesk tasks over a ticketing API (an ASGI app per episode), checked on its database")


@hookimpl
def adversarial_exploits(environment: str) -> list[Any] | None:
    if environment != "rest":
        return None
    from .exploits import rest_exploits

    return rest_exploits()


@hookimpl
def run_finished(run: Any, results: Any) -> None:
    from .server import shutdown_pool

    shutdown_pool()
