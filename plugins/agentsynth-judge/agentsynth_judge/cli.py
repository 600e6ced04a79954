"""``agentsynth judge ...``: calibrate a judge on a run, score a run, make preference pairs, check a rubric,
train a learned verifier (``train``, ``verifier``) and route a run between it and a judge (``route``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click


def _judge_from_options(judge: str | None, judge_spec: Path | None, run_spec: dict[str, Any]) -> tuple[Any, str]:
    """Build the judge named on the command line, or the run's own judge, or ``heuristic``."""
    from agentsynth_kernel import (
        ComponentSpec,
        SpecError,
        build,
        check_component,
        get_host,
        read_yaml,
        structure,
    )

    base_dir = Path.cwd()
    source = "--judge"
    if judge_spec is not None:
        source = str(judge_spec)
        data = read_yaml(judge_spec)
        data = data.get("judge", data) if isinstance(data, dict) and "type" not in data else data
        base_dir = judge_spec.parent.resolve()
    elif judge is not None:
        data = judge
    elif run_spec.get("judge"):
        data, source = run_spec["judge"], "the run's spec (judge:)"
    else:
        data = "heuristic"
    cspec = structure(data, ComponentSpec, source=source, prefix="judge")
    problems = check_component("judge", cspec, "judge", get_host())
    if problems:
        raise SpecError(source, problems)
    label = cspec.type + (f" ({cspec.params['model']})" if "model" in cspec.params else "")
    return build("judge", cspec, base_dir=base_dir), label


def _uses_local_model(judge_obj: Any) -> bool:
    """A judge (or an ensemble member) on a ``local`` model: the embedded server decodes one request at
    a time, so more in flight only queue (and count against the client's timeout)."""
    members = getattr(judge_obj, "judges", None) or []
    model = getattr(judge_obj, "model", "")
    return (isinstance(model, str) and (model == "local" or model.startswith("local/"))) or any(
        _uses_local_model(m) for m in members if m is not judge_obj)


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


@click.group()
def judge() -> None:
    """Rubric judges: calibrate against world-state verdicts, make preference pairs, check rubrics,
    train a learned verifier and route items between it and a judge."""


@judge.command()
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--judge", "judge_name", metavar="TYPE", help="Judge to calibrate (default: the run's judge, else heuristic).")
@click.option("--judge-spec", type=click.Path(path_type=Path), help="YAML file with the judge spec ({type: llm, model: ...}).")
@click.option("--with-verdicts", is_flag=True, help="Let the judge see the checkers' verdicts (default: blind).")
@click.option("--stored", is_flag=True, help="Use the judge scores stored in the run instead of re-scoring.")
@click.option("--threshold", type=click.FloatRange(0, 1), help="Pass threshold on the judge score (default: the judge's).")
@click.option("--episodes", is_flag=True, help="Include per-episode judgements in the JSON report.")
@click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout).")
def calibrate(run_dirs: tuple[Path, ...], judge_name: str | None, judge_spec: Path | None, with_verdicts: bool,
              stored: bool, threshold: float | None, episodes: bool, json_path: str | None) -> None:
    """How well a judge's pass/fail agrees with the world-state verdicts of one or more runs.

    Every passed/failed episode is a labelled example (the checkers read the world's
    end state). The judge re-scores each stored trajectory blind (without the verdicts)
    unless --with-verdicts or --stored. Reports accuracy, Cohen's kappa, the confusion
    matrix (judge vs world), precision, recall and the rank AUC of the judge's scores.
    Give several run directories (e.g. a strong and a weak policy) to calibrate on both.
    """
    from .calibrate import calibrate_results, read_run

    results = []
    run_spec: dict[str, Any] = {}
    for i, run_dir in enumerate(run_dirs):
        found, spec = read_run(run_dir)
        results += found
        if i == 0:
            run_spec = spec
    judge_obj, label = (None, "stored") if stored else _judge_from_options(judge_name, judge_spec, run_spec)
    report = asyncio.run(calibrate_results(results, judge_obj, judge_name=label, with_verdicts=with_verdicts,
                                           stored=stored, threshold=threshold))
    data = report.to_dict(episodes=episodes)
    data["run_dirs"] = [str(d) for d in run_dirs]
    data["blind"] = not (with_verdicts or stored)
    if json_path:
        text = json.dumps(data, indent=2)
        if json_path == "-":
            click.echo(text)
            return
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(text + "\n", encoding="utf-8")
    c = report.confusion
    where = ", ".join(str(d) for d in run_dirs)
    click.echo(f"judge {label} on {where}: {c.n} episodes"
               + (f" ({report.skipped} skipped: errors or no trajectory)" if report.skipped else "")
               + ("" if data["blind"] else " [judge saw the verdicts]"))
    if c.n == 0:
        click.echo("no passed/failed episodes to calibrate on")
        return
    click.echo(f"  accuracy  {_fmt(data['accuracy'])}   Cohen's kappa {_fmt(data['kappa'])}   AUC {_fmt(data['auc'])}")
    click.echo(f"  precision {_fmt(data['precision'])}   recall {_fmt(data['recall'])}")
    click.echo("  confusion        world pass  world fail")
    click.echo(f"    judge pass     {c.tp:>10}  {c.fp:>10}")
    click.echo(f"    judge fail     {c.fn:>10}  {c.tn:>10}")
    if report.members:
        agreement = report.agreement or {}
        click.echo(f"  ensemble members (agreement {_fmt(agreement.get('percent_agreement'))}, "
                   f"Fleiss' kappa {_fmt(agreement.get('fleiss_kappa'))}):")
        for member in report.members:
            click.echo(f"    {member['judge']:<40} accuracy {_fmt(member['accuracy'])}  kappa {_fmt(member['kappa'])}")


