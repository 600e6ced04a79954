"""``agentsynth bench``: benchmark a policy on a pack (pass@1, pass^k, Wilson CIs, per tier),
compare two policies with a paired test, and gate CI on a minimum pass rate.

Exit status: 0 ok, 1 below ``--min-pass-rate``, 2 bad input, 3 stopped early (budget), 5 every episode
ended in an error (nothing was checked: a setup problem, not a result), 6 ``--submit``: the hub refused
the run (the reason is printed).
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import click

GATE_METRICS = ("pass@1", "pass^k")


# --- parsing --------------------------------------------------------------------------------------


from ..spec import parse_component as parse_policy  # noqa: E402  (the policy / executor string parser)


def parse_rate(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """``0.8``, ``80%`` or ``80`` -> 0.8."""
    if value is None:
        return None
    text = value.strip()
    try:
        rate = float(text.rstrip("%"))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a rate (use 0.8 or 80%)") from None
    if text.endswith("%") or rate > 1:
        rate /= 100
    if not 0 <= rate <= 1:
        raise click.BadParameter(f"{value!r} is not between 0 and 1 (or 0% and 100%)")
    return rate


# --- statistics -----------------------------------------------------------------------------------


def _ci(successes: float, n: int) -> list[float]:
    from ..stats import wilson_interval

    low, high = wilson_interval(successes, n)
    return [round(low, 4), round(high, 4)]


def bench_stats(summary: dict[str, Any]) -> dict[str, Any]:
    """pass@1 over episodes and pass^k over tasks (unbiased), each with a Wilson 95 % interval,
    overall and per tier."""
    k = summary["trials"]
    tasks = summary["tasks"]
    key = f"pass_hat_{k}"

    def block(rows: list[dict[str, Any]]) -> dict[str, Any]:
        episodes = sum(r["trials"] for r in rows)
        passed = sum(r["passed"] for r in rows)
        hat = sum(r[key] for r in rows)
        n = len(rows)
        return {
            "tasks": n, "episodes": episodes, "passed": passed,
            "pass_at_1": round(passed / episodes, 4) if episodes else 0.0, "pass_at_1_ci95": _ci(passed, episodes),
            "pass_hat_k": round(hat / n, 4) if n else 0.0, "pass_hat_k_ci95": _ci(hat, n),
        }

    tiers: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in tasks:
        tiers[row["tier"] or "-"].append(row)
    return {"k": k, "overall": block(tasks), "tiers": {t: block(rows) for t, rows in sorted(tiers.items())},
            "curve": pass_hat_curve(tasks, k), "flakiness": flakiness(tasks)}


CURVE_FULL = 100  # up to this many trials the curve has every j; beyond, 1..10 then log-spaced


def curve_points(k: int) -> list[int]:
    """The js of the pass^j curve: all of 1..k for up to CURVE_FULL trials, else 1..10, about 20
    per decade, and k itself (a 45,000-trial run would otherwise report 45,000 points)."""
    if k <= CURVE_FULL:
        return list(range(1, k + 1))
    points = set(range(1, 11)) | {k}
    j = 10.0
    while j < k:
        j *= 10 ** (1 / 20)
        points.add(min(k, round(j)))
    return sorted(points)


def pass_hat_curve(tasks: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """pass^1 .. pass^k (unbiased, mean over tasks) with Wilson intervals: how fast reliability
    decays when a task must pass j trials out of j. A task with fewer than j trials is left out of j.

    C(c, j) / C(n, j) is the running product of (c - i) / (n - i): O(k) per task in floats, where
    the binomials themselves are numbers of thousands of digits at 10,000s of trials."""
    points = curve_points(k)
    wanted = set(points)
    sums = dict.fromkeys(points, 0.0)
    counts = dict.fromkeys(points, 0)
    for row in tasks:
        n, c = row["trials"], row["passed"]
        ratio = 1.0
        for j in range(1, min(k, n) + 1):
            ratio = ratio * (c - j + 1) / (n - j + 1) if ratio else 0.0
            if j in wanted:
                sums[j] += ratio
                counts[j] += 1
    return [{"k": j, "tasks": counts[j], "pass_hat": round(sums[j] / counts[j], 4) if counts[j] else 0.0,
             "ci95": _ci(sums[j], counts[j])} for j in points]


def flakiness(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Tasks that passed some trials and failed others (flaky), against always / never passing."""
    flaky = [r["task_id"] for r in tasks if 0 < r["passed"] < r["trials"]]
    always = sum(1 for r in tasks if r["trials"] and r["passed"] == r["trials"])
    never = sum(1 for r in tasks if r["passed"] == 0)
    return {"flaky": len(flaky), "always_pass": always, "never_pass": never,
            "flaky_share": round(len(flaky) / len(tasks), 4) if tasks else 0.0, "flaky_tasks": flaky}


