"""The agentsynth plugin: six generators, the components they build tasks from, and ``agentsynth synth``."""

from __future__ import annotations

from typing import Any

from agentsynth_kernel import hookimpl


@hookimpl
def register_generators(register: Any) -> None:
    from . import api

    for name, (_cls, spec_cls, description) in api.GENERATORS.items():
        register(name, api.component_factory(name), spec_cls=spec_cls, description=description)


@hookimpl
def register_checkers(register: Any) -> None:
    from .checkers import Fingerprint, RecordProbes, StateDigest, StateProbe

    register("state_probe", StateProbe,
             description="Read-only probe calls must return what they returned on the verified end state (any env)")
    register("state_digest", StateDigest,
             description="The end state's fingerprint equals the verified one (every change, nothing else)")
    register("synth_fingerprint", Fingerprint, description="Always passes; a digest of the end state (consensus)")
    register("synth_record_probes", RecordProbes, description="Always passes; records probe results (internal)")


@hookimpl
def register_policies(register: Any) -> None:
    from .checkers import ReplayPolicy

    register("synth_replay", ReplayPolicy, description="Plays a fixed list of actions ({tool, arguments} / {answer})")


@hookimpl
def register_commands(cli: Any) -> None:
    from .cli import synth

    cli.add_command(synth, "synth")


@hookimpl
def run_generation(spec_file: Any, spec: Any, run_dir: Any, json_path: str | None, quiet: bool) -> int | None:
    """``agentsynth run gen.yaml`` with ``generate: {type: <one of ours>}`` runs like ``agentsynth synth gen.yaml``."""
    import click

    from .cli import GENERATOR_NAMES, synth

    if spec.generate is None or spec.generate.type not in GENERATOR_NAMES:
        return None
    try:
        click.get_current_context().invoke(synth, source=str(spec_file), run_dir=run_dir, json_path=json_path,
                                           quiet=quiet)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return 0
