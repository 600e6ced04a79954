"""Python API and the run-spec path.

::

    from agentsynth_generate import GenerateSpec, generate_records

    records, report = generate_records({"model": "local", "tools": "tools.json", "query": ["..."], "n": 2})
    report["stages"], report["metrics"]

As a component (``build("generator", ComponentSpec("generate", {...}), pack=pack)``), ``generate()`` is an
async iterator over the accepted records.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agentsynth_kernel import SpecError

from .spec import GenerateSpec, config_of, load_spec, problems_of, resolve_inputs


class GenerateComponent:
    """What ``build("generator", ...)`` returns (the kernel's Generator protocol)."""

    def __init__(self, spec: GenerateSpec, pack: Any = None, run: Any = None, base_dir: Path | None = None) -> None:
        self.spec, self.pack, self.run, self.base_dir = spec, pack, run, base_dir or Path.cwd()

    async def generate(self) -> AsyncIterator[dict[str, Any]]:
        from agentsynth_kernel import get_host

        from .core import Generation

        problems = problems_of(self.spec)
        if problems:
            raise SpecError("generate", problems)
        host = get_host()
        inputs = resolve_inputs(self.spec, base_dir=self.base_dir, source="generate", host=host, pack=self.pack)
        client = None
        if self.run is not None:
            from agentsynth_kernel import client_for

            client = client_for(self.run)
        accepted: list[dict[str, Any]] = []
        generation = Generation(config_of(self.spec, host), inputs, host=host, client=client, sink=accepted.append)
        await generation.run()
        for record in accepted:
            yield record


def make_component(spec: GenerateSpec, pack: Any = None, run: Any = None, base_dir: Path | None = None) -> GenerateComponent:
    return GenerateComponent(spec, pack, run, base_dir)


def generate_records(params: dict[str, Any], *, base_dir: Path | None = None, client: Any = None,
                     source: str = "generate") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run a generation in memory: (accepted records, report dict)."""
    from agentsynth_kernel import get_host

    from .core import Generation

    spec = load_spec(params, source)
    host = get_host()
    inputs = resolve_inputs(spec, base_dir=base_dir or Path.cwd(), source=source, host=host)
    accepted: list[dict[str, Any]] = []
    generation = Generation(config_of(spec, host), inputs, host=host, client=client, sink=accepted.append)
    report = asyncio.run(generation.run())
    return accepted, report.to_dict()


def run_from_run_spec(spec_file: Any, run_spec: Any, *, json_path: str | None, quiet: bool, run_dir: Any = None) -> int:
    from agentsynth_kernel import get_host, resolve_pack

    from .cli import run_spec as run

    path = Path(spec_file)
    source = f"{path} (generate:)"
    params = dict(run_spec.generate.params)
    policy = run_spec.policy
    if "model" not in params and policy is not None and policy.type == "llm":
        for key in ("model", "api_base", "api_key_env"):
            if key in policy.params and key not in params:
                params[key] = policy.params[key]
    spec = load_spec(params, source)
    pack = None
    if spec.pack is None and spec.world is None and spec.tools is None:
        pack = resolve_pack(run_spec, base_dir=path.parent, source=str(path), host=get_host())
    return run(spec, base_dir=path.parent, source=source, json_path=json_path, quiet=quiet, pack=pack,
                    default_seed=run_spec.seed, run_dir=Path(run_dir) if run_dir else None)
