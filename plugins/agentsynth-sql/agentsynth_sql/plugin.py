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
    from .compat import SqlCompatEnvironment, SqlCompatSpec

    register("sql_compat", SqlCompatEnvironment, spec_cls=SqlCompatSpec,
             description="The sql world behind agentsynth-ai's one read-write sql_query(query) tool (imported packs)")


@hookimpl
def register_checkers(register: Any) -> None:
    from .checkers import NoCollateral, SqlAnswer, SqlChecker

    register("sql", SqlChecker,
             description="A query's result equals / contains / compares with a value (+ collateral-damage check)")
    register("sql_answer", SqlAnswer,
             description="The answer names the value a query returns and none of the other candidates")
    register("no_collateral", NoCollateral,
             description="The world changed only where the task's allowed_changes say it may")
    from .compat import AgentsynthAiSql

    register("agentsynth_ai_sql", AgentsynthAiSql,
             description="agentsynth-ai's sql check on the end state: exact rows, a substring of them, or non-empty")


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
    if environment == "sql_compat":
        from .compat import compat_exploits

        return compat_exploits()
    if environment != "sql":
        return None
    from .exploits import sql_exploits

    return sql_exploits()


@hookimpl
def perturb_task(pack: Any, task: Any, seed: int) -> Any:
    from .perturb import perturb_sql_task

    return perturb_sql_task(pack, task, seed)


@hookimpl
def register_commands(cli: Any) -> None:
    """``agentsynth pack import FILE --from agentsynth-ai -o DIR`` on the kernel's ``pack`` group."""
    from .import_agentsynth_ai import make_command

    group = cli.commands.get("pack") or cli.get_command(None, "pack")
    if group is not None and "import" not in getattr(group, "commands", {"import": None}):
        group.add_command(make_command())


@hookimpl
def checks_from_demo(environment: str, world: Any, trajectory: Any) -> dict[str, Any] | None:
    """State checks for exactly what a demonstration changed in an ``sql`` world (``pack new --from-demo``)."""
    if environment != "sql":
        return None
    from .env import SqlEnvironment

    if not isinstance(world, SqlEnvironment):
        return None
    from .demo import demo_checks

    return demo_checks(world)