@judge.command()
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="JSONL file of DPO rows.")
@click.option("--judge", "judge_name", metavar="TYPE", help="Judge for same-outcome pairs (default: outcome pairs only).")
@click.option("--judge-spec", type=click.Path(path_type=Path), help="YAML file with the judge spec.")
@click.option("--min-margin", type=float, default=0.0, show_default=True, help="Drop judge pairs with a smaller margin.")
@click.option("--max-pairs", type=click.IntRange(min=1), default=4, show_default=True, help="Pairs per task at most.")
@click.option("--no-swap", is_flag=True, help="Ask a pairwise judge once (shuffled order) instead of in both orders.")
def pairs(run_dirs: tuple[Path, ...], output: Path, judge_name: str | None, judge_spec: Path | None, min_margin: float,
          max_pairs: int, no_swap: bool) -> None:
    """DPO preference pairs from one or more runs of the same pack: for each task, a passed episode
    over a failed one (the world decides), then swap-consistent judge preferences between
    episodes with the same outcome."""
    from .calibrate import read_run
    from .pairwise import preference_pairs

    results = [r for run_dir in run_dirs for r in read_run(run_dir)[0]]
    judge_obj = None
    if judge_name or judge_spec:
        judge_obj, _label = _judge_from_options(judge_name, judge_spec, {})
    made = asyncio.run(preference_pairs(results, judge_obj, swap=not no_swap, min_margin=min_margin,
                                        max_pairs_per_task=max_pairs))
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as fp:
        for pair in made:
            fp.write(json.dumps(pair.to_dpo(), default=str) + "\n")
    by_source: dict[str, int] = {}
    for pair in made:
        by_source[pair.source] = by_source.get(pair.source, 0) + 1
    detail = ", ".join(f"{n} {s}" for s, n in sorted(by_source.items())) or "none"
    click.echo(f"{len(made)} pairs ({detail}) -> {output}")


@judge.command()
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="JSONL file, one line per episode.")
@click.option("--judge", "judge_name", metavar="TYPE", help="Judge to use (default: the run's judge, else heuristic).")
@click.option("--judge-spec", type=click.Path(path_type=Path), help="YAML file with the judge spec.")
@click.option("--blind", is_flag=True, help="Do not show the checkers' verdicts to the judge.")
@click.option("--concurrency", type=click.IntRange(min=1),
              help="Judgements in flight (default 8; 1 for a judge on a local model, which answers one at a time).")
