"""``agentsynth synth SOURCE --generator NAME ...``: run a generator from the command line."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

GENERATOR_NAMES = ("forward", "back_translation", "replay_filter", "challenger", "evolve", "from_failures")


def _parse_param(text: str) -> tuple[str, Any]:
    import yaml

    from agentsynth_kernel import SpecError

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SpecError("-p", [f"{text!r}: expected KEY=VALUE (VALUE is YAML: 3, true, [a, b], {{type: llm}})"])
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError as exc:
        raise SpecError("-p", [f"{key}: invalid YAML value: {exc}"]) from None


def _source(ref: str) -> tuple[Any, Any, Path, Any]:
    """(pack, run spec or None, base dir, the spec's ``generate:`` or None): SOURCE is a pack (name,
    directory, pack.yaml) or a run spec. A run spec may carry ``generate: {type: NAME, ...}``; it is
    taken out here (the kernel's run spec schema has no such key yet)."""
    from agentsynth_kernel import RunSpec, get_host, load_pack, read_yaml, resolve_run, structure

    path = Path(ref)
    if path.is_file() and path.suffix in (".yaml", ".yml") and path.name != "pack.yaml":
        data = read_yaml(path)
        if isinstance(data, dict) and ("policy" in data or "generate" in data):
            data = dict(data)
            generate = data.pop("generate", None)
            data.setdefault("policy", "noop")
            spec = structure(data, RunSpec, source=str(path))
            spec, pack = resolve_run(spec, base_dir=path.parent, source=str(path), host=get_host())
            return pack, spec, path.parent.resolve(), generate
    pack = load_pack(ref)
    return pack, None, Path.cwd(), None


def explain(name: str) -> str:
    """A generator's description and parameters (name, type, default), from its spec class."""
    import attrs

    from .api import GENERATORS

    cls, spec_cls, description = GENERATORS[name]
    lines = [f"{name}: {description}", ""]
    doc = (__import__(cls.__module__, fromlist=["_"]).__doc__ or "").strip()
    if doc:
        lines += [doc, ""]
    lines.append("parameters (-p KEY=VALUE or --config FILE):")
    for field in attrs.fields(spec_cls):
        if field.default is attrs.NOTHING:
            default = "required"
        elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            default = f"default {field.default.factory()!r}"
        else:
            default = f"default {field.default!r}"
        kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
        lines.append(f"  {field.name}: {kind} ({default})")
    return "\n".join(lines)


@click.command("synth")
@click.argument("source", metavar="PACK|RUN_SPEC", required=False)
@click.option("-g", "--generator", "name", type=click.Choice(GENERATOR_NAMES),
              help="Which generator to run (default: the run spec's 'generate: {type: ...}').")
@click.option("--explain", "explain_", is_flag=True, help="Describe the generator and its parameters, then exit.")
@click.option("--config", "config", type=click.Path(path_type=Path, dir_okay=False),
              help="YAML with the generator's parameters ({type: NAME, ...} or a 'generator:' mapping).")
@click.option("-p", "--param", "params", multiple=True, metavar="KEY=VALUE",
              help="A generator parameter (VALUE is YAML); repeatable, overrides --config.")
@click.option("-o", "--out", type=click.Path(path_type=Path),
              help="Write the result: a pack directory (new tasks) or a JSONL file (trajectories).")
@click.option("--run-dir", type=click.Path(path_type=Path, file_okay=False),
              help="Durable store of accepted items (default runs/<time>-synth-NAME); rerun to resume.")
@click.option("--seed", type=int, help="Seed (default: the run spec's, else 0).")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              help="Items in flight (each item runs to its end before a new one starts).")
@click.option("--limit", type=click.IntRange(min=1), help="Do at most this many items.")
@click.option("--budget-usd", type=click.FloatRange(min=0), help="Hard cap on LLM spend (USD).")
@click.option("--budget-tokens", type=click.IntRange(min=0), help="Hard cap on LLM tokens.")
@click.option("--no-cache", is_flag=True, help="Do not use the LLM response cache.")
@click.option("--max-steps", type=click.IntRange(min=1), help="Steps per episode (default: the run spec's, else 30).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds per episode.")
@click.option("--validate/--no-validate", default=None,
              help="Run `pack validate` on the written pack (default: on for new tasks).")
