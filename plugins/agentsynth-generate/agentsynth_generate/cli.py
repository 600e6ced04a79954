"""``agentsynth generate``: training trajectories from queries, a tool catalog or a world."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import click

from .modes import MODES
from .taxonomy import DOMAINS


def _param(text: str, option: str) -> tuple[str, Any]:
    import yaml

    from agentsynth_kernel import SpecError

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SpecError(option, [f"{text!r}: expected KEY=VALUE (VALUE is YAML)"])
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise SpecError(option, [f"{key}: invalid YAML value: {exc}"]) from None


def _world(text: str) -> dict[str, Any]:
    """``--world``: an environment spec as YAML (``{type: sql, db: shop.db}``), a YAML file, or a type name."""
    import yaml

    from agentsynth_kernel import SpecError

    path = Path(text)
    try:
        value = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else yaml.safe_load(text)
    except (yaml.YAMLError, OSError) as exc:
        raise SpecError("--world", [f"not a YAML environment spec: {exc}"]) from None
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict):
        raise SpecError("--world", ["expected an environment spec such as '{type: sql, db: shop.db}' or a type name"])
    return value


def run_spec(spec: Any, *, base_dir: Path, source: str, json_path: str | None, quiet: bool, pack: Any = None,
             default_seed: int = 0, run_dir: Path | None = None) -> int:
    """Resolve the inputs, run, write, report; returns the exit code."""
    from agentsynth_kernel import get_host

    from .core import generate
    from .spec import config_of, resolve_inputs

    host = get_host()
    inputs = resolve_inputs(spec, base_dir=base_dir, source=source, host=host, pack=pack)
    config = config_of(spec, host, seed=default_seed)
    relative = source != "command line"  # a spec's paths are relative to the spec's folder
    out = Path(spec.out) if spec.out else (Path(run_dir) / "trajectories.jsonl" if run_dir else None)
    rejected = Path(spec.rejected) if spec.rejected else (Path(run_dir) / "rejected.jsonl" if run_dir else None)
    out, rejected = ((base_dir / p if relative and p is not None and not p.is_absolute() else p) for p in (out, rejected))
    for path in (out, rejected):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
    progress = None if quiet else (lambda line: click.echo(line, err=True))
    report = asyncio.run(generate(config, inputs, out=out, rejected=rejected, host=host, on_progress=progress))
    summary = report.to_dict()
    summary["grounding"] = "world" if inputs.pack is not None else ("documents" if inputs.corpus is not None else "simulated")
    _emit(summary, json_path)
    if not quiet and json_path != "-":
        print_summary(summary)
    return 3 if report.stopped else (4 if report.incomplete else 0)


def print_summary(s: dict[str, Any]) -> None:
    per = s["llm_requests_per_accepted"]
    click.echo(f"generate: {s['accepted']} accepted, {s['rejected']} rejected, {s['incomplete']} failed of "
               f"{s['planned']} items; {s['llm_requests']} LLM requests ({'n/a' if per is None else f'{per:.1f}'} "
               f"per accepted item); tool results {s['grounding']}")
    for stage, c in s["stages"].items():
        if c["entered"]:
            reasons = ", ".join(f"{k} {v}" for k, v in c["rejected"].items())
            click.echo(f"  {stage:<9} {c['passed']}/{c['entered']} passed" + (f"  (rejected: {reasons})" if reasons else ""))
    m = s["metrics"]
    if m["records"]:
        n3 = m["query_ngrams"]["3"]
        click.echo(f"  diversity: {m['tool_signatures']['distinct']} tool signatures, modes {m['modes']}, "
                   f"domains {m['domains']}, 3-gram novelty {n3['novelty']}")
    for err in s["errors"][:5]:
        click.echo(f"  error: {err}")
    if s["stopped"]:
        click.echo(f"stopped: {s['stopped']} (accepted records so far are written)")
    if s["output"]:
        click.echo(f"wrote {s['records_written']} records to {s['output']}")


@click.command("generate")
@click.option("-q", "--query", "queries_", multiple=True, help="A user query (repeatable).")
@click.option("--queries", type=click.Path(path_type=Path, dir_okay=False),
              help="Queries / scenarios: a JSON array (strings or {query, id, domain, mode}) or JSONL.")
@click.option("--tools", type=click.Path(path_type=Path, dir_okay=False),
              help="A tool catalog: OpenAI tools block, bare function list, Anthropic tools or MCP tools/list output. "
                   "Tool results are then simulated by the model (grounding: simulated).")
@click.option("--pack", help="A pack (name or path) whose world executes every call for real; its tasks are the "
                             "queries when none are given, and their checkers decide on the world.")
@click.option("--world", help="An environment spec as YAML ('{type: sql, db: shop.db}') or a YAML file: calls run in it.")
@click.option("--docs", type=click.Path(path_type=Path, exists=True),
              help="Documents (a file or directory): the agent searches and reads them for real; without queries, "
                   "the model writes a question per sampled passage (--sample N, default 10).")
@click.option("-m", "--mode", "modes", multiple=True, type=click.Choice(MODES),
              help="single_agent (default), back, multi_agent, code_execution; repeatable.")
@click.option("--vary-modes", is_flag=True, help="One mode per item, cycling through --mode (default: every mode).")
@click.option("-n", type=click.IntRange(1, 100_000), default=1, show_default=True, help="Samples per query.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the run (items, samplers, requests).")
@click.option("--domain", "domains", multiple=True, type=click.Choice(list(DOMAINS)),
              help="Seed-task taxonomy domain (repeatable); with --sample, which domains to draw from.")
@click.option("--sample", type=click.IntRange(1, 100_000), help="Draw N seed tasks from the taxonomy, evenly over domains.")
@click.option("--model", help="Any model string: local (embedded), openai/..., hosted_vllm/NAME with --api-base ...")
@click.option("--api-base", help="OpenAI-compatible endpoint (http://127.0.0.1:8000/v1).")
@click.option("--api-key-env", help="Environment variable holding the API key.")
@click.option("--temperature", type=click.FloatRange(0, 2), default=0.7, show_default=True)
@click.option("--max-turns", type=click.IntRange(1, 100), default=6, show_default=True)
@click.option("--judge", help="Semantic stage by a registered judge (e.g. heuristic, llm); default: a rubric prompt "
                              "to --model.")
@click.option("--judge-param", multiple=True, metavar="KEY=VALUE", help="A parameter of --judge (VALUE is YAML).")
@click.option("--judge-threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True)
@click.option("--no-semantic", is_flag=True, help="Skip the semantic stage.")
@click.option("--python-param", multiple=True, metavar="KEY=VALUE",
              help="A parameter of the code_execution world (environment 'python'), e.g. isolation=none.")
@click.option("-o", "--out", type=click.Path(path_type=Path, dir_okay=False), help="Accepted records (JSONL).")
@click.option("--rejected", type=click.Path(path_type=Path, dir_okay=False),
              help="Rejected records with their stage and reason (JSONL).")
@click.option("--per-role", is_flag=True, help="Write multi_agent records as one record per agent.")
@click.option("--budget-usd", type=click.FloatRange(min=0), help="Hard cap on LLM spend.")
@click.option("--budget-tokens", type=click.IntRange(min=0), help="Hard cap on LLM tokens.")
@click.option("--no-cache", is_flag=True, help="Do not use the LLM response cache.")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Items in flight; records are still written in item order, identical to a sequential run.")
@click.option("--item-timeout", type=click.FloatRange(min=0, min_open=True), default=900.0, show_default=True,
              help="Seconds to make one item (its world and model calls); a hung item fails, the run goes on.")
@click.option("--dedup", is_flag=True, help="Reject records repeating an earlier accepted one (request, calls, answer).")
@click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout).")
@click.option("--quiet", is_flag=True, help="No progress lines and no summary.")
@click.pass_context
def generate_command(ctx: click.Context, queries_: tuple[str, ...], queries: Path | None, tools: Path | None,
                     pack: str | None, world: str | None, docs: Path | None, modes: tuple[str, ...], vary_modes: bool, n: int, seed: int,
                     domains: tuple[str, ...], sample: int | None, model: str | None, api_base: str | None,
                     api_key_env: str | None, temperature: float, max_turns: int, judge: str | None,
                     judge_param: tuple[str, ...], judge_threshold: float, no_semantic: bool,
                     python_param: tuple[str, ...], out: Path | None, rejected: Path | None, per_role: bool,
                     budget_usd: float | None, budget_tokens: int | None, no_cache: bool, concurrency: int,
                     item_timeout: float, dedup: bool, json_path: str | None, quiet: bool) -> None:
    """Generate verified training trajectories (OpenAI/TRL chat messages with tool calls).

    From queries (-q, --queries), taxonomy samples (--sample, --domain) or a pack's tasks, with tools from
    a catalog (--tools: results simulated by the model, marked grounding: simulated) or a world (--pack,
    --world: every call executes for real in a fresh world per item). Each item passes format, execution,
    semantic and (for a pack's task) world checks, or is rejected with its stage and reason.
    Exit codes: 0 done, 2 bad input, 3 stopped by the budget, 4 some items failed (LLM or world errors).
    """
    from .spec import load_spec

    params: dict[str, Any] = {
        "model": model, "api_base": api_base, "api_key_env": api_key_env, "n": n, "seed": seed, "mode": list(modes),
        "vary_modes": vary_modes, "query": list(queries_), "queries": str(queries) if queries else None,
        "tools": str(tools) if tools else None, "pack": pack, "world": _world(world) if world else None,
        "docs": str(docs) if docs else None,
        "domain": list(domains), "sample": sample, "temperature": temperature, "max_turns": max_turns,
        "judge_threshold": judge_threshold, "semantic": not no_semantic, "per_role": per_role,
        "python_env": dict(_param(p, "--python-param") for p in python_param),
        "out": str(out) if out else None, "rejected": str(rejected) if rejected else None,
        "budget_usd": budget_usd, "budget_tokens": budget_tokens, "cache": not no_cache, "concurrency": concurrency,
        "dedup": dedup, "item_timeout": item_timeout,
    }
    if judge:
        params["judge"] = {"type": judge, **dict(_param(p, "--judge-param") for p in judge_param)}
    spec = load_spec({k: v for k, v in params.items() if v is not None}, "command line")
    code = run_spec(spec, base_dir=Path.cwd(), source="command line", json_path=json_path, quiet=quiet)
    sys.stdout.flush()
    ctx.exit(code)


def _client(model: str, api_base: str | None, api_key_env: str | None, no_cache: bool, seed: int = 0) -> Any:
    from agentsynth_kernel import LLMClient

    from .llm import Caller

    client = LLMClient(model=model, api_base=api_base, api_key_env=api_key_env, cache=not no_cache)
    return Caller(client, model, api_base=api_base, api_key_env=api_key_env, temperature=0.0, seed=seed)


def _judge(name: str | None, params: tuple[str, ...]) -> Any:
    if not name:
        return None
    from agentsynth_kernel import ComponentSpec, SpecError, build, check_component, get_host

    spec = ComponentSpec(name, dict(_param(p, "--judge-param") for p in params))
    problems = check_component("judge", spec, "judge", get_host())
    if problems:
        raise SpecError("command line", problems)
    return build("judge", spec, host=get_host())


def _emit(report: dict[str, Any], json_path: str | None) -> None:
    """The ``--json`` report ('-' for stdout) through the kernel's writer (streams, masks secrets)."""
    if json_path:
        from agentsynth_kernel import write_json

        write_json(_sorted(report), json_path)


def _sorted(value: Any) -> Any:
    """Keys in sorted order at every level, as the report has always been written."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_sorted(v) for v in value]
    return value


@click.command("eval")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--model", help="The grader for the four rubric dimensions (any model string; local = embedded).")
@click.option("--api-base", help="OpenAI-compatible endpoint.")
@click.option("--api-key-env", help="Environment variable holding the API key.")
@click.option("--judge", help="A registered judge instead of the rubric prompt (its dimensions are reported).")
@click.option("--judge-param", multiple=True, metavar="KEY=VALUE")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="A dimension below this is weak; a trajectory passes with no weak dimension.")
@click.option("-o", "--out", type=click.Path(path_type=Path, dir_okay=False), help="Scored rows (JSONL, an 'eval' key added).")
@click.option("--no-cache", is_flag=True)
@click.option("--json", "json_path", metavar="PATH", help="The report as JSON ('-' for stdout).")
@click.option("--quiet", is_flag=True)
@click.pass_context
def eval_command(ctx: click.Context, file: Path, model: str | None, api_base: str | None, api_key_env: str | None,
                 judge: str | None, judge_param: tuple[str, ...], threshold: float, out: Path | None, no_cache: bool,
                 json_path: str | None, quiet: bool) -> None:
    """Score the trajectories of FILE on six dimensions: task_completion, tool_selection, argument_validity,
    grounding, efficiency, communication (two computed from the calls, four by a rubric model or a judge).

    FILE: records of `agentsynth generate`, OpenAI/TRL chat records, or kernel EpisodeResults / Trajectories
    (JSONL or a JSON array). Exit codes: 0 done, 2 bad input, 4 some trajectories could not be scored.
    """
    from agentsynth_kernel import SpecError

    from .evaluate import evaluate

    judge_obj = _judge(judge, judge_param)
    if judge_obj is None and not model:
        raise SpecError("command line", ["--model: missing (the rubric grader), or give --judge NAME"])
    llm = _client(model, api_base, api_key_env, no_cache) if model else None

    async def go() -> dict[str, Any]:
        try:
            return await evaluate(file, llm=llm, judge=judge_obj, threshold=threshold, out=out,
                                  on_progress=None if quiet else (lambda line: click.echo(line, err=True)))
        finally:
            if llm is not None:
                await llm.client.aclose()

    report = asyncio.run(go())
    _emit(report, json_path)
    if not quiet and json_path != "-":
        click.echo(f"eval: {report['scored']}/{report['trajectories']} scored, {report['passed']} pass "
                   f"(threshold {threshold:g}); {report['llm_requests']} LLM requests")
        for dim, value in report["dimensions"].items():
            weak = report["failing_by_dimension"].get(dim, 0)
            click.echo(f"  {dim:<18} {value:.3f}" + (f"  ({weak} weak)" if weak else ""))
        for err in report["errors"][:5]:
            click.echo(f"  error: {err}")
    ctx.exit(4 if report["failed"] else 0)


@click.command("flywheel")
@click.option("--run", "run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="A run directory (bench/run --run-dir): its failed episodes are the targets.")
@click.option("--from", "source", type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="Records: eval output (weak dimensions), --rejected records (stage/reason), or trajectories "
                   "(scored first with --model).")
@click.option("--pack", help="The world to generate in (default for --run: the run's pack).")
@click.option("--tools", type=click.Path(path_type=Path, dir_okay=False), help="A catalog (default: the failing records' tools).")
@click.option("--model", required=True, help="The teacher (and grader) model.")
@click.option("--api-base")
@click.option("--api-key-env")
@click.option("-m", "--mode", "modes", multiple=True, type=click.Choice(MODES))
@click.option("-n", type=click.IntRange(1, 1000), default=2, show_default=True, help="New trajectories per target.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--max-targets", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True)
@click.option("--no-semantic", is_flag=True)
@click.option("-o", "--out", type=click.Path(path_type=Path, dir_okay=False), required=True, help="The new data (JSONL).")
@click.option("--no-cache", is_flag=True)
@click.option("--json", "json_path", metavar="PATH")
@click.option("--quiet", is_flag=True)
@click.pass_context
def flywheel_command(ctx: click.Context, run_dir: Path | None, source: Path | None, pack: str | None, tools: Path | None,
                     model: str, api_base: str | None, api_key_env: str | None, modes: tuple[str, ...], n: int, seed: int,
                     max_targets: int, threshold: float, no_semantic: bool, out: Path, no_cache: bool,
                     json_path: str | None, quiet: bool) -> None:
    """Failures -> data aimed at them: mine a run's failed episodes (by error kind / failing checker) or a
    file's weak dimensions / rejections, generate -n verified trajectories per target, write them to -o.

    Exit codes: 0 done, 2 bad input, 3 budget stop, 4 some items failed.
    """
    from agentsynth_kernel import SpecError, get_host

    from .catalog import load_tools
    from .core import GenerateConfig, Inputs, generate
    from .evaluate import evaluate
    from .flywheel import mine_file, mine_run

    if (run_dir is None) == (source is None):
        raise SpecError("command line", ["give --run RUN_DIR or --from FILE (one of them)"])
    if tools is not None and pack is not None:
        raise SpecError("command line", ["--tools: give a catalog or a world (--pack), not both"])
    host = get_host()
    progress = None if quiet else (lambda line: click.echo(line, err=True))
    report: dict[str, Any] = {}
    if run_dir is not None:
        mined = mine_run(run_dir, host, pack, max_targets)
    else:
        assert source is not None
        mined, needs_eval = mine_file(source, max_targets)
        if needs_eval:
            scored = out.with_suffix(".eval.jsonl")
            llm = _client(model, api_base, api_key_env, no_cache, seed)

            async def score() -> dict[str, Any]:
                try:
                    return await evaluate(source, llm=llm, threshold=threshold, out=scored, on_progress=progress)
                finally:
                    await llm.client.aclose()

            report["eval"] = asyncio.run(score())
            mined, _ = mine_file(scored, max_targets)
    report["mined"] = {"source": mined.source, "targets": len(mined.targets), "by_kind": mined.by_kind,
                       "by_dimension": mined.by_dimension}
    if not mined.targets:
        report["generate"] = None
        _emit(report, json_path)
        if not quiet and json_path != "-":
            click.echo("flywheel: no failures to aim at")
        ctx.exit(0)
    world = mined.pack
    if pack is not None and world is None:
        from agentsynth_kernel import load_pack

        world = load_pack(pack, host=host)
    catalog = load_tools(tools) if tools is not None else (mined.tools or None)
    if world is None and not catalog:
        raise SpecError("command line", ["no tools for the targets: give --tools FILE or --pack PACK"])
    config = GenerateConfig(model=model, api_base=api_base, api_key_env=api_key_env, n=n, seed=seed,
                            modes=list(modes) or ["single_agent"], semantic=not no_semantic, cache=not no_cache)
    inputs = Inputs(mined.targets, None if world is not None else catalog, world)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(generate(config, inputs, out=out, host=host, on_progress=progress))
    summary = result.to_dict()
    summary["grounding"] = "world" if world is not None else "simulated"
    report["generate"] = summary
    _emit(report, json_path)
    if not quiet and json_path != "-":
        kinds = ", ".join(f"{k} {v}" for k, v in {**mined.by_kind, **mined.by_dimension}.items())
        click.echo(f"flywheel: {len(mined.targets)} targets from {mined.source} ({kinds})")
        print_summary(summary)
    ctx.exit(3 if result.stopped else (4 if result.incomplete else 0))
