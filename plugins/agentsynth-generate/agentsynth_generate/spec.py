"""The parameters of a generation, the same for ``agentsynth generate`` and a run spec's ``generate:``,
and how they resolve into inputs (scenarios + a catalog or a world). Errors name the source and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import SpecError, located

from .catalog import Scenario, load_queries, load_tools, parse_queries, parse_tools
from .core import GenerateConfig, Inputs
from .modes import MODES
from .taxonomy import DOMAINS, domain_tools, sample


@attrs.frozen
class GenerateSpec:
    """``generate: {type: generate, ...}`` (or the command line's options)."""

    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    n: int = 1
    seed: int | None = None
    mode: list[str] = attrs.field(factory=list)  # empty: single_agent, or with vary_modes every mode installed
    vary_modes: bool = False
    query: list[str] = attrs.field(factory=list)
    queries: Any = None  # a file (JSON array / JSONL), or an inline list
    tools: Any = None  # a catalog file, or an inline list of tools
    pack: str | None = None
    world: dict[str, Any] | None = None  # an environment spec: {type: sql, ...}
    docs: str | None = None  # a file or directory of documents: the documents world
    domain: list[str] = attrs.field(factory=list)
    sample: int | None = None
    judge: Any = None  # a registered judge: NAME or {type: NAME, ...}
    judge_threshold: float = 0.5
    semantic: bool = True
    temperature: float | None = 0.7
    max_tokens: int | None = None
    max_turns: int = 6
    per_role: bool = False
    python_env: dict[str, Any] = attrs.field(factory=dict)
    out: str | None = None
    rejected: str | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    cache: bool = True
    timeout: float = 120.0
    concurrency: int = 1
    dedup: bool = False
    item_timeout: float = 900.0


def problems_of(spec: GenerateSpec) -> list[str]:
    """What the schema cannot express (one message per problem, with the key)."""
    problems = []
    if not 1 <= spec.n <= 100_000:
        problems.append(f"n: expected an integer >= 1 and <= 100,000, got {spec.n}")
    if not 0 < spec.item_timeout <= 7 * 24 * 3600:
        problems.append(f"item_timeout: expected seconds > 0 and <= 604800, got {spec.item_timeout}")
    if not 1 <= spec.concurrency <= 1024:
        problems.append(f"concurrency: expected an integer >= 1 and <= 1024, got {spec.concurrency}")
    if not 1 <= spec.max_turns <= 100:
        problems.append(f"max_turns: expected an integer >= 1 and <= 100, got {spec.max_turns}")
    if spec.sample is not None and not 1 <= spec.sample <= 100_000:
        problems.append(f"sample: expected an integer >= 1 and <= 100,000, got {spec.sample}")
    for i, mode in enumerate(spec.mode):
        if mode not in MODES:
            problems.append(f"mode[{i}]: expected one of {', '.join(MODES)}, got {mode!r}")
    for i, domain in enumerate(spec.domain):
        if domain not in DOMAINS:
            from agentsynth_kernel import did_you_mean

            problems.append(f"domain[{i}]: unknown domain {domain!r}{did_you_mean(domain, DOMAINS)}")
    if spec.tools is not None and (spec.pack is not None or spec.world is not None):
        problems.append("tools: give a catalog (tools) or a world (pack / world), not both: a world brings its own tools")
    if spec.docs is not None and (spec.tools is not None or spec.pack is not None or spec.world is not None):
        problems.append("docs: the documents are the world (search_documents, read_document): not with tools, pack or world")
    if spec.pack is not None and spec.world is not None:
        problems.append("world: give pack or world, not both")
    if spec.world is not None and not isinstance(spec.world.get("type"), str):
        problems.append("world.type: missing (an environment type, e.g. {type: sql, ...})")
    if spec.judge is not None and not (isinstance(spec.judge, str) or (isinstance(spec.judge, dict)
                                                                       and isinstance(spec.judge.get("type"), str))):
        problems.append("judge: expected a judge name or {type: NAME, ...}")
    if spec.temperature is not None and not 0 <= spec.temperature <= 2:
        problems.append(f"temperature: expected a number >= 0 and <= 2, got {spec.temperature}")
    if not 0 <= spec.judge_threshold <= 1:
        problems.append(f"judge_threshold: expected a number >= 0 and <= 1, got {spec.judge_threshold}")
    if not spec.model:
        problems.append("model: missing (any model string: local, openai/gpt-4o-mini, hosted_vllm/NAME with api_base ...)")
    return problems


def load_spec(params: dict[str, Any], source: str) -> GenerateSpec:
    from agentsynth_kernel import structure

    spec = structure(params, GenerateSpec, source=source)
    problems = problems_of(spec)
    if problems:
        raise SpecError(source, problems)
    return spec


def _path(value: str, base_dir: Path) -> Path:
    path = Path(value)
    return path if path.is_absolute() else base_dir / path


def resolve_inputs(spec: GenerateSpec, *, base_dir: Path, source: str, host: Any, pack: Any = None) -> Inputs:
    """Scenarios (queries, a queries file, taxonomy samples, or the pack's tasks) and a catalog or a world."""
    from agentsynth_kernel import ComponentSpec, Pack, Task, check_component, load_pack

    tools = None
    if spec.tools is not None:
        if isinstance(spec.tools, str):
            tools = load_tools(_path(spec.tools, base_dir))
        else:
            tools = parse_tools(spec.tools, f"{source}: tools")
    if spec.pack is not None:
        ref: Any = spec.pack
        if (base_dir / spec.pack).exists():
            ref = base_dir / spec.pack
        pack = load_pack(ref, host=host)
    elif spec.world is not None:
        env = ComponentSpec(spec.world["type"], {k: v for k, v in spec.world.items() if k != "type"})
        problems = check_component("environment", env, "world", host, base_dir)
        if problems:
            raise SpecError(source, problems)
        pack = located(Pack(id=f"world-{env.type}", tasks=[Task(id="world", instruction="")], environment=env),
                       base_dir=base_dir.resolve(), source=source, content_hash="")
    if pack is not None and pack.environment is None:
        raise SpecError(source, ["pack: the pack has no environment to take the tools from"])
    scenarios: list[Scenario] = [Scenario(f"q{i}", q, source="--query") for i, q in enumerate(spec.query) if q.strip()]
    if len(scenarios) != len(spec.query):
        raise SpecError(source, ["query: an empty query"])
    if spec.queries is not None:
        if isinstance(spec.queries, str):
            loaded = load_queries(_path(spec.queries, base_dir))
        else:
            loaded = parse_queries(spec.queries, f"{source}: queries")
        taken = {s.id for s in scenarios}
        scenarios += [attrs.evolve(s, id=f"f{s.id}") if s.id in taken else s for s in loaded]
    domain_catalogs = {}
    corpus = None
    if spec.docs is not None:
        from .documents import Corpus

        corpus = Corpus(_path(spec.docs, base_dir))
        if not scenarios:
            scenarios = [Scenario(f"doc{i}", "", source=f"docs {spec.docs}",
                                  metadata={"passage": text, "document": name, "chunk": chunk})
                         for i, (name, chunk, text) in enumerate(corpus.sample(spec.sample or 10, spec.seed or 0))]
    elif spec.sample is not None or (spec.domain and not scenarios):
        scenarios += sample(spec.sample or len(spec.domain) * 4, spec.seed or 0, spec.domain or None)
        if tools is None and pack is None:
            domain_catalogs = {d: domain_tools(d) for d in DOMAINS}
    elif spec.domain:
        scenarios = [s for s in scenarios if s.domain in spec.domain]
    if not scenarios and pack is not None and spec.world is None:
        scenarios = [Scenario(t.id, t.instruction, domain=str(t.metadata.get("domain", "")), source=f"pack {pack.id}",
                              task=t) for t in pack.tasks]
    if not scenarios and spec.mode and set(spec.mode) == {"back"}:
        scenarios = [Scenario("back", "", source="catalog")]
    if not scenarios:
        raise SpecError(source, ["no queries: give --query/-q, --queries FILE, --sample N (the seed-task taxonomy), "
                                 "--pack PACK (its tasks), or --mode back (chains from the catalog alone)"])
    return Inputs(scenarios, tools, pack, domain_catalogs, corpus)


def modes_of(spec: GenerateSpec, host: Any) -> list[str]:
    if spec.mode:
        return list(dict.fromkeys(spec.mode))
    if spec.vary_modes:
        return [m for m in MODES if m != "code_execution" or "python" in host.registry["environment"]]
    return ["single_agent"]


def config_of(spec: GenerateSpec, host: Any, *, seed: int = 0) -> GenerateConfig:
    judge = None
    if spec.judge is not None:
        judge = {"type": spec.judge} if isinstance(spec.judge, str) else dict(spec.judge)
    assert spec.model is not None
    return GenerateConfig(
        model=spec.model, api_base=spec.api_base, api_key_env=spec.api_key_env, n=spec.n,
        seed=spec.seed if spec.seed is not None else seed, modes=modes_of(spec, host), vary_modes=spec.vary_modes,
        temperature=spec.temperature, max_tokens=spec.max_tokens, max_turns=spec.max_turns, semantic=spec.semantic,
        judge=judge, judge_threshold=spec.judge_threshold, per_role=spec.per_role, python_env=dict(spec.python_env),
        cache=spec.cache, budget_usd=spec.budget_usd, budget_tokens=spec.budget_tokens, timeout=spec.timeout,
        concurrency=spec.concurrency, dedup=spec.dedup,
        item_timeout=spec.item_timeout)