@click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout).")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary.")
@click.pass_context
def synth(ctx: click.Context, source: str | None, name: str | None, explain_: bool, config: Path | None, params: tuple[str, ...],
          out: Path | None, run_dir: Path | None, seed: int | None, concurrency: int, limit: int | None,
          budget_usd: float | None, budget_tokens: int | None, no_cache: bool, max_steps: int | None,
          timeout: float | None, validate: bool | None, json_path: str | None, quiet: bool) -> None:
    """Synthesise outcome-verified tasks or trajectories from PACK (a name or path) or RUN_SPEC.

    Accepted items stream into the run directory's store as they are verified; a budget stop
    or a kill leaves only complete items, and rerunning with the same --run-dir continues.
    New tasks (back_translation, challenger, evolve, from_failures) are written with -o as a
    pack that `agentsynth pack validate` checks; trajectories (forward, replay_filter) as JSONL.
    Exit codes: 0 done, 1 the written pack fails validation, 2 bad input, 3 stopped by the budget,
    4 some items could not be finished (the LLM provider failed; rerun to retry them).
    """
    from agentsynth_kernel import SpecError, read_yaml

    from .api import make_generator, write_output
    from .core import SynthContext, synthesize

    if explain_:
        if name is None:
            raise click.UsageError("--explain needs -g NAME")
        click.echo(explain(name))
        return
    if source is None:
        raise click.UsageError("missing argument PACK|RUN_SPEC")
    pack, run_spec, base_dir, generate = _source(source)
    data: dict[str, Any] = {}
    where = "-p"
    if generate is not None:
        if isinstance(generate, str):
            generate = {"type": generate}
        if not isinstance(generate, dict) or not isinstance(generate.get("type"), str):
            raise SpecError(source, ["generate: expected a mapping with 'type:' (a generator name)"])
        if name is not None and generate["type"] != name:
            raise SpecError(source, [f"generate.type: the spec configures {generate['type']!r}, not {name!r}"])
        name = generate["type"]
        if name not in GENERATOR_NAMES:
            from agentsynth_kernel import did_you_mean

            raise SpecError(source, [f"generate.type: no generator {name!r}{did_you_mean(name, GENERATOR_NAMES)}"])
        data = {k: v for k, v in generate.items() if k != "type"}
        where = f"{source} (generate:)"
    if name is None and config is not None:  # --config FILE with {type: NAME, ...} names the generator
        peek = read_yaml(config)
        peek = peek.get("generator", peek) if isinstance(peek, dict) else peek
        if isinstance(peek, dict) and peek.get("type") in GENERATOR_NAMES:
            name = peek["type"]
    if name is None:
        raise click.UsageError("give -g NAME (or --config FILE / a run spec with 'generate: {type: NAME, ...}')")
    if config is not None:
        where = str(config)
        raw = read_yaml(config)
        if isinstance(raw, dict) and isinstance(raw.get("generator"), dict):
            raw = raw["generator"]
        if not isinstance(raw, dict):
            raise SpecError(str(config), ["expected a mapping of generator parameters"])
        if raw.get("type", name) != name:
            raise SpecError(str(config), [f"type: this file configures {raw['type']!r}, not {name!r}"])
        data = {**data, **{k: v for k, v in raw.items() if k != "type"}}
        base_dir = config.parent.resolve()
    for text in params:
        key, value = _parse_param(text)
        data[key] = value
    if run_spec is not None and run_spec.policy.type != "noop":  # the spec's policy: default teacher / strong solver
        default = run_spec.policy.to_dict()
        if name == "forward":
            data.setdefault("teachers", [default])
        elif name in ("challenger", "evolve", "from_failures") and run_spec.policy.type not in ("oracle", "noop"):
            data.setdefault("strong", [default])
    generator = make_generator(name, data, base_dir=base_dir, source=where)
    spec_seed = run_spec.seed if run_spec is not None else 0
    budget = run_spec.budget if run_spec is not None else None
    run_dir = run_dir or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-synth-{name}"
    sctx = SynthContext(
        pack, seed=spec_seed if seed is None else seed,
        budget_usd=budget_usd if budget_usd is not None else getattr(budget, "usd", None),
        budget_tokens=budget_tokens if budget_tokens is not None else getattr(budget, "tokens", None),
        cache=not no_cache, max_steps=max_steps or (run_spec.max_steps if run_spec else 30),
        timeout=timeout or (run_spec.timeout if run_spec else 120.0), run_dir=run_dir, name=name)
    progress = None if quiet or not sys.stderr.isatty() else Progress(name)

    async def go() -> Any:
        try:
            return await synthesize(generator, sctx, run_dir=run_dir, concurrency=concurrency, limit=limit,
                                    params=data, on_progress=progress.update if progress else None)
        finally:
            await sctx.llm_client.aclose()

    import asyncio

    if progress is not None:
        with progress.live:
            report = asyncio.run(go())
    else:
        report = asyncio.run(go())
    summary = report.to_dict()
    summary["run_dir"] = str(run_dir)
    written = write_output(report, generator, pack, out) if out is not None else None
    summary["output"] = str(written) if written else None
    code = 3 if report.stopped else (4 if report.incomplete else 0)
    if written is not None and generator.makes_tasks and validate is not False:
        from agentsynth_kernel import validate_pack

        _, gates = validate_pack(written.parent)
        summary["validation"] = {g.name: g.status for g in gates}
        summary["validation_problems"] = [p for g in gates for p in g.problems]
        if any(g.status == "fail" for g in gates):
            code = code or 1
    if json_path:  # the kernel's report writer: streams, masks secrets, '-' is stdout
        from agentsynth_kernel import write_json

        write_json(summary, json_path)
    if not quiet and json_path != "-":
        _print_summary(summary)
    ctx.exit(code)


