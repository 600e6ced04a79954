"""The agentsynth plugin: the ``math`` and ``docs_qa`` domains, the ``autosynth`` generator
(run through ``agentsynth run SPEC``), and the ``init-domain`` and ``metaopt`` commands."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl

GENERATORS = ("autosynth",)


class AutosynthGenerator:
    """The challenger loop over a text domain; it runs through ``agentsynth run SPEC`` (a run
    directory, resume, a report), so ``generate()`` says so instead of doing half the job."""

    def __init__(self, **params: Any) -> None:
        self.params = params

    def generate(self) -> Any:
        from agentsynth_kernel import AgentsynthError

        raise AgentsynthError("autosynth runs through `agentsynth run SPEC` (generate: {type: autosynth, ...})")


@hookimpl
def register_domains(register: Any) -> None:
    from .domains import DocsQADomain, MathDomain

    register("math", MathDomain, description="Math word problems with exact-fraction answers (verifiable)")
    register("docs_qa", DocsQADomain, description="Questions grounded in chunks of a folder of documents (rubric)")


@hookimpl
def register_generators(register: Any) -> None:
    register("autosynth", AutosynthGenerator,
             description="Challenger -> audit -> weak/strong solvers -> judge -> accept/reflect, over a text domain")


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import init_domain, metaopt

    cli.add_command(init_domain, "init-domain")
    cli.add_command(metaopt, "metaopt")


@hookimpl
def run_generation(spec_file: Any, spec: Any, run_dir: Any, json_path: str | None, quiet: bool) -> int | None:
    """``agentsynth run SPEC`` with ``generate: {type: autosynth, ...}``."""
    if spec.generate is None or spec.generate.type not in GENERATORS:
        return None
    from .runner import run_generation as run

    return run(spec_file, spec, run_dir, json_path, quiet)