def gate(stats: dict[str, Any], summary: dict[str, Any], floor: float | None, metric: str) -> dict[str, Any] | None:
    if floor is None:
        return None
    value = stats["overall"]["pass_at_1" if metric == "pass@1" else "pass_hat_k"]
    ok = value >= floor and summary["complete"]
    why = "" if summary["complete"] else "the run did not complete"
    return {"metric": metric, "min": floor, "value": value, "passed": ok, **({"reason": why} if why else {})}


def compare_stats(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per-task pass@1 (and pass^k) of A and B side by side, and an exact paired sign test."""
    from ..stats import paired_sign_test

    k = a["trials"]
    key = f"pass_hat_{k}"
    rows_a = {r["task_id"]: r for r in a["tasks"]}
    rows_b = {r["task_id"]: r for r in b["tasks"]}
    common = [t for t in rows_a if t in rows_b]
    rows = []
    for t in common:
        ra, rb = rows_a[t], rows_b[t]
        rows.append({"task_id": t, "tier": ra["tier"], "a_pass_at_1": ra["pass_at_1"], "b_pass_at_1": rb["pass_at_1"],
                     "a_pass_hat_k": ra[key], "b_pass_hat_k": rb[key], "diff": rb["pass_at_1"] - ra["pass_at_1"]})
    test: dict[str, Any] = dict(paired_sign_test([r["a_pass_at_1"] for r in rows], [r["b_pass_at_1"] for r in rows]))
    test["significant_at_0.05"] = test["p_value"] < 0.05
    test["test"] = "exact two-sided sign test on per-task pass@1 (ties dropped)"
    return {"tasks": rows, "paired_test": test, "only_in_a": sorted(set(rows_a) - set(rows_b)),
            "only_in_b": sorted(set(rows_b) - set(rows_a))}


# --- rendering ------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _ci_text(ci: list[float]) -> str:
    return f"{ci[0]:.0%}–{ci[1]:.0%}"


def render_tiers(stats: dict[str, Any], title: str) -> Any:
    from rich.table import Table

    k = stats["k"]
    table = Table(title=title)
    columns = ["tier", "tasks", "episodes", "pass@1", "95% CI"] + ([f"pass^{k}", "95% CI "] if k > 1 else [])
    for name in columns:
        table.add_column(name, justify="left" if name == "tier" else "right")

    def add(name: str, b: dict[str, Any], style: str = "") -> None:
        cells = [name, str(b["tasks"]), str(b["episodes"]), _pct(b["pass_at_1"]), _ci_text(b["pass_at_1_ci95"])]
        if k > 1:
            cells += [_pct(b["pass_hat_k"]), _ci_text(b["pass_hat_k_ci95"])]
        table.add_row(*cells, style=style)

    for tier, b in stats["tiers"].items():
        add(tier, b)
    table.add_section()
    add("all", stats["overall"], "bold")
    return table


def failure_lines(summary: dict[str, Any], limit: int = 400) -> list[str]:
    """The first failing episode of each task: its failing verdicts (e.g. the unexpected diff) or error."""
    lines, seen = [], set()
    for r in summary["results"]:
        if r["status"] == "passed" or r["task_id"] in seen:
            continue
        seen.add(r["task_id"])
        if r["status"] == "error":
            why = r["error"]
        else:
            why = "; ".join(f"{v['checker']}: {v.get('detail', '')}" for v in r["verdicts"] if not v.get("passed"))
        why = why if len(why) <= limit else why[: limit - 1] + "…"
        lines.append(f"  {r['task_id']} (trial {r['trial']}): {why or r['status']}")
    return lines


def render_compare(a: dict[str, Any], b: dict[str, Any], comp: dict[str, Any], names: tuple[str, str]) -> Any:
    from rich.table import Table

    k = a["trials"]
    table = Table(title=f"pack {a['pack']['id']} · A = {names[0]} vs B = {names[1]} · {k} trial(s) per task")
    for col in ("task", "tier", "A pass@1", "B pass@1", "B - A"):
        table.add_column(col, justify="left" if col in ("task", "tier") else "right")
    if k > 1:
        table.add_column(f"A pass^{k}", justify="right")
        table.add_column(f"B pass^{k}", justify="right")
    for r in comp["tasks"]:
        d = r["diff"]
        style = "green" if d > 0 else "red" if d < 0 else ""
        cells = [r["task_id"], r["tier"], f"{r['a_pass_at_1']:.2f}", f"{r['b_pass_at_1']:.2f}", f"{d:+.2f}"]
        if k > 1:
            cells += [f"{r['a_pass_hat_k']:.2f}", f"{r['b_pass_hat_k']:.2f}"]
        table.add_row(*cells, style=style)
    return table


# --- the command ----------------------------------------------------------------------------------


def _run_one(policy: Any, options: dict[str, Any], run_dir: Path | None, quiet: bool) -> tuple[Any, dict[str, Any]]:
    from ..plugins import get_host
    from ..report import summarize
    from ..spec import Budget, RunSpec, resolve_run
    from ._runner import execute_with_progress

    budget = Budget(usd=options["budget_usd"]) if options["budget_usd"] is not None else Budget()
    spec = RunSpec(policy=policy, pack=options["pack"], split=options["split"], only=list(options["only"]),
                   trials=options["trials"], seed=options["seed"], concurrency=options["concurrency"],
                   timeout=options["timeout"], max_steps=options["max_steps"], budget=budget,
                   executor=options.get("executor"))
    spec, pack = resolve_run(spec, base_dir=Path.cwd(), source="bench", host=get_host())
    run = execute_with_progress(spec, pack, run_dir=run_dir, quiet=quiet)
    summary = summarize(run)
    if run_dir is not None:
        summary["run_dir"] = str(run_dir)
    return run, summary


def _write_json(path: str, data: dict[str, Any]) -> None:
    from ..report import write_json

    write_json(data, path)


def _local_model(spec: str) -> bool:
    """A policy spec string whose model is ``local`` / ``local/NAME`` (the embedded server)."""
    for part in spec.split(","):
        key, _, value = part.partition("=")
        if key.strip() == "model" and (value.strip() == "local" or value.strip().startswith("local/")):
            return True
    return False


@click.command()
@click.option("--pack", "pack", required=True, metavar="NAME|PATH", help="A registered pack name or a pack path.")
@click.option("--policy", "policy", metavar="SPEC",
              help="oracle | NAME,key=value,... | '{type: llm, model: ...}' | policy.yaml")
@click.option("--compare", nargs=2, metavar="A B", help="Benchmark two policies on the same episodes and compare.")
@click.option("-k", "--trials", type=click.IntRange(min=1), default=1, show_default=True,
              help="Trials per task; pass^k counts a task only when all k pass.")
@click.option("--seed", type=int, default=0, show_default=True, help="Base seed (same seed -> same episodes).")
@click.option("--split", type=click.Choice(["train", "test", "all"]), default="all", show_default=True)
@click.option("--only", multiple=True, metavar="TASK", help="Only these task ids (repeatable).")
@click.option("--concurrency", type=click.IntRange(min=1),
              help="Episodes in flight (default 4; 1 for a policy on a local model, which answers one request "
                   "at a time: parallel episodes only queue against the episode timeout and evict its prompt cache).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=300.0, show_default=True,
              help="Seconds per episode.")
@click.option("--max-steps", type=click.IntRange(min=1), default=30, show_default=True)
@click.option("--budget-usd", type=click.FloatRange(min=0), help="Hard cap on LLM spend for the run.")
@click.option("--json", "json_path", metavar="PATH", help="Write the machine-readable report ('-' for stdout).")
@click.option("--min-pass-rate", callback=parse_rate, metavar="RATE",
              help="Exit 1 when the rate is below RATE (0.8 or 80%). With --compare it applies to B.")
@click.option("--gate-metric", type=click.Choice(GATE_METRICS), default="pass@1", show_default=True,
              help="Which rate --min-pass-rate checks.")
@click.option("--run-dir", type=click.Path(path_type=Path),
              help="Store results here (resumable); default: in memory only.")
@click.option("--executor", "executor", metavar="SPEC",
              help="Where episodes run: local (default) | NAME,key=value,... (e.g. 'ray,address=auto').")
@click.option("--hub", "hub_url", metavar="URL", envvar="AGENTSYNTH_HUB_URL",
              help="Resolve a pack name that is not installed through this hub (agentsynth-hub).")
@click.option("--submit", "submit_url", metavar="URL",
              help="Then submit the run to this leaderboard hub (agentsynth-hub; token from AGENTSYNTH_HUB_TOKEN).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no tables.")
@click.pass_context
def bench(ctx: click.Context, pack: str, policy: str | None, compare: tuple[str, str] | None, trials: int, seed: int,
          split: str, only: tuple[str, ...], concurrency: int | None, timeout: float, max_steps: int,
          budget_usd: float | None, json_path: str | None, min_pass_rate: float | None, gate_metric: str,
          run_dir: Path | None, executor: str | None, hub_url: str | None, submit_url: str | None,
          quiet: bool) -> None:
    """Benchmark a policy on a pack: pass@1 and pass^k with Wilson 95% intervals, per tier.

    \b
    agentsynth bench --pack core --policy oracle
    agentsynth bench --pack core --policy 'llm,model=openai/gpt-4o-mini' -k 4 --min-pass-rate 0.8
    agentsynth bench --pack core --compare noop oracle --json report.json
    """
    if (policy is None) == (compare is None):
        raise click.UsageError("give --policy SPEC, or --compare A B (not both)")
    if concurrency is None:
        given = [policy] if policy is not None else list(compare or ())
        concurrency = 1 if any(_local_model(s) for s in given) else 4
    options = {"pack": pack, "split": split, "only": only, "trials": trials, "seed": seed, "concurrency": concurrency,
               "timeout": timeout, "max_steps": max_steps, "budget_usd": budget_usd,
               "executor": parse_policy(executor, option="--executor") if executor else None}
    quiet_tables = quiet or json_path == "-"
    if hub_url:
        os.environ["AGENTSYNTH_HUB_URL"] = hub_url  # read by spec.resolve_run (also by resume and verify)
    if submit_url is not None:
        from ..plugins import get_host

        if compare is not None:
            raise click.UsageError("--submit takes one run: use --policy, not --compare")
        if not get_host().pm.hook.submit_run.get_hookimpls():
            raise click.UsageError("--submit: no installed plugin submits runs (pip install agentsynth-hub)")
        if run_dir is None:  # a hub needs the stored episodes: keep them in a run directory
            import tempfile

            run_dir = Path(tempfile.mkdtemp(prefix="agentsynth-submit-")) / "run"
    if compare is None:
        assert policy is not None
        run, summary = _run_one(parse_policy(policy), options, run_dir, quiet_tables)
        stats = bench_stats(summary)
        summary["bench"] = stats
        verdict = gate(stats, summary, min_pass_rate, gate_metric)
        if verdict is not None:
            summary["bench"]["gate"] = verdict
        if json_path:
            _write_json(json_path, summary)
        if not quiet_tables:
            _print_single(summary, stats, verdict)
        code = 3 if run.stopped else (5 if _nothing_checked(run) else 0)
        if submit_url is not None and not code:
            from ..plugins import get_host

            assert run_dir is not None
            answer = get_host().pm.hook.submit_run(run_dir=run_dir, url=submit_url)
            if answer is None:
                raise click.UsageError(f"--submit: no installed plugin handles {submit_url}")
            click.echo(f"{'submitted' if answer['accepted'] else 'refused'}: {answer['message']}",
                       err=not answer["accepted"])
            if not answer["accepted"]:
                code = 6
    else:
        specs = (parse_policy(compare[0], option="--compare A"), parse_policy(compare[1], option="--compare B"))
        runs = []
        for label, cspec in zip(("a", "b"), specs, strict=True):
            runs.append(_run_one(cspec, options, run_dir / label if run_dir else None, quiet_tables))
        (run_a, sa), (run_b, sb) = runs
        sa["bench"], sb["bench"] = bench_stats(sa), bench_stats(sb)
        comp = compare_stats(sa, sb)
        verdict = gate(sb["bench"], sb, min_pass_rate, gate_metric)
        out = {"mode": "compare", "a": sa, "b": sb, "comparison": comp, **({"gate": verdict} if verdict else {})}
        if json_path:
            _write_json(json_path, out)
        if not quiet_tables:
            _print_compare(sa, sb, comp, compare, verdict)
        code = 3 if (run_a.stopped or run_b.stopped) else (5 if _nothing_checked(run_a, run_b) else 0)
    if verdict is not None and not verdict["passed"]:
        code = 1
    if code:
        # SystemExit rather than ctx.exit(): `python -m agentsynth_kernel` drops the value ctx.exit returns
        # through main(), and a CI gate must not exit 0.
        sys.exit(code)


def _nothing_checked(*runs: Any) -> bool:
    """Every episode of a run ended in an error (a world that cannot start, a policy that cannot be
    built): exit 5 as ``agentsynth run`` does, with the first error, instead of a 0 % that looks real."""
    from ._runner import warn_nothing_checked

    return any(warn_nothing_checked(run) for run in runs)


def _gate_line(verdict: dict[str, Any] | None) -> str | None:
    if verdict is None:
        return None
    mark = "[green]PASS[/]" if verdict["passed"] else "[red]FAIL[/]"
    extra = f" ({verdict['reason']})" if verdict.get("reason") else ""
    return f"gate {mark}: {verdict['metric']} {verdict['value']:.1%} vs minimum {verdict['min']:.1%}{extra}"


def _print_single(summary: dict[str, Any], stats: dict[str, Any], verdict: dict[str, Any] | None) -> None:
    from rich.console import Console

    from ..report import render_summary, summary_lines

    console = Console()
    console.print(render_summary(summary))
    k = stats["k"]
    console.print(render_tiers(stats, f"per tier · {k} trial(s) per task"))
    o = stats["overall"]
    line = f"pass@1 {_pct(o['pass_at_1'])} {_ci_text(o['pass_at_1_ci95'])} over {o['episodes']} episodes"
    if k > 1:
        line += f"; pass^{k} {_pct(o['pass_hat_k'])} {_ci_text(o['pass_hat_k_ci95'])} over {o['tasks']} tasks"
    console.print(line + " (Wilson 95% intervals)", highlight=False)
    if k > 1:
        console.print("pass^1..k " + ", ".join(f"{p['k']}: {_pct(p['pass_hat'])}" for p in stats["curve"]),
                      highlight=False)
        f = stats["flakiness"]
        shown = ", ".join(f["flaky_tasks"][:8]) + (" ..." if len(f["flaky_tasks"]) > 8 else "")
        console.print(f"flaky: {f['flaky']} task(s) pass some trials and fail others"
                      f"{' (' + shown + ')' if shown else ''}; always pass {f['always_pass']}, never {f['never_pass']}",
                      highlight=False, markup=False)
    for line in summary_lines(summary)[1:]:
        if not line.startswith(f"pass^{k} "):
            console.print(line, highlight=False)
    failures = failure_lines(summary)
    if failures:
        console.print("failures (first failing trial of each task):", highlight=False)
        for line in failures:
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    if summary.get("run_dir"):
        console.print(f"run directory: {summary['run_dir']}", highlight=False)
    gate_text = _gate_line(verdict)
    if gate_text:
        console.print(gate_text, highlight=False)


def _print_compare(a: dict[str, Any], b: dict[str, Any], comp: dict[str, Any], names: tuple[str, str],
                   verdict: dict[str, Any] | None) -> None:
    from rich.console import Console

    console = Console()
    console.print(render_compare(a, b, comp, names))
    k = a["trials"]
    for label, name, s in (("A", names[0], a), ("B", names[1], b)):
        o = s["bench"]["overall"]
        console.print(f"{label} {name}: pass@1 {_pct(o['pass_at_1'])} {_ci_text(o['pass_at_1_ci95'])}, "
                      f"pass^{k} {_pct(o['pass_hat_k'])} {_ci_text(o['pass_hat_k_ci95'])}", highlight=False)
    t = comp["paired_test"]
    sig = "significant" if t["significant_at_0.05"] else "not significant"
    console.print(f"paired sign test over {len(comp['tasks'])} tasks: B better on {t['wins_b']}, A better on "
                  f"{t['wins_a']}, ties {t['ties']}; mean difference {t['mean_diff']:+.3f}, "
                  f"p = {t['p_value']:.4g} ({sig} at 0.05)", highlight=False)
    line = _gate_line(verdict)
    if line:
        console.print(line.replace("gate", "gate (B)", 1), highlight=False)
