"""``agentsynth export``, ``agentsynth import`` and ``agentsynth dedup`` (thin click commands)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import click

from agentsynth_kernel import AgentsynthError, EpisodeResult, Status, Trajectory, Usage

from . import __version__

STATUSES = ("unverified", "passed", "failed")
META_KEYS = ("run_id", "spec", "pack", "versions", "import")
COMMIT_EVERY = 500


def open_run(run_dir: Path) -> Any:
    """An existing run store; a clean error if ``run_dir`` is not one."""
    from agentsynth_kernel import STORE_FILE, RunStore

    if not run_dir.is_dir():
        raise AgentsynthError(f"{run_dir}: no such run directory")
    if not (run_dir / STORE_FILE).is_file():
        raise AgentsynthError(f"{run_dir}: not a run directory (no {STORE_FILE})")
    return RunStore(run_dir)


def new_run(run_dir: Path) -> Any:
    """A fresh run store; refuses one that already holds episodes."""
    from agentsynth_kernel import RunStore

    store = RunStore(run_dir)
    if store.count():
        n = store.count()
        store.close()
        raise AgentsynthError(f"{run_dir}: already holds {n} episodes; choose a new output directory")
    return store


def put_all(store: Any, results: Iterable[EpisodeResult]) -> int:
    """Store results in transactions of COMMIT_EVERY rows (fast, and a crash keeps what was committed)."""
    n = 0
    store.db.execute("BEGIN")
    try:
        for result in results:
            store.put(result)
            n += 1
            if n % COMMIT_EVERY == 0:
                store.db.execute("COMMIT")
                store.db.execute("BEGIN")
    finally:
        store.db.execute("COMMIT")
    return n


def _emit(summary: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        for line in lines:
            click.echo(line)


def _counts(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items() if not isinstance(v, dict)) or "none"


# --- export ------------------------------------------------------------------------------------------------


@click.command("export")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("-f", "--format", "fmt", required=True, help="Exporter name: jsonl, openai, sharegpt, adp, dpo, parquet, hf (or a plugin's).")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="Output file (a directory for hf).")
@click.option("--filter", "filter_", type=click.Choice(["passed", "all"]), help="Which episodes (default: the format's).")
@click.option("--include-test", is_flag=True,
              help="Also export records of test-split tasks (left out by default: they are the benchmark).")
@click.option("--min-reward", type=float, help="Drop records whose reward is below this.")
@click.option("--redact", is_flag=True, help="Redact emails, API keys, bearer tokens, phone numbers and IPs.")
@click.option("--canary", type=click.Choice(["auto", "always", "never"]), help="Embed the pack's canary string (auto: test split).")
@click.option("--dedup", is_flag=True, help="Drop exact and near duplicates.")
@click.option("--threshold", type=click.FloatRange(0, 1, min_open=True), help="Near-duplicate Jaccard threshold (with --dedup; default 0.8).")
@click.option("--decontaminate", metavar="PACK", help="Drop records overlapping this pack's tasks (or carrying a canary).")
@click.option("--push-to-hub", "push_repo", metavar="REPO", help="Then push it to this Hugging Face dataset repo, with a card (token from HF_TOKEN).")
@click.option("--hub-license", metavar="ID", help="The card's licence field (with --push-to-hub; default: unknown).")
@click.option("--hub-private", is_flag=True, help="Create the dataset repo private (with --push-to-hub).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def export_cmd(run_dir: Path, fmt: str, output: Path, filter_: str | None, include_test: bool,
               min_reward: float | None, redact: bool,
               canary: str | None, dedup: bool, threshold: float | None, decontaminate: str | None,
               push_repo: str | None, hub_license: str | None, hub_private: bool, as_json: bool) -> None:
    """Export the episodes of RUN_DIR as training data in a given format."""
    from agentsynth_kernel import ComponentSpec, build, get_host

    host = get_host()
    try:
        host.get("exporter", fmt)
    except KeyError as exc:
        raise click.BadParameter(str(exc.args[0]), param_hint="--format") from None
    params: dict[str, Any] = {}
    for key, value in (("filter", filter_), ("min_reward", min_reward), ("canary", canary),
                       ("decontaminate", decontaminate)):
        if value is not None:
            params[key] = value
    if redact:
        params["redact"] = True
    if include_test:
        params["include_test"] = True
    if dedup:
        params["dedup"] = {"threshold": threshold} if threshold is not None else True
    if push_repo:
        from .hub_push import check_push

        check_push(push_repo, hub_license)
    store = open_run(run_dir)
    try:
        exporter = build("exporter", ComponentSpec(fmt, params), host=host, base_dir=Path.cwd())
        n = exporter.export(store.results(), output)
    except TypeError as exc:
        raise AgentsynthError(f"exporter {fmt!r}: {exc}") from None
    finally:
        store.close()
    summary = {"output": str(output), "written": n}
    if hasattr(exporter, "summary"):
        summary.update(exporter.summary())
    lines = [f"wrote {n} {fmt} records to {output}"]
    stats = {k: v for k, v in summary.items()
             if k not in ("output", "written", "format", "redacted", "dedup", "warnings")}
    if stats:
        lines.append(f"  {_counts(stats)}")
    if "redacted" in summary:
        lines.append(f"  redacted: {_counts(summary['redacted'])}")
    if "dedup" in summary:
        lines.append(f"  dedup: {_counts(summary['dedup'])}")
    if push_repo:
        from .hub_push import push_to_hub

        summary["hub"] = push_to_hub(push_repo, output=output, fmt=fmt, run_dir=run_dir, license_id=hub_license,
                                     private=hub_private, summary={**summary, "include_test": include_test})
        lines.append(f"  pushed to {summary['hub']['url']} (commit {summary['hub']['commit'][:12]})")
    _emit(summary, as_json, lines)


# --- import ------------------------------------------------------------------------------------------------


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fp:
        for chunk in iter(lambda: fp.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def imported_results(trajectories: Iterable[Trajectory], *, status: str, provenance: dict[str, Any],
                     redactor: Any = None) -> Iterator[EpisodeResult]:
    """EpisodeResults for imported trajectories: ``trial`` counts traces of the same task id."""
    trials: Counter[str] = Counter()
    for traj in trajectories:
        if redactor is not None:
            traj = redactor.trajectory(traj)
        meta = traj.metadata.get("import", {})
        rec_status = status
        if isinstance(meta.get("passed"), bool):
            rec_status = "passed" if meta["passed"] else "failed"
        elif meta.get("status") in ("passed", "failed"):
            rec_status = meta["status"]
        scores = {}
        if isinstance(meta.get("reward"), (int, float)) and not isinstance(meta.get("reward"), bool):
            scores["reward"] = float(meta["reward"])
        u = meta.get("usage") or {}
        usage = Usage(int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0)), None, 1 if u else 0)
        trial = trials[traj.task_id]
        trials[traj.task_id] += 1
        yield EpisodeResult(
            task_id=traj.task_id, trial=trial, seed=0, status=cast(Status, rec_status), trajectory=traj, usage=usage,
            scores=scores, provenance={**provenance, "line": meta.get("line")},
        )


PROBLEMS_LISTED = 100  # per file, in the --json report


def _nothing_read(files: list[dict[str, Any]]) -> str:
    """Why an import wrote nothing: per file, how many records failed and the first few reasons."""
    lines = ["nothing could be read: no trajectory was imported"]
    for f in files:
        if not f["problems"]:
            lines.append(f"{f['file']}: no records")
            continue
        lines.append(f"{f['file']}: {f['problems']} records could not be read")
        lines += f["problem_list"][:5]
        if f["problems"] > 5:
            lines.append(f"... {f['problems'] - 5} more")
    return "\n".join(lines)


def _remove_store(run_dir: Path, created: bool) -> None:
    """Remove the store an import just created (the whole directory if the import created it)."""
    import shutil

    from agentsynth_kernel import STORE_FILE

    if created:
        shutil.rmtree(run_dir, ignore_errors=True)
        return
    for suffix in ("", "-wal", "-shm", "-journal"):
        (run_dir / (STORE_FILE + suffix)).unlink(missing_ok=True)


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-f", "--format", "fmt", default="auto", show_default=True, help="auto, openai, anthropic, otel, sharegpt, adp (or a plugin's importer).")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="Run directory to create.")
@click.option("--redact", is_flag=True, help="Redact emails, API keys, bearer tokens, phone numbers and IPs.")
@click.option("--on-error", type=click.Choice(["skip", "stop"]), default="skip", show_default=True,
              help="A malformed record: skip it (and report it) or stop.")
@click.option("--status", type=click.Choice(STATUSES), default="unverified", show_default=True,
              help="Status of imported episodes (a record's own passed/status field wins).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def import_cmd(files: tuple[Path, ...], fmt: str, output: Path, redact: bool, on_error: str, status: str,
               as_json: bool) -> None:
    """Import foreign agent traces (FILES) as a run directory judges, dedup and exporters accept."""
    from agentsynth_kernel import ComponentSpec, build, get_host

    from .redact import Redactor

    host = get_host()
    try:
        host.get("importer", fmt)
    except KeyError as exc:
        raise click.BadParameter(str(exc.args[0]), param_hint="--format") from None
    for file in files:
        if not file.is_file():
            raise AgentsynthError(f"{file}: {'is a directory' if file.is_dir() else 'file not found'}")
    created = not output.exists()
    store = new_run(output)
    redactor = Redactor() if redact else None
    run_id = store.get_meta("run_id") or uuid.uuid4().hex[:12]
    report: dict[str, Any] = {"run_dir": str(output), "run_id": run_id, "files": []}
    shown = 0
    total = 0

    def on_problem(message: str) -> None:
        nonlocal shown
        if shown < 20 and not as_json:
            click.echo(f"warning: {message}", err=True)
        shown += 1

    try:
        store.set_meta("run_id", run_id)
        store.set_meta("pack", {"id": f"import:{files[0].stem}", "source": ", ".join(str(f) for f in files),
                                "content_hash": _file_hash(files[0]) if len(files) == 1 else ""})
        for file in files:
            params = {"on_error": on_error} if fmt in ("auto", "openai", "anthropic", "otel", "sharegpt", "adp") else {}
            importer = build("importer", ComponentSpec(fmt, params), host=host)
            if hasattr(importer, "on_problem"):
                importer.on_problem = on_problem
            provenance = {"run_id": run_id, "pack": f"import:{file.stem}", "pack_hash": _file_hash(file),
                          "imported_from": str(file), "format": fmt,
                          "versions": {"agentsynth-export": __version__}}
            try:
                n = put_all(store, imported_results(importer.read(file), status=status, provenance=provenance,
                                                    redactor=redactor))
            finally:
                entry = {"file": str(file), "format": getattr(importer, "detected", "") or fmt,
                         "problems": getattr(importer, "problem_count", 0)}
                if getattr(importer, "formats", None):
                    entry["formats"] = dict(importer.formats)
                entry["problem_list"] = list(getattr(importer, "problems", []))[:PROBLEMS_LISTED]
                report["files"].append(entry)
            entry["imported"] = n
            total += n
        report["imported"] = total
        report["problems"] = sum(f["problems"] for f in report["files"])
        if total == 0:
            raise AgentsynthError(_nothing_read(report["files"]))
        if redactor is not None:
            report["redacted"] = redactor.report()
        store.set_meta("import", {**report, "files": [{k: v for k, v in f.items() if k != "problem_list"}
                                                      for f in report["files"]]})
        store.event("imported", **{k: v for k, v in report.items() if k != "files"})
    except BaseException:
        store.close()
        if total == 0:  # leave no empty run directory behind
            _remove_store(output, created)
        raise
    store.close()
    lines = [f"imported {total} trajectories into {output} (run {run_id})"]
    for f in report["files"]:
        formats = f" ({_counts(f['formats'])})" if len(f.get("formats") or ()) > 1 else ""
        lines.append(f"  {f['file']}: {f['imported']} ({f['format']}){formats}, "
                     f"{f['problems']} records could not be read")
    if shown > 20:
        lines.append(f"  ... {shown - 20} more problems not shown")
    if redactor is not None:
        lines.append(f"  redacted: {_counts(report['redacted'])}")
    _emit(report, as_json, lines)


# --- dedup -------------------------------------------------------------------------------------------------


@click.command("dedup")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Run directory for the kept episodes (default: RUN_DIR-dedup).")
@click.option("--exact/--no-exact", default=True, show_default=True, help="Drop exact duplicates (normalized text hash).")
@click.option("--near/--no-near", default=True, show_default=True, help="Drop near duplicates (MinHash LSH).")
@click.option("--threshold", type=click.FloatRange(0, 1, min_open=True), default=0.8, show_default=True, help="Near-duplicate Jaccard threshold.")
@click.option("--num-perm", type=click.IntRange(min=16), default=128, show_default=True, help="MinHash permutations.")
@click.option("--ngram", type=click.IntRange(min=1), default=5, show_default=True, help="Word shingle size.")
@click.option("--scope", type=click.Choice(["trajectory", "instruction"]), default="trajectory", show_default=True,
              help="Compare whole trajectories or only task texts.")
@click.option("--decontaminate", "packs", metavar="PACK", multiple=True, help="Drop records overlapping this pack's tasks (repeatable).")
@click.option("--decontam-ngram", type=click.IntRange(min=1), default=8, show_default=True, help="n for the n-gram overlap.")
@click.option("--decontam-threshold", type=click.FloatRange(0, 1, min_open=True), default=0.5, show_default=True,
              help="Fraction of a task's n-grams that marks a record contaminated.")
@click.option("--canary", "canaries", multiple=True, help="Also drop records containing this string (repeatable).")
@click.option("--dry-run", is_flag=True, help="Only report; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def dedup_cmd(run_dir: Path, output: Path | None, exact: bool, near: bool, threshold: float, num_perm: int, ngram: int,
              scope: str, packs: tuple[str, ...], decontam_ngram: int, decontam_threshold: float,
              canaries: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Drop duplicate and contaminated episodes of RUN_DIR into a new run directory."""
    from .common import CANARY_PREFIX
    from .dedup import Decontaminator, Deduplicator

    decon = None
    if packs or canaries:
        from agentsynth_kernel import load_pack

        tasks: list[tuple[str, str]] = []
        for ref in packs:
            pack = load_pack(ref, validate=False)
            tasks += [(f"{pack.id}/{t.id}", t.instruction) for t in pack.tasks]
        decon = Decontaminator(tasks, ngram=decontam_ngram, threshold=decontam_threshold,
                               canaries=(CANARY_PREFIX, *canaries), scope=scope)
    deduper = Deduplicator(exact=exact, near=near, threshold=threshold, num_perm=num_perm, ngram=ngram, scope=scope,
                           decontaminator=decon)
    source = open_run(run_dir)
    output = output or run_dir.with_name(run_dir.name + "-dedup")
    try:
        if dry_run:
            for _ in deduper.filter(source.results()):
                pass
        else:
            if output.resolve() == run_dir.resolve():
                raise AgentsynthError(f"{output}: the output must be a new run directory, not RUN_DIR itself")
            target = new_run(output)
            try:
                for key in META_KEYS:
                    value = source.get_meta(key)
                    if value is not None:
                        target.set_meta(key, value)
                put_all(target, deduper.filter(source.results()))
                report = deduper.report()
                target.set_meta("dedup", {"source": str(run_dir), **report})
                target.event("dedup", source=str(run_dir), **{k: v for k, v in report.items() if not isinstance(v, dict)})
            finally:
                target.close()
    finally:
        source.close()
    report = {"run_dir": str(run_dir), "output": None if dry_run else str(output), **deduper.report()}
    lines = [
        f"{report['seen']} episodes: kept {report['kept']}, exact duplicates {report['exact']}, "
        f"near duplicates {report['near']}, contaminated {report['contaminated']}"
        + ("" if dry_run else f" -> {output}")
    ]
    if report.get("contamination"):
        lines.append("  contamination: " + _counts(report["contamination"]))
    _emit(report, as_json, lines)