def _print_summary(s: dict[str, Any]) -> None:
    per = s["llm_requests_per_accepted"]
    click.echo(f"{s['generator']}: {s['accepted']} accepted from {s['done_items'] + s['restored_items']}/"
               f"{s['planned_items']} items ({s['restored_items']} restored); LLM requests {s['llm_requests']} "
               f"({'n/a' if per is None else f'{per:.1f}'} per accepted item)")
    for reason, n in s["rejected"].items():
        click.echo(f"  rejected {reason}: {n}")
    if s["incomplete_items"]:
        click.echo(f"  {s['incomplete_items']} item(s) not finished (provider errors): rerun with --run-dir "
                   f"{s['run_dir']} to retry them")
    for err in s["errors"][:5]:
        click.echo(f"  error: {err}")
    if s["stopped"]:
        click.echo(f"stopped: {s['stopped']} (complete items are stored; rerun with --run-dir {s['run_dir']} "
                   "and a larger budget to continue)")
    if s.get("output"):
        click.echo(f"wrote {s['output']}")
    if "validation" in s:
        ok = all(v != "fail" for v in s["validation"].values())
        click.echo("pack validate: " + ("all gates pass" if ok else "FAILED"))
        for problem in s["validation_problems"][:10]:
            click.echo(f"  {problem}")
    click.echo(f"run directory: {s['run_dir']}")


class Progress:
    """A rich progress bar on stderr: items done, accepted, rejected, in flight, LLM requests."""

    def __init__(self, title: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self.live = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[tally]}"), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
        self.bar = self.live.add_task(f"synth {title}", total=None, tally="")
        self.accepted = self.rejected = self.in_flight = self.requests = self.incomplete = 0

    def update(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "start":
            self.in_flight += 1
        else:
            self.incomplete += kind == "incomplete"
            self.in_flight = max(0, self.in_flight - 1)
        if kind == "done":
            self.accepted += len(data["accepted"])
            self.rejected += len(data["rejected"])
            self.requests += data["requests"]
            report = data["report"]
            self.live.update(self.bar, total=report.planned, completed=report.done_items + report.restored_items)
        tally = (f"[green]✓{self.accepted}[/] [red]✗{self.rejected}[/] ⟳{self.in_flight} "
                 f"LLM {self.requests}" + (f" [yellow]!{self.incomplete}[/]" if self.incomplete else ""))
        self.live.update(self.bar, tally=tally)