def score(run_dirs: tuple[Path, ...], output: Path, judge_name: str | None, judge_spec: Path | None, blind: bool,
          concurrency: int | None) -> None:
    """Score the stored trajectories of one or more runs with a judge (no episode is re-run).

    Rows are written to OUTPUT as they come (an interrupted command keeps what it scored) and
    progress goes to stderr. A trajectory the judge fails on gets a row with ``error`` and does
    not stop the others; the exit code is 1 only when nothing could be scored (or the budget ran out).
    """
    from agentsynth_kernel import BudgetExceeded, call

    from .calibrate import read_run
    from .reward import compute_reward

    results: list[Any] = []
    run_spec: dict[str, Any] = {}
    for i, run_dir in enumerate(run_dirs):
        found, spec = read_run(run_dir)
        results += [r for r in found if r.trajectory is not None]
        run_spec = spec if i == 0 else run_spec
    judge_obj, label = _judge_from_options(judge_name, judge_spec, run_spec)
    if concurrency is None:
        concurrency = 1 if _uses_local_model(judge_obj) else 8
    weights = getattr(judge_obj, "reward_weights", None)
    total = len(results)
    tally = {"done": 0, "failed": 0, "passed": 0, "score": 0.0}

    def row_for(result: Any, res: Any) -> dict[str, Any]:
        row = {"task_id": result.task_id, "trial": result.trial, "seed": result.seed, "status": result.status,
               "judge": label, "score": res.score, "passed": res.passed, "dimensions": res.dimensions,
               "rationale": res.rationale}
        if "reward" not in res.dimensions and weights is not None:
            row["reward"] = compute_reward(result.verdicts, res.score, weights).reward
        if res.usage is not None:
            row["usage"] = {"prompt_tokens": res.usage.prompt_tokens, "completion_tokens": res.usage.completion_tokens,
                            "cost_usd": res.usage.cost_usd, "requests": res.usage.requests}
        return row

    async def one(result: Any, gate: asyncio.Semaphore, fp: Any) -> None:
        async with gate:
            verdicts = [] if blind else list(result.verdicts)
            try:
                res = await call(judge_obj.score, result.trajectory, verdicts)
            except BudgetExceeded:
                raise
            except Exception as exc:  # one bad trajectory or reply: recorded, the others go on
                row = {"task_id": result.task_id, "trial": result.trial, "seed": result.seed, "status": result.status,
                       "judge": label, "score": None, "passed": None, "error": f"{type(exc).__name__}: {exc}"}
                tally["failed"] += 1
                note = f"error: {row['error'][:200]}"
            else:
                row = row_for(result, res)
                tally["score"] += res.score
                tally["passed"] += bool(res.passed)
                note = f"score {res.score:.3f}"
        fp.write(json.dumps(row, default=str) + "\n")
        fp.flush()
        tally["done"] += 1
        click.echo(f"judge score [{tally['done']}/{total}] {result.task_id} (trial {result.trial}): {note}", err=True)

    async def run_all(fp: Any) -> None:
        gate = asyncio.Semaphore(concurrency)
        await asyncio.gather(*(one(r, gate, fp) for r in results))

    output.parent.mkdir(parents=True, exist_ok=True)
    stopped = ""
    with output.open("w", encoding="utf-8") as fp:
        try:
            asyncio.run(run_all(fp))
        except BudgetExceeded as exc:
            stopped = f"stopped: {exc}"
    scored = tally["done"] - tally["failed"]
    mean = tally["score"] / scored if scored else 0.0
    failed = f", {tally['failed']} failed (rows with 'error')" if tally["failed"] else ""
    click.echo(f"judge {label}: {scored} of {total} trajectories scored{failed}, mean score {mean:.3f}, "
               f"{tally['passed']} passed -> {output}")
    if stopped:
        click.echo(stopped, err=True)
    if stopped or (total and not scored):
        raise SystemExit(1)


@judge.command()
@click.argument("rubric_file", type=click.Path(path_type=Path))
def rubric(rubric_file: Path) -> None:
    """Validate a rubric YAML file and show its normalised weights."""
    from .rubric import load_rubric

    r = load_rubric(rubric_file)
    click.echo(f"rubric {r.name!r}: {len(r.dimensions)} dimensions, pass threshold {r.pass_threshold:g}")
    for name, weight in r.weights().items():
        click.echo(f"  {name:<20} {weight:.3f}")


