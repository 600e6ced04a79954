"""Python API: build a generator by name and run it.

::

    from agentsynth_synth import run_generator

    report = run_generator("back_translation", "core", {"model": "openai/gpt-4o-mini", "n": 20},
                           run_dir="runs/bt", out="packs/core-bt", seed=0, budget_usd=2.0)
    report.accepted        # EpisodeResults, also in runs/bt/run.sqlite
    report.to_dict()       # counts per rejection reason, LLM requests per accepted item ...

The registered generator components (``build("generator", ComponentSpec("forward", {...}),
pack=pack, run=run)``) also satisfy the kernel's loose ``Generator`` protocol: ``generate()``
is an async iterator over accepted EpisodeResults (in memory, no store).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agentsynth_kernel import AgentsynthError, EpisodeResult, Pack, SpecError, structure

from .back_translation import BackTranslation, BackTranslationSpec
from .challenger import Challenger, ChallengerSpec, Evolve, EvolveSpec, FromFailures, FromFailuresSpec
from .core import SynthContext, SynthReport, synthesize, write_jsonl, write_pack
from .forward import Forward, ForwardSpec
from .replay_filter import ReplayFilter, ReplayFilterSpec

GENERATORS: dict[str, tuple[Any, type, str]] = {
    "forward": (Forward, ForwardSpec, "Teacher policies roll out each task; keep verified rollouts (consensus, judge)"),
    "back_translation": (BackTranslation, BackTranslationSpec,
                         "Execute a tool chain, LLM writes the request; the end state becomes the checker"),
    "replay_filter": (ReplayFilter, ReplayFilterSpec,
                      "Drop trajectories with unknown tools, bad arguments, loops, or that do not replay"),
    "challenger": (Challenger, ChallengerSpec,
                   "Challenger LLM proposes tasks; accepted when strong solvers pass and weak ones mostly fail"),
    "evolve": (Evolve, EvolveSpec, "Rewrite tasks into harder / more diverse variants that still validate"),
    "from_failures": (FromFailures, FromFailuresSpec, "Variants of the tasks a run failed, aimed at each failure"),
}


def make_generator(name: str, params: dict[str, Any] | None = None, *, base_dir: Path | None = None,
                   source: str = "generator") -> Any:
    """A generator object from its name and parameters (path-qualified SpecError on bad params)."""
    if name not in GENERATORS:
        from agentsynth_kernel import did_you_mean

        raise SpecError(source, [f"type: no generator {name!r}{did_you_mean(name, list(GENERATORS))}"
                                 f" (known: {', '.join(GENERATORS)})"])
    cls, spec_cls, _ = GENERATORS[name]
    spec = structure(dict(params or {}), spec_cls, source=source, prefix="generator")
    problems = check_components(spec)
    if problems:
        raise SpecError(source, problems)
    if cls in (ReplayFilter, FromFailures):
        return cls(spec, base_dir=base_dir)
    return cls(spec)


# parameters that name other components: (field, kind, is a list)
COMPONENT_FIELDS = (("teachers", "policy", True), ("strong", "policy", True), ("weak", "policy", True),
                    ("explorer", "policy", False), ("judge", "judge", False))


def check_components(spec: Any) -> list[str]:
    """Every policy / judge a generator's parameters name is installed and its parameters fit."""
    from agentsynth_kernel import ComponentSpec, check_component, get_host

    host = get_host()
    problems: list[str] = []
    for field, kind, many in COMPONENT_FIELDS:
        value = getattr(spec, field, None)
        if value is None:
            continue
        for i, item in enumerate(value if many else [value]):
            where = f"generator.{field}[{i}]" if many else f"generator.{field}"
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                problems.append(f"{where}: expected a {kind} spec with 'type:'")
                continue
            cspec = ComponentSpec(item["type"], {k: v for k, v in item.items() if k != "type"})
            problems += check_component(kind, cspec, where, host)
    return problems


class GeneratorComponent:
    """What ``build("generator", ...)`` returns: the generator plus ``generate()`` (kernel protocol)."""

    def __init__(self, name: str, spec: Any, pack: Pack | None = None, run: Any = None,
                 base_dir: Path | None = None) -> None:
        self.name = name
        cls = GENERATORS[name][0]
        self.generator = cls(spec, base_dir=base_dir) if cls in (ReplayFilter, FromFailures) else cls(spec)
        self.pack, self.run = pack, run

    async def generate(self) -> AsyncIterator[EpisodeResult]:
        if self.pack is None:
            raise AgentsynthError(f"generator {self.name!r} needs a pack (build it with pack=...)")
        ctx = SynthContext(self.pack, seed=getattr(getattr(self.run, "spec", None), "seed", 0) or 0,
                           llm_client=(self.run.services.get("llm") if self.run is not None else None))
        report = await synthesize(self.generator, ctx)
        for result in report.accepted:
            yield result


def component_factory(name: str) -> Any:
    def factory(spec: Any, pack: Pack | None = None, run: Any = None, base_dir: Path | None = None) -> Any:
        return GeneratorComponent(name, spec, pack, run, base_dir)

    factory.__name__ = f"make_{name}"
    return factory


def run_generator(name: str, pack: str | Path | Pack, params: dict[str, Any] | None = None, *,
                  run_dir: str | Path | None = None, out: str | Path | None = None, seed: int = 0,
                  concurrency: int = 1, limit: int | None = None, budget_usd: float | None = None,
                  budget_tokens: int | None = None, cache: bool | str | Path = True, max_steps: int = 30,
                  timeout: float = 120.0, on_progress: Any = None, base_dir: Path | None = None) -> SynthReport:
    """Run generator ``name`` on ``pack`` (name, path or Pack); see the module docstring."""
    from agentsynth_kernel import load_pack

    pack_obj = pack if isinstance(pack, Pack) else load_pack(pack)
    generator = make_generator(name, params, base_dir=base_dir or Path.cwd())
    ctx = SynthContext(pack_obj, seed=seed, budget_usd=budget_usd, budget_tokens=budget_tokens, cache=cache,
                       max_steps=max_steps, timeout=timeout, run_dir=Path(run_dir) if run_dir else None, name=name)

    async def go() -> SynthReport:
        try:
            return await synthesize(generator, ctx, run_dir=Path(run_dir) if run_dir else None,
                                    concurrency=concurrency, limit=limit, params=params, on_progress=on_progress)
        finally:
            await ctx.llm_client.aclose()

    report = asyncio.run(go())
    if out is not None:
        write_output(report, generator, pack_obj, Path(out))
    return report


def write_output(report: SynthReport, generator: Any, pack: Pack, out: Path) -> Path | None:
    """New tasks -> a pack directory; trajectories -> a JSONL file of EpisodeResults."""
    if generator.makes_tasks:
        if not report.accepted:
            return None
        return write_pack(report.accepted, pack, out, pack_id=out.name)
    write_jsonl(report.accepted, out)
    return out
