"""Hook implementations: the ``bfcl`` world, the ``bfcl_ast`` checker, ``bfcl:<category>`` packs,
exploits against them, and the ``agentsynth bfcl`` commands."""

from __future__ import annotations

import logging
from typing import Any

from agentsynth_kernel import hookimpl

log = logging.getLogger(__name__)


@hookimpl
def register_environments(register: Any) -> None:
    register("bfcl", "agentsynth_bfcl.env:BfclEnvironment",
             description="A BFCL item's functions as tools; calls are recorded and scored, never executed")


@hookimpl
def register_checkers(register: Any) -> None:
    register("bfcl_ast", "agentsynth_bfcl.env:BfclAst",
             description="BFCL's AST match of the calls made against the possible answers (any order for parallel)")


@hookimpl
def register_packs(register: Any) -> None:
    """One pack per BFCL category whose data is installed (``pip install --no-deps bfcl-eval``),
    built once per data version into ``~/.cache/agentsynth/bfcl``. Without the data: none, quietly
    (``agentsynth bfcl status`` says why)."""
    from .convert import cached_packs, describe

    try:
        packs = cached_packs()
    except Exception as exc:  # noqa: BLE001 - unreadable data must not take the plugin's world down
        log.warning("agentsynth-bfcl: cannot build the BFCL packs: %s", exc)
        return
    for name, path in packs.items():
        register(f"bfcl:{name}", path, description=f"BFCL {name}: {describe(name)}")


@hookimpl
def adversarial_exploits(environment: str) -> list[Any] | None:
    if environment != "bfcl":
        return None
    from .exploits import bfcl_exploits

    return bfcl_exploits()


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import bfcl

    cli.add_command(bfcl)
