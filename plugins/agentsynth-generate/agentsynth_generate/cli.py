"""``agentsynth generate``: training trajectories from queries, a tool catalog or a world."""

from __future__ import annotations

import asyncio
import json
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
    summary["grounding"] = "world" if inputs.pack is not None else "simulated"
    if json_path:
        text = json.dumps(summary, indent=2, sort_keys=True)
        if json_path == "-":
            click.echo(text)
        else:
            Path(json_path).write_text(text + "\n", encoding="utf-8")
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
@click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout).")
@click.option("--quiet", is_flag=True, help="No progress lines and no summary.")
@click.pass_context
def generate_command(ctx: click.Context, queries_: tuple[str, ...], queries: Path | None, tools: Path | None,
                     pack: str | None, world: str | None, modes: tuple[str, ...], vary_modes: bool, n: int, seed: int,
                     domains: tuple[str, ...], sample: int | None, model: str | None, api_base: str | None,
                     api_key_env: str | None, temperature: float, max_turns: int, judge: str | None,
                     judge_param: tuple[str, ...], judge_threshold: float, no_semantic: bool,
                     python_param: tuple[str, ...], out: Path | None, rejected: Path | None, per_role: bool,
                     budget_usd: float | None, budget_tokens: int | None, no_cache: bool, json_path: str | None,
                     quiet: bool) -> None:
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
        "domain": list(domains), "sample": sample, "temperature": temperature, "max_turns": max_turns,
        "judge_threshold": judge_threshold, "semantic": not no_semantic, "per_role": per_role,
        "python_env": dict(_param(p, "--python-param") for p in python_param),
        "out": str(out) if out else None, "rejected": str(rejected) if rejected else None,
        "budget_usd": budget_usd, "budget_tokens": budget_tokens, "cache": not no_cache,
    }
    if judge:
        params["judge"] = {"type": judge, **dict(_param(p, "--judge-param") for p in judge_param)}
    spec = load_spec({k: v for k, v in params.items() if v is not None}, "command line")
    code = run_spec(spec, base_dir=Path.cwd(), source="command line", json_path=json_path, quiet=quiet)
    sys.stdout.flush()
    ctx.exit(code)
