"""Hook implementations: the ``composite`` environment, its checkers, the ``sql-python`` pack, exploits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsynth_kernel import hookimpl

PACKS = Path(__file__).parent / "packs"


@hookimpl
def register_environments(register: Any) -> None:
    register("composite", "agentsynth_composite.env:CompositeEnvironment", spec_cls="agentsynth_composite.env:CompositeSpec",
             description="One episode in several worlds at once: WORLD__TOOL tools, children set up in parallel")


@hookimpl
def register_checkers(register: Any) -> None:
    register("composite", "agentsynth_composite.checkers:CompositeChecker",
             spec_cls="agentsynth_composite.checkers:CompositeCheckSpec",
             description="Any world-state checker, run against one named world of a composite environment")
    register("composite_answer", "agentsynth_composite.checkers:CompositeAnswerChecker",
             spec_cls="agentsynth_composite.checkers:CompositeAnswerCheckSpec",
             description="Any answer checker that reads one named world of a composite environment")


@hookimpl
def register_packs(register: Any) -> None:
    register("sql-python", PACKS / "sql-python",
             description="Read a table, compute in a Python sandbox, write the result back (needs agentsynth-sql and "
                         "agentsynth-python)")


@hookimpl
def adversarial_exploits(environment: str) -> list[Any] | None:
    if environment != "composite":
        return None
    from .exploits import composite_exploits

    return composite_exploits()


@hookimpl
def perturb_task(pack: Any, task: Any, seed: int) -> Any:
    if pack.environment is None or pack.environment.type != "composite":
        return None
    from .perturb import perturb_composite_task

    return perturb_composite_task(pack, task, seed)


@hookimpl
def scaffold_pack(name: str, directory: Path, environment: str | None, schema: Path | None) -> list[Path] | None:
    if environment != "composite" or schema is not None:
        return None
    from agentsynth_kernel import get_host

    from .scaffold import scaffold

    return scaffold(name, directory, get_host())
