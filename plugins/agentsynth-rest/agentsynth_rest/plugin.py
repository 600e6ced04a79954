"""Hook implementations: the ``rest`` environment, its checkers, the ``tickets`` pack, exploits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsynth_kernel import hookimpl

PACKS = Path(__file__).parent / "packs"


@hookimpl
def register_environments(register: Any) -> None:
    register("rest", "agentsynth_rest.env:RestEnvironment", spec_cls="agentsynth_rest.env:RestEnvSpec",
             description="Any HTTP API from its OpenAPI 3.x document (a base URL, or an ASGI app started per episode)")


@hookimpl
def register_checkers(register: Any) -> None:
    register("http", "agentsynth_rest.checkers:HttpChecker",
             description="A request of the checker's own; its status / JSON value (JSON path) equals, contains, matches")
    register("rest_db", "agentsynth_rest.checkers:RestDbChecker",
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
def perturb_task(pack: Any, task: Any, seed: int) -> Any:
    """The tickets pack relabels its world by shifting every ticket and user id (the app's
    ``id_offset``): a transcript that memorised ids finds other tickets, or none."""
    env = pack.environment
    if env is None or env.type != "rest" or Path(pack.base_dir).resolve() != (PACKS / "tickets").resolve():
        return None
    from agentsynth_kernel.testing.adversarial import PerturbedTask

    offset = 100 * (1 + seed % 9)
    mapping = {str(n): str(n + offset) for n in range(1, 60)}
    return PerturbedTask.by_mapping(pack, task, mapping, environment={"app_args": {"id_offset": offset}})


@hookimpl
def run_finished(run: Any, results: Any) -> None:
    from .server import shutdown_pool

    shutdown_pool()
