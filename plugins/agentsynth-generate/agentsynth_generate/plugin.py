"""The agentsynth plugin: the ``generate`` generator (run specs) and the ``agentsynth generate`` command."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl


@hookimpl
def register_generators(register: Any) -> None:
    register("generate", "agentsynth_generate.api:make_component", spec_cls="agentsynth_generate.spec:GenerateSpec",
             description="Trajectories from queries / a tool catalog / a world (single_agent, back, multi_agent, "
                         "code_execution), verified by format, execution, semantic and world stages")


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import eval_command, flywheel_command, generate_command

    cli.add_command(generate_command, "generate")
    cli.add_command(eval_command, "eval")
    cli.add_command(flywheel_command, "flywheel")


@hookimpl
def run_generation(spec_file: Any, spec: Any, run_dir: Any, json_path: str | None, quiet: bool) -> int | None:
    """``agentsynth run gen.yaml`` with ``generate: {type: generate, ...}``: the run spec's pack (or inline
    tasks) is the world, its tasks the queries unless ``query``/``queries``/``sample`` are given; the spec's
    ``policy: {type: llm, model: ...}`` gives the default model, its ``seed`` the default seed."""
    if spec.generate is None or spec.generate.type != "generate":
        return None
    from .api import run_from_run_spec

    return run_from_run_spec(spec_file, spec, json_path=json_path, quiet=quiet, run_dir=run_dir)
