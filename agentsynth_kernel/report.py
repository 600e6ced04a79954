"""Summaries of a run: the JSON report (``--json``) and the terminal table."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .engine import RunReport
from .records import SCHEMA_VERSION, EpisodeResult, Usage, to_builtins
from .secrets import redact
from .stats import pass_at_k, pass_hat_k, wilson_interval

# Failures that are not the agent's: they are left out of ``pass_rate_excluding_infra``. A policy that
# raises is the agent under test failing (its code or its output), so ``policy`` is not among them.
INFRA_KINDS = ("environment", "checker", "judge", "provider", "timeout", "budget")


def _rate(passed: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(passed, n)
    return {"passed": passed, "n": n, "rate": passed / n if n else 0.0, "ci95": [round(low, 4), round(high, 4)]}


def task_table(results: list[EpisodeResult], k: int) -> list[dict[str, Any]]:
    """Per-task trials, passes, pass@1 and pass^k (unbiased), in first-seen order."""
    by_task: dict[str, list[EpisodeResult]] = defaultdict(list)
    for r in results:
        by_task[r.task_id].append(r)
    rows = []
    for task_id, rs in by_task.items():
        n, c = len(rs), sum(r.passed for r in rs)
        kk = min(k, n)
        rows.append({
            "task_id": task_id, "tier": rs[0].tier, "split": rs[0].split, "trials": n, "passed": c,
            "errors": sum(r.status == "error" for r in rs),
            "pass_at_1": c / n, f"pass_hat_{k}": pass_hat_k(n, c, kk), f"pass_at_{k}": pass_at_k(n, c, kk),
        })
    return rows


def attribution(results: list[EpisodeResult]) -> dict[str, int]:
    """Who failed, per non-passing episode: ``agent`` (checkers said no) or the error kind."""
    out: dict[str, int] = defaultdict(int)
    for r in results:
        if r.status == "failed":
            out["agent"] += 1
        elif r.status == "error":
            out[r.error_kind or "unknown"] += 1
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
    results: list[EpisodeResult], *, run_id: str, pack: dict[str, Any], policy: dict[str, Any], trials: int,
    seed: int, planned: int, stopped: str = "", duration_s: float = 0.0,
) -> dict[str, Any]:
    """Totals, pass rates with and without infrastructure failures, failures by kind, per task and tier."""
    k = trials
    counts = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "error")}
    errors_by_kind: dict[str, int] = defaultdict(int)
    for r in results:
        if r.status == "error":
            errors_by_kind[r.error_kind or "unknown"] += 1
    infra = sum(n for kind, n in errors_by_kind.items() if kind in INFRA_KINDS)
    tasks = task_table(results, k)
    tiers: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in tasks:
        tiers[row["tier"] or "-"].append(row)
    usage = Usage()
    for r in results:
        usage = usage + r.usage
    n_tasks = len(tasks)
    pass_hat = sum(row[f"pass_hat_{k}"] for row in tasks)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "pack": pack,
        "policy": policy,
        "trials": k,
        "seed": seed,
        "episodes": len(results),
        "planned": planned,
        "complete": not stopped and len(results) == planned,
        "stopped": stopped,
        "counts": counts,
        "errors_by_kind": dict(errors_by_kind),
        "failures_by_kind": attribution(results),
        "infrastructure_failures": infra,
        "judge_errors": sum(1 for r in results if r.judge_error),
        "pass_rate": _rate(counts["passed"], len(results)),
        "pass_rate_excluding_infra": _rate(counts["passed"], len(results) - infra),
        f"pass_hat_{k}": {"mean": pass_hat / n_tasks if n_tasks else 0.0, **_rate(round(pass_hat), n_tasks)},
        "tiers": {
            tier: {"tasks": len(rows), "pass_at_1": sum(r["pass_at_1"] for r in rows) / len(rows)}
            for tier, rows in sorted(tiers.items())
        },
        "tasks": tasks,
        "usage": to_builtins(usage),
        "duration_s": round(duration_s, 3),
        "results": [
            {
                "task_id": r.task_id, "trial": r.trial, "seed": r.seed, "status": r.status,
                "error_kind": r.error_kind, "error": r.error, "duration_s": round(r.duration_s, 4),
                "steps": len(r.trajectory.steps) if r.trajectory else 0,
                "verdicts": [to_builtins(v) for v in r.verdicts], "scores": r.scores,
                **({"judge_error": r.judge_error} if r.judge_error else {}),
            }
            for r in results
        ],
    }


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
