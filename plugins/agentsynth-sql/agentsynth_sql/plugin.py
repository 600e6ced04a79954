"""The agentsynth plugin: the ``sql`` environment, its checkers, the ``core`` pack and SQL scaffolding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsynth_kernel import hookimpl

PACKS = Path(__file__).parent / "packs"


@hookimpl
def register_environments(register: Any) -> None:
    from .env import SqlEnvironment, SqlEnvSpec

    register("sql", SqlEnvironment, spec_cls=SqlEnvSpec,
             description="A private seeded SQLite world per episode: sql_query / sql_execute, sandboxed")


@hookimpl
def register_checkers(register: Any) -> None:
    from .checkers import NoCollateral, SqlAnswer, SqlChecker

    register("sql", SqlChecker,
             description="A query's result equals / contains / compares with a value (+ collateral-damage check)")
    register("sql_answer", SqlAnswer,
             description="The answer names the value a query returns and none of the other candidates")
    register("no_collateral", NoCollateral,
             description="The world changed only where the task's allowed_changes say it may")


@hookimpl
def register_packs(register: Any) -> None:
    register("core", PACKS / "core", description="22 tiered business tasks on one writable SQL world (a small shop)")


@hookimpl
def scaffold_pack(name: str, directory: Path, environment: str | None, schema: Path | None) -> list[Path] | None:
    if environment not in (None, "sql"):
        return None
    from .scaffold import scaffold

    return scaffold(name, directory, schema)


@hookimpl
def adversarial_exploits(environment: str) -> list[Any] | None:
    if environment != "sql":
        return None
    from .exploits import sql_exploits

    return sql_exploits()


@hookimpl
def perturb_task(pack: Any, task: Any, seed: int) -> Any:
    from .perturb import perturb_sql_task

    return perturb_sql_task(pack, task, seed)