def _read_runs(run_dirs: Sequence[Path]) -> tuple[list[tuple[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(run_dir, episode) pairs, each run's identity and the first run's spec; a bad directory is an error
    naming it."""
    from .calibrate import read_run
    from .learned import run_info

    pairs: list[tuple[str, Any]] = []
    infos: list[dict[str, Any]] = []
    first: dict[str, Any] = {}
    for i, run_dir in enumerate(run_dirs):
        info = run_info(run_dir)
        found, spec = read_run(run_dir)
        info["episodes"] = len(found)
        infos.append(info)
        pairs += [(str(run_dir), r) for r in found]
        first = spec if i == 0 else first
    return pairs, infos, first


def _write_json(json_path: str, data: Any) -> None:
    text = json.dumps(data, indent=2, default=str)
    if json_path == "-":
        click.echo(text)
        return
    Path(json_path).parent.mkdir(parents=True, exist_ok=True)
    Path(json_path).write_text(text + "\n", encoding="utf-8")


def _judge_arg(spec: str, run_spec: dict[str, Any]) -> tuple[Any, str]:
    """A judge named by a type (``heuristic``) or a YAML file (``judge.yaml``)."""
    path = Path(spec)
    if spec.endswith((".yaml", ".yml")) or path.is_file():
        return _judge_from_options(None, path, run_spec)
    return _judge_from_options(spec, None, run_spec)


@judge.command()
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--labels", default="verdicts", show_default=True, metavar="verdicts|judge|judge:NAME",
              help="What a trajectory's label is: the world's verdict, the run's stored judge scores, or a judge "
                   "(type or YAML file) that scores every trajectory now.")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The verifier file to write.")
@click.option("--label-threshold", type=click.FloatRange(0, 1), help="Pass threshold on a judge's score (default: "
              "the judge's own pass/fail).")
@click.option("--with-verdicts", is_flag=True, help="A labelling judge sees the verdicts (default: blind).")
@click.option("--test-size", type=click.FloatRange(0.05, 0.5), default=0.25, show_default=True,
              help="Share of the episodes held out for the report.")
@click.option("--calibration", type=click.Choice(["auto", "sigmoid", "isotonic"]), default="auto", show_default=True,
              help="How probabilities are calibrated (auto: isotonic from 50 training episodes of each class, else sigmoid).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split and the folds.")
@click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout).")
def train(run_dirs: tuple[Path, ...], labels: str, output: Path, label_threshold: float | None, with_verdicts: bool,
          test_size: float, calibration: str, seed: int, json_path: str | None) -> None:
    """Train a learned verifier on the trajectories of one or more runs.

    A small calibrated classifier (scikit-learn) predicts P(pass) from the trajectory alone (tool
    calls, errors, the answer's words; never the stored verdicts). The report gives the held-out
    Brier score, agreement, ROC AUC and calibration error; the file keeps the training runs' hashes,
    the label source, the feature and library versions and the model's content hash.
    """
    from .learned import label_examples, parse_labels, report_lines, train_verifier

    kind, name = parse_labels(labels)
    pairs, infos, run_spec = _read_runs(run_dirs)
    judge_obj, source = None, "verdicts" if kind == "verdicts" else "judge (stored scores)"
    if name is not None:
        judge_obj, label = _judge_arg(name, run_spec)
        source = f"judge:{label}" + (" (saw the verdicts)" if with_verdicts else "")
    concurrency = 1 if judge_obj is not None and _uses_local_model(judge_obj) else 8
    examples, skipped = asyncio.run(label_examples(pairs, kind, judge_obj, threshold=label_threshold,
                                                   with_verdicts=with_verdicts, concurrency=concurrency))
    if not examples:
        why = ", ".join(f"{n} {w}" for w, n in sorted(skipped.items())) or "no episodes"
        from .learned import VerifierError

        raise VerifierError(f"{', '.join(map(str, run_dirs))}: no labelled episodes ({labels}): {why}")
    verifier, report = train_verifier(examples, label_source=source, runs=infos, test_size=test_size, seed=seed,
                                      calibration=calibration, label_threshold=label_threshold)
    report["skipped"] = skipped
    verifier.save(output)
    report["verifier"] = str(output)
    report["model_sha256"] = verifier.provenance["model_sha256"]
    if json_path:
        _write_json(json_path, report)
        if json_path == "-":
            return
    click.echo(f"verifier ({source}) on {', '.join(map(str, run_dirs))} -> {output}")
    for line in report_lines(report):
        click.echo(line)
    if skipped:
        click.echo("  skipped: " + ", ".join(f"{n} {w}" for w, n in sorted(skipped.items())))


@judge.command("verifier")
@click.argument("verifier_file", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the whole provenance as JSON.")
def verifier_info(verifier_file: Path, as_json: bool) -> None:
    """Show a verifier file's provenance (checked: format, feature version, content hash)."""
    from .learned import describe, read_provenance, report_lines

    prov, _ = read_provenance(verifier_file)
    if as_json:
        click.echo(json.dumps(prov, indent=2, default=str))
        return
    click.echo(describe(prov))
    for line in report_lines(prov["report"]):
        click.echo(line)


@judge.command()
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--verifier", "verifier_file", type=click.Path(path_type=Path), required=True,
              help="A verifier file made by 'agentsynth judge train'.")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="JSONL file, one row per episode.")
@click.option("--accept-above", type=click.FloatRange(0, 1), default=0.9, show_default=True,
              help="Accept without the judge when P(pass) is at least this.")
@click.option("--drop-below", type=click.FloatRange(0, 1), default=0.1, show_default=True,
              help="Drop without the judge when P(pass) is at most this.")
@click.option("--judge", "judge_arg", metavar="TYPE|FILE",
              help="The judge for the borderline band: a type or a YAML judge spec (default: the run's judge, "
                   "else heuristic).")
@click.option("--ood", type=click.Choice(["judge", "trust"]), default="judge", show_default=True,
              help="Items out of the verifier's training distribution: to the judge, or trust the probability.")
@click.option("--with-verdicts", is_flag=True, help="The judge sees the checkers' verdicts (default: blind).")
@click.option("--compare", is_flag=True, help="Also judge the auto-decided items, to measure the agreement routing "
              "loses (spends the calls routing saves).")
@click.option("--concurrency", type=click.IntRange(min=1), help="Judgements in flight (default 8; 1 for a local model).")
@click.option("--json", "json_path", metavar="PATH", help="Write the report as JSON ('-' for stdout).")
def route(run_dirs: tuple[Path, ...], verifier_file: Path, output: Path, accept_above: float, drop_below: float,
          judge_arg: str | None, ood: str, with_verdicts: bool, compare: bool, concurrency: int | None,
          json_path: str | None) -> None:
    """Auto-accept the confident passes, auto-drop the confident fails, judge only the borderline band.

    The verifier's calibrated P(pass) decides an item when it is at least --accept-above or at
    most --drop-below and the item is like the verifier's training data; every other item goes to
    the judge. Rows are written as they are decided; the report gives the judge calls saved and,
    where the world's verdict is known (and with --compare, against judging everything), the
    agreement routing keeps.
    """
    from .learned import load_verifier
    from .routing import check_thresholds, route_results

    check_thresholds(accept_above, drop_below)
    verifier = load_verifier(verifier_file)
    for warning in verifier.provenance.get("warnings") or []:
        click.echo(f"warning: {verifier_file}: {warning}", err=True)
    pairs, _infos, run_spec = _read_runs(run_dirs)
    if not any(r.trajectory is not None for _, r in pairs):
        from .learned import VerifierError

        raise VerifierError(f"{', '.join(map(str, run_dirs))}: no stored trajectories to route")
    judge_obj, label = _judge_arg(judge_arg, run_spec) if judge_arg else _judge_from_options(None, None, run_spec)
    if concurrency is None:
        concurrency = 1 if _uses_local_model(judge_obj) else 8
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as fp:
        def write(row: dict[str, Any]) -> None:
            fp.write(json.dumps(row, default=str) + "\n")
            fp.flush()

        report = asyncio.run(route_results(pairs, verifier, judge_obj, accept_above=accept_above,
                                           drop_below=drop_below, ood=ood, with_verdicts=with_verdicts,
                                           compare=compare, concurrency=concurrency, on_row=write))
    data = report.to_dict()
    data.update(verifier=verifier.id, judge=label, accept_above=accept_above, drop_below=drop_below, ood=ood,
                output=str(output), run_dirs=[str(d) for d in run_dirs])
    if json_path:
        _write_json(json_path, data)
    if json_path != "-":
        w = data["vs_world"]
        click.echo(f"route {', '.join(map(str, run_dirs))} with verifier {verifier.id} (accept >= {accept_above:g}, "
                   f"drop <= {drop_below:g}), judge {label}: {data['n']} episodes -> {output}")
        click.echo(f"  auto-accepted {data['accepted']}   auto-dropped {data['dropped']}   judged {data['judged']} "
                   f"({data['novel']} out of distribution)   undecided {data['undecided']}")
        click.echo(f"  judge calls {data['judge_calls']}, saved {data['judge_calls_saved']} "
                   f"({_fmt(data['saved_fraction'])})")
        if w["n"]:
            click.echo(f"  agreement with the world's verdicts: routed {_fmt(w['routed'])} (auto {_fmt(w['auto'])} "
                       f"on {w['auto_n']}, judged {_fmt(w['judged'])} on {w['judged_n']})")
        full = data.get("vs_judge_all")
        if full:
            click.echo(f"  vs judging everything ({full['compare_calls']} extra calls): agreement "
                       f"{_fmt(full['agreement'])}, agreement lost {_fmt(full['agreement_lost'])}")
    if report.judge_errors:
        click.echo(f"{report.judge_errors} judge call(s) failed: those rows have 'error' and no decision", err=True)
    if report.stopped:
        click.echo(report.stopped, err=True)
    if report.stopped or (report.judge_calls and report.judge_errors == report.judge_calls):
        raise SystemExit(1)
