"""Summaries of a run: the JSON report (``--json``) and the terminal table."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from .engine import RunReport
from .records import SCHEMA_VERSION, EpisodeResult, to_builtins
from .results import ResultSet, Tally
from .secrets import redact, redact_text
from .stats import pass_at_k, pass_hat_k, wilson_interval

# Failures that are not the agent's: they are left out of ``pass_rate_excluding_infra``. A policy that
# raises is the agent under test failing (its code or its output), so ``policy`` is not among them.
INFRA_KINDS = ("environment", "checker", "judge", "provider", "timeout", "budget", "user")
# A simulated user that broke its instructions or failed (multi-turn tasks): the simulator's failure,
# reported apart as well (``pass_rate_excluding_user``), as τ²-bench does.
USER_KIND = "user"


def _rate(passed: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(passed, n)
    return {"passed": passed, "n": n, "rate": passed / n if n else 0.0, "ci95": [round(low, 4), round(high, 4)]}


def task_table(results: Iterable[EpisodeResult] | Tally, k: int) -> list[dict[str, Any]]:
    """Per-task trials, passes, pass@1 and pass^k (unbiased), in first-seen order."""
    tally = results if isinstance(results, Tally) else Tally.of(results)
    rows = []
    for task_id, t in tally.tasks.items():
        n, c = t.trials, t.passed
        kk = min(k, n)
        rows.append({
            "task_id": task_id, "tier": t.tier, "split": t.split, "trials": n, "passed": c, "errors": t.errors,
            "pass_at_1": c / n, f"pass_hat_{k}": pass_hat_k(n, c, kk), f"pass_at_{k}": pass_at_k(n, c, kk),
        })
    return rows


def attribution(results: Iterable[EpisodeResult] | Tally) -> dict[str, int]:
    """Who failed, per non-passing episode: ``agent`` (checkers said no) or the error kind."""
    tally = results if isinstance(results, Tally) else Tally.of(results)
    out = dict(tally.errors_by_kind)
    if tally.counts.get("failed"):
        out["agent"] = tally.counts["failed"]
    return dict(sorted(out.items()))


def summarize(report: RunReport) -> dict[str, Any]:
    """The machine-readable report of a finished (or stopped) run."""
    info = report.info
    summary = summarize_results(
        report.results, run_id=info.run_id, pack={"id": info.pack.id, "content_hash": info.pack.content_hash},
        policy=redact(info.spec.policy.to_dict()), trials=info.spec.trials, seed=info.spec.seed,
        planned=info.total, stopped=report.stopped, duration_s=report.duration_s,
    )
    summary["run_hash"] = info.run_hash
    if report.exports:
        summary["exports"] = report.exports
    if report.notes:
        summary["notes"] = report.notes
    return summary


def summarize_results(
    results: Iterable[EpisodeResult], *, run_id: str, pack: dict[str, Any], policy: dict[str, Any], trials: int,
    seed: int, planned: int, stopped: str = "", duration_s: float = 0.0,
) -> dict[str, Any]:
    """Totals, pass rates with and without infrastructure failures, failures by kind, per task and tier.

    From a :class:`~agentsynth_kernel.results.ResultSet` (a run's results) the totals come from its
    tally and ``results`` (one row per episode) streams from the store when read or written
    (:func:`write_json`): a 1M-episode report never holds 1M rows."""
    if isinstance(results, ResultSet):
        tally = _in_task_order(results.tally)
    else:
        results = list(results)
        tally = Tally.of(results)
    k = trials
    counts = {s: tally.counts.get(s, 0) for s in ("passed", "failed", "error")}
    errors_by_kind = dict(tally.errors_by_kind)
    infra = sum(n for kind, n in errors_by_kind.items() if kind in INFRA_KINDS)
    episodes = sum(counts.values())
    tasks = task_table(tally, k)
    tiers: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in tasks:
        tiers[row["tier"] or "-"].append(row)
    n_tasks = len(tasks)
    pass_hat = sum(row[f"pass_hat_{k}"] for row in tasks)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "pack": pack,
        "policy": policy,
        "trials": k,
        "seed": seed,
        "episodes": episodes,
        "planned": planned,
        "complete": not stopped and episodes == planned,
        "stopped": stopped,
        "counts": counts,
        "errors_by_kind": errors_by_kind,
        "failures_by_kind": attribution(tally),
        "infrastructure_failures": infra,
        "judge_errors": tally.judge_errors,
        "pass_rate": _rate(counts["passed"], episodes),
        "pass_rate_excluding_infra": _rate(counts["passed"], episodes - infra),
        "pass_rate_excluding_user": _rate(counts["passed"], episodes - errors_by_kind.get(USER_KIND, 0)),
        f"pass_hat_{k}": {"mean": pass_hat / n_tasks if n_tasks else 0.0, **_rate(round(pass_hat), n_tasks)},
        "tiers": {
            tier: {"tasks": len(rows), "pass_at_1": sum(r["pass_at_1"] for r in rows) / len(rows)}
            for tier, rows in sorted(tiers.items())
        },
        "tasks": tasks,
        "usage": to_builtins(tally.usage),
        "duration_s": round(duration_s, 3),
        "results": EpisodeRows(results),
    }


def _in_task_order(tally: Tally) -> Tally:
    """The tally with its tasks in id order: a run's results are reported in (task, trial) order,
    whatever order the episodes finished in."""
    return Tally(dict(tally.counts), tally.errors_by_kind, tally.judge_errors, tally.usage,
                 dict(sorted(tally.tasks.items())))


def episode_row(r: EpisodeResult) -> dict[str, Any]:
    """One episode in the JSON report."""
    return {
        "task_id": r.task_id, "trial": r.trial, "seed": r.seed, "status": r.status,
        "error_kind": r.error_kind, "error": r.error, "duration_s": round(r.duration_s, 4),
        "steps": len(r.trajectory.steps) if r.trajectory else 0,
        "verdicts": [to_builtins(v) for v in r.verdicts], "scores": r.scores,
        **({"judge_error": r.judge_error} if r.judge_error else {}),
    }


class EpisodeRows(Sequence[dict[str, Any]]):
    """The report's per-episode rows, made from the results each time they are read (not kept)."""

    def __init__(self, results: Sequence[EpisodeResult]) -> None:
        self._results = results

    def __len__(self) -> int:
        return len(self._results)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (episode_row(r) for r in self._results)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [episode_row(r) for r in self._results[index]]
        return episode_row(self._results[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, EpisodeRows)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def iter_json(value: Any, indent: int = 2, level: int = 0) -> Iterator[str]:
    """``json.dumps(value, indent=...)`` in pieces, streaming :class:`EpisodeRows` one row at a
    time (secrets masked piece by piece: each piece is a whole JSON value or punctuation)."""
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    if isinstance(value, dict) and _has_rows(value):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ("," if i else "") + "\n" + inner + json.dumps(str(key)) + ": "
            yield from iter_json(item, indent, level + 1)
        yield "\n" + pad + "}"
    elif isinstance(value, EpisodeRows):
        yield "["
        for i, row in enumerate(value):
            yield ("," if i else "") + "\n" + inner + redact_text(json.dumps(row, default=str))
        yield ("\n" + pad if len(value) else "") + "]"
    else:
        text = json.dumps(value, indent=indent, default=str)
        yield redact_text(text.replace("\n", "\n" + pad) if level else text)


def _has_rows(value: dict[str, Any]) -> bool:
    return any(isinstance(v, EpisodeRows) or (isinstance(v, dict) and _has_rows(v)) for v in value.values())


def write_json(data: dict[str, Any], path: str) -> None:
    """Write a report (``-``: stdout) without building it in memory as one string."""
    import sys
    from pathlib import Path

    if path == "-":
        for piece in iter_json(data):
            sys.stdout.write(piece)
        sys.stdout.write("\n")
        sys.stdout.flush()
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        for piece in iter_json(data):
            out.write(piece)
        out.write("\n")


def render_summary(summary: dict[str, Any]) -> Any:
    """A rich renderable: one row per task, then totals."""
    from rich.table import Table

    k = summary["trials"]
    table = Table(title=f"pack {summary['pack']['id']} · policy {summary['policy']['type']} · {summary['episodes']} episodes")
    table.add_column("task")
    table.add_column("tier")
    table.add_column("passed", justify="right")
    table.add_column("pass@1", justify="right")
    if k > 1:
        table.add_column(f"pass^{k}", justify="right")
    table.add_column("errors", justify="right")
    for row in summary["tasks"]:
        cells = [row["task_id"], row["tier"], f"{row['passed']}/{row['trials']}", f"{row['pass_at_1']:.2f}"]
        if k > 1:
            cells.append(f"{row[f'pass_hat_{k}']:.2f}")
        cells.append(str(row["errors"]) if row["errors"] else "")
        table.add_row(*cells)
    return table


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The plain-text lines printed under the table (also used by ``agentsynth status``)."""
    pr = summary["pass_rate"]
    lines = [
        f"pass rate {pr['rate']:.1%} ({pr['passed']}/{pr['n']}), 95% CI [{pr['ci95'][0]:.1%}, {pr['ci95'][1]:.1%}]",
    ]
    k = summary["trials"]
    if k > 1:
        lines.append(f"pass^{k} {summary[f'pass_hat_{k}']['mean']:.1%} over {len(summary['tasks'])} tasks")
    failures = summary.get("failures_by_kind") or {}
    if failures:
        kinds = ", ".join(f"{kind}: {n}" for kind, n in failures.items())
        lines.append(f"failures by kind: {kinds}")
    if summary["errors_by_kind"]:
        ex = summary["pass_rate_excluding_infra"]
        lines.append(
            f"pass rate without infrastructure failures {ex['rate']:.1%} ({ex['passed']}/{ex['n']},"
            f" {summary.get('infrastructure_failures', 0)} left out)"
        )
    users = summary["errors_by_kind"].get(USER_KIND, 0)
    if users:
        ex = summary["pass_rate_excluding_user"]
        lines.append(f"pass rate without simulated-user failures {ex['rate']:.1%} ({ex['passed']}/{ex['n']},"
                     f" {users} episode(s) where the simulated user broke its instructions or failed)")
    if summary.get("judge_errors"):
        lines.append(f"judge failed on {summary['judge_errors']} episode(s); their checker verdicts stand"
                     " (see judge_error in the results)")
    cost = (summary.get("usage") or {}).get("cost_usd")
    if cost:
        lines.append(f"cost ${cost:.4f}")
    for note in summary.get("notes", []):
        lines.append(f"note: {note}")
    for entry in summary.get("exports", []):
        if "error" in entry:
            lines.append(f"export {entry['type']} -> {entry['path']} FAILED: {entry['error']}")
        else:
            lines.append(f"exported {entry['count']} record(s) with {entry['type']} -> {entry['path']}")
    if summary["stopped"]:
        lines.append(f"stopped early: {summary['stopped']} (resume with the same --run-dir)")
    return lines