# --- pack contamination ------------------------------------------------------------------------------------


@click.command("contamination")
@click.argument("pack")
@click.option("--corpus", "corpus", multiple=True, required=True, type=click.Path(path_type=Path), metavar="FILE",
              help="A training corpus file: JSONL (every string of a record) or text; .gz too (repeatable).")
@click.option("--n", "n", type=click.IntRange(min=1), default=13, show_default=True, help="Word n-gram size.")
@click.option("--threshold", type=click.FloatRange(0, 1, min_open=True), default=0.5, show_default=True,
              help="A task is contaminated when this fraction of its instruction's or answer's n-grams is in the corpus.")
@click.option("--fail-above", type=click.FloatRange(0, 1), metavar="FRACTION",
              help="Exit 1 when a task's overlap is above FRACTION or the pack's canary is in the corpus.")
@click.option("--held-out-out", "held_out", type=click.Path(path_type=Path), metavar="DIR",
              help="Write a held-out variant of the pack (relabelled world values, relabelled oracle) to DIR.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed handed to the worlds' perturb_task.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Run each relabelled task: its relabelled oracle must pass, the original transcript must fail.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              help="Seconds per verification episode.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report on stdout.")
def contamination_cmd(pack: str, corpus: tuple[Path, ...], n: int, threshold: float, fail_above: float | None,
                      held_out: Path | None, seed: int, verify: bool, timeout: float, as_json: bool) -> None:
    """N-gram overlap of each task of PACK with a training corpus, its canary, and a held-out variant.

    Every task's instruction and oracle answer are compared with the corpus (streamed once, any
    size); a task is flagged when at least --threshold of its n-grams occur, or when the pack's
    canary (the string exports put in its test-split records) is found. --held-out-out writes a
    copy of the pack whose world values are relabelled, so a memorised answer does not pass it.
    """
    import sys

    from agentsynth_kernel import load_pack

    from .contamination import check_corpus_files, contamination_report, relabel_tasks, write_held_out

    files = check_corpus_files(corpus)  # before loading anything: a typo fails fast
    if held_out is not None and held_out.exists() and (not held_out.is_dir() or any(held_out.iterdir())):
        raise AgentsynthError(f"{held_out}: --held-out-out: exists and is not an empty directory")
    loaded = load_pack(pack)
    report, oracles = contamination_report(loaded, files, n=n, threshold=threshold)
    if held_out is not None:
        relabelled, skipped = relabel_tasks(loaded, oracles, seed=seed, verify=verify, timeout=timeout)
        report["held_out"] = {"dir": str(held_out), "relabelled": [t.id for t, _ in relabelled],
                              "not_relabelled": skipped, "verified": verify}
        if relabelled:
            write_held_out(loaded, relabelled, held_out)
    lines = [f"pack {loaded.id}: {len(report['tasks'])} tasks, corpus {report['corpus']['records']} records "
             f"in {len(files)} file(s); {n}-gram overlap, contaminated at >= {threshold:g}"]
    width = max((len(r["id"]) for r in report["tasks"]), default=4)
    for row in report["tasks"]:
        parts = []
        for field in ("instruction", "answer"):
            f = row[field]
            if f is not None:
                how = " verbatim" if f["verbatim_only"] else ""
                parts.append(f"{field} {f['overlap']:.0%}{how}")
        mark = "CONTAMINATED" if row["contaminated"] else "ok"
        lines.append(f"  {row['id']:<{width}}  {mark:<12}  " + ", ".join(parts))
    lines.append(f"  canary {report['canary']}: {'FOUND in the corpus' if report['canary_found'] else 'not found'}"
                 + (f"; {report['corpus']['records_with_an_agentsynth_canary']} records hold an agentsynth canary"
                    if report["corpus"]["records_with_an_agentsynth_canary"] else ""))
    lines.append(f"{len(report['contaminated'])} of {len(report['tasks'])} tasks contaminated"
                 + (f": {', '.join(report['contaminated'])}" if report["contaminated"] else ""))
    failed = False
    if held_out is not None:
        h = report["held_out"]
        if h["relabelled"]:
            lines.append(f"held-out variant: {held_out} ({len(h['relabelled'])} tasks relabelled"
                         + (", each verified: relabelled oracle passes, original transcript fails" if verify else "")
                         + ")")
        else:
            lines.append(f"held-out variant: no task could be relabelled; nothing written to {held_out}")
            failed = True
        for task_id, why in h["not_relabelled"].items():
            lines.append(f"  not relabelled: {task_id}: {why}")
    _emit(report, as_json, lines)
    if fail_above is not None and (report["max_overlap"] > fail_above or report["canary_found"]):
        click.echo(f"error: contamination above {fail_above:g} (max overlap {report['max_overlap']:.0%}"
                   + (", canary found" if report["canary_found"] else "") + ")", err=True)
        sys.exit(1)
    if failed:
        sys.exit(2)
