"""``agentsynth run SPEC`` for ``generate: {type: autosynth, ...}``: build the domain, open the run
directory, run the loop, write the JSONL and the report. Exit codes: 0 done, 2 bad input, 3 stopped
by the budget, 4 some items failed (provider errors; rerun with the same --run-dir to retry them)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

from agentsynth_kernel import AgentsynthError, SpecError

from .loop import Report, accepted_records, make_client, run_loop, write_jsonl
from .settings import Settings, parse_settings

PATH_PARAMS = ("path",)


def load_domain_file(path: Path, source: str) -> Any:
    """A domain from a Python file (what ``agentsynth init-domain`` writes): its ``DOMAIN`` factory."""
    if not path.is_file():
        raise SpecError(source, [f"generate.domain: {path}: no such file"])
    spec = importlib.util.spec_from_file_location(f"agentsynth_domain_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SpecError(source, [f"generate.domain: {path}: not a Python module"])
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise SpecError(source, [f"generate.domain: {path}: failed to import: {type(exc).__name__}: {exc}"]) from None
    factory = getattr(module, "DOMAIN", None)
    if not callable(factory):
        raise SpecError(source, [f"generate.domain: {path}: expected a module-level DOMAIN (the domain class)"])
    return factory


def build_domain(settings: Settings, *, source: str, host: Any = None) -> Any:
    from agentsynth_kernel import Domain, get_host

    base = Path(settings.base_dir)
    params = dict(settings.domain_params)
    for key in PATH_PARAMS:
        if isinstance(params.get(key), str) and not Path(params[key]).is_absolute():
            params[key] = str(base / params[key])
    if settings.domain.endswith(".py"):
        file = Path(settings.domain)
        factory = load_domain_file(file if file.is_absolute() else base / file, source)
    else:
        try:
            factory = (host or get_host()).get("domain", settings.domain).factory
        except KeyError as exc:
            raise SpecError(source, [f"generate.domain: {exc.args[0]}"]) from None
    try:
        domain = factory(**params)
    except TypeError as exc:
        raise SpecError(source, [f"generate.domain: {settings.domain}: bad parameters: {exc}"]) from None
    except AgentsynthError as exc:
        raise SpecError(source, [f"generate.domain: {exc}"]) from None
    if not isinstance(domain, Domain):
        missing = [m for m in ("acceptance", "items", "generation_prompt", "validate", "solver_prompt",
                               "audit_prompt", "judge_prompt", "verify") if not hasattr(domain, m)]
        raise SpecError(source, [f"generate.domain: {settings.domain}: not a Domain (missing {', '.join(missing)})"])
    return domain


def load_settings(spec_file: Path, spec: Any) -> Settings:
    params = dict(spec.generate.params)
    return parse_settings(params, source=str(spec_file), base_dir=Path(spec_file).resolve().parent)


def execute(spec_file: Path, spec: Any, run_dir: Path | None, *, quiet: bool = False) -> tuple[int, Report]:
    """Run the generation; returns (exit code, report). Raises SpecError / AgentsynthError on bad input."""
    from agentsynth_kernel import open_run_store

    settings = load_settings(spec_file, spec)
    domain = build_domain(settings, source=str(spec_file))
    if run_dir is None:
        run_dir = Path(spec.run_dir) if spec.run_dir else Path("runs") / (
            f"{time.strftime('%Y%m%d-%H%M%S')}-autosynth-{Path(settings.domain).stem}")
    store = open_run_store(run_dir)
    try:
        client = make_client(settings, store, spec.budget)
        progress = None if quiet or not sys.stderr.isatty() else _progress

        async def go() -> Report:
            try:
                return await run_loop(settings, domain, client=client, store=store, on_progress=progress)
            finally:
                await client.aclose()

        report = asyncio.run(go())
        out = Path(settings.out) if settings.out else run_dir / "accepted.jsonl"
        if settings.out and not out.is_absolute():
            out = Path(settings.base_dir) / out
        write_jsonl(accepted_records(store), out)
        report.output, report.run_dir = str(out), str(run_dir)
        store.set_meta("autosynth_report", report.to_dict())
    finally:
        store.close()
    code = 3 if report.stopped else (4 if report.failed else 0)
    return code, report


def _progress(kind: str, data: dict[str, Any]) -> None:
    if kind == "item":
        r = data["report"]
        print(f"\r{r.done + r.restored}/{r.planned} items · accepted {r.accepted} · requests {r.requests}",
              end="", file=sys.stderr, flush=True)


def print_summary(report: Report) -> None:
    d = report.to_dict()
    per = d["llm_requests_per_accepted"]
    print(f"autosynth ({d['domain']}, {d['acceptance']}): {d['accepted']} accepted from "
          f"{d['done_items'] + d['restored_items']}/{d['planned_items']} items ({d['restored_items']} restored); "
          f"LLM requests {d['llm_requests']} ({'n/a' if per is None else per} per accepted item)")
    for reason, n in d["rejected"].items():
        print(f"  rejected {reason}: {n}")
    for err in d["errors"][:5]:
        print(f"  failed: {err}")
    if d["stopped"]:
        print(f"stopped: {d['stopped']} (rerun with --run-dir {d['run_dir']} and a larger budget to continue)")
    print(f"wrote {d['output']}\nrun directory: {d['run_dir']}")


def run_generation(spec_file: Path, spec: Any, run_dir: Path | None, json_path: str | None, quiet: bool) -> int:
    code, report = execute(Path(spec_file), spec, run_dir, quiet=quiet or json_path == "-")
    if json_path:
        text = json.dumps(report.to_dict(), indent=2)
        if json_path == "-":
            print(text)
        else:
            Path(json_path).write_text(text + "\n", encoding="utf-8")
    if not quiet and json_path != "-":
        print_summary(report)
    return code
