"""What a page shows of a run, computed in one streaming pass over its run store.

A *digest* is plain JSON: totals, pass@1 / pass^k with 95 % intervals overall, per tier and per
task, failure attribution, cost and tokens, judge dimensions, flaky tasks, and one compact row per
episode (no trajectory). Trajectories are handed one at a time to ``on_episode`` as the store is
read, so a 10,000-episode run never sits in memory whole.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from agentsynth_kernel import (
    INFRA_KINDS,
    STORE_FILE,
    AgentsynthError,
    EpisodeResult,
    RunStore,
    paired_sign_test,
    pass_at_k,
    pass_hat_k,
    session_state,
    wilson_interval,
)

# status codes of the compact rows and the grid (the page's legend uses the same ones)
STATUS = {"passed": 1, "failed": 0, "error": 2}
# the error kind of a simulated user that broke its instructions or failed (the kernel's report.USER_KIND,
# not among its public names)
USER_KIND = "user"
WHY_CHARS = 240


def open_store(run_dir: Path) -> RunStore:
    """An existing run directory's store, read-only in spirit (never created)."""
    return RunStore(Path(run_dir), create=False)


def is_run_dir(path: Path) -> bool:
    return (path / STORE_FILE).is_file()


def find_run_dirs(roots: Iterable[Path], depth: int = 2) -> list[Path]:
    """Run directories among ``roots``: a root that is one, or its sub-directories down to ``depth``."""
    found: list[Path] = []
    seen: set[Path] = set()

    def walk(path: Path, level: int) -> None:
        try:
            real = path.resolve()
        except OSError:
            return
        if real in seen or not real.is_dir():
            return
        seen.add(real)
        if is_run_dir(real):
            found.append(real)
            return
        if level >= depth:
            return
        try:
            children = sorted(p for p in real.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            return
        for child in children:
            walk(child, level + 1)

    for root in roots:
        walk(Path(root), 0)
    return found


def _ci(successes: float, n: int) -> tuple[float, float]:
    low, high = wilson_interval(successes, n)
    return round(low, 4), round(high, 4)


def policy_label(policy: dict[str, Any]) -> str:
    """``oracle``, ``llm:openai/gpt-4o-mini``: what a legend calls a run."""
    kind = str(policy.get("type") or "?")
    model = policy.get("model") or (policy.get("params") or {}).get("model")
    return f"{kind}:{model}" if model else kind


class _Task:
    __slots__ = ("id", "index", "tier", "split", "trials")

    def __init__(self, task_id: str, index: int, tier: str, split: str) -> None:
        self.id, self.index, self.tier, self.split = task_id, index, tier, split
        self.trials: list[tuple[int, int]] = []  # (trial, status code)


def digest_store(store: RunStore, *, label: str = "",
                 on_episode: Callable[[int, EpisodeResult], None] | None = None) -> dict[str, Any]:
    """One pass over ``store``: the digest of its run; ``on_episode(index, result)`` sees every episode."""
    meta = store.meta()
    spec: dict[str, Any] = _mapping(meta.get("spec"))
    policy: dict[str, Any] = _mapping(spec.get("policy"))
    pack: dict[str, Any] = _mapping(meta.get("pack"))
    tasks: dict[str, _Task] = {}
    rows: list[list[Any]] = []
    counts = {"passed": 0, "failed": 0, "error": 0}
    attribution: dict[str, int] = {}
    prompt = completion = requests = 0
    cost = 0.0
    cost_known = True
    judge: dict[str, list[float]] = {}
    durations = 0.0
    for index, result in enumerate(store.results()):
        task = tasks.get(result.task_id)
        if task is None:
            task = tasks[result.task_id] = _Task(result.task_id, len(tasks), result.tier, result.split)
        code = STATUS.get(result.status, 2)
        task.trials.append((result.trial, code))
        counts[result.status if result.status in counts else "error"] += 1
        if result.status == "failed":
            attribution["agent"] = attribution.get("agent", 0) + 1
        elif result.status != "passed":
            kind = result.error_kind or "unknown"
            attribution[kind] = attribution.get(kind, 0) + 1
        usage = result.usage
        prompt += usage.prompt_tokens
        completion += usage.completion_tokens
        requests += usage.requests
        if usage.cost_usd is None:
            cost_known = False
        else:
            cost += usage.cost_usd
        for name, value in result.scores.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                judge.setdefault(name, []).append(float(value))
        durations += result.duration_s
        why = result.why
        steps = len(result.trajectory.steps) if result.trajectory is not None else 0
        rows.append([
            task.index,
            result.trial, result.seed, code, result.error_kind, steps, round(result.duration_s, 3),
            usage.cost_usd if usage.cost_usd is not None else None, usage.prompt_tokens + usage.completion_tokens,
            why[:WHY_CHARS] + ("…" if len(why) > WHY_CHARS else ""),
        ])
        if on_episode is not None:
            on_episode(index, result)
    budget_stops = sum(1 for _, kind, _ in store.events() if kind == "budget_stop")
    if budget_stops:
        attribution["budget"] = attribution.get("budget", 0) + budget_stops
    state, last = session_state(store)
    n = len(rows)
    infra = sum(v for k, v in attribution.items() if k in INFRA_KINDS)
    users = attribution.get(USER_KIND, 0)
    task_rows, curve, tiers = _task_stats(list(tasks.values()), int(spec.get("trials") or 1))
    return {
        "label": label or f"{policy_label(policy)} · {pack.get('id', '?')}",
        "run_dir": str(store.run_dir),
        "run_id": meta.get("run_id") or "",
        "run_hash": meta.get("run_hash") or "",
        "pack": {"id": pack.get("id") or "?", "content_hash": pack.get("content_hash") or ""},
        "policy": policy,
        "policy_label": policy_label(policy),
        "trials": int(spec.get("trials") or 1),
        "planned": int(meta.get("planned") or n),
        "episodes": n,
        "state": state,
        "pid": last.get("pid") if state == "running" else None,
        "stopped": last.get("stopped", "") if state == "stopped" else "",
        "created_at": meta.get("created_at"),
        "counts": counts,
        "attribution": dict(sorted(attribution.items(), key=lambda kv: -kv[1])),
        "pass1": {"passed": counts["passed"], "n": n, "rate": counts["passed"] / n if n else 0.0,
                  "ci": _ci(counts["passed"], n)},
        "pass1_excluding_infra": {"passed": counts["passed"], "n": n - infra,
                                  "rate": counts["passed"] / (n - infra) if n - infra > 0 else 0.0,
                                  "ci": _ci(counts["passed"], n - infra)},
        # a simulated user that broke its instructions or failed is the simulator's failure (error kind user)
        "pass1_excluding_user": {"passed": counts["passed"], "n": n - users,
                                 "rate": counts["passed"] / (n - users) if n - users > 0 else 0.0,
                                 "ci": _ci(counts["passed"], n - users)},
        "curve": curve,
        "tiers": tiers,
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "requests": requests,
                  "cost_usd": round(cost, 6) if cost_known else None},
        "duration_s": round(durations, 3),
        "judge": {name: _mean_ci(values) for name, values in sorted(judge.items())},
        "tasks": task_rows,
        "episodes_rows": rows,
        "generated_at": time.time(),
    }


def _mapping(value: Any) -> dict[str, Any]:
    """A meta value that should be a mapping (a run written by a plugin may lack it)."""
    return value if isinstance(value, dict) else {}


def _mean_ci(values: list[float]) -> dict[str, Any]:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = 1.959964 * sd / math.sqrt(n) if n > 1 else 0.0
    return {"mean": round(mean, 4), "lo": round(mean - half, 4), "hi": round(mean + half, 4), "n": n}


def _curve(task_counts: list[tuple[int, int]], kmax: int) -> list[dict[str, Any]]:
    """pass^k and pass@k for k = 1..kmax over tasks with at least k trials, with Wilson bands."""
    out = []
    for k in range(1, kmax + 1):
        eligible = [(n, c) for n, c in task_counts if n >= k]
        if not eligible:
            break
        hat = sum(pass_hat_k(n, c, k) for n, c in eligible)
        at = sum(pass_at_k(n, c, k) for n, c in eligible)
        m = len(eligible)
        out.append({"k": k, "tasks": m, "pass_hat": round(hat / m, 4), "pass_hat_ci": _ci(hat, m),
                    "pass_at": round(at / m, 4), "pass_at_ci": _ci(at, m)})
    return out


def _task_stats(tasks: list[_Task], trials: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                           dict[str, Any]]:
    rows = []
    kmax = max([trials, *(len(t.trials) for t in tasks)]) if tasks else trials
    by_tier: dict[str, list[tuple[int, int]]] = {}
    counts: list[tuple[int, int]] = []
    for t in tasks:
        grid = [code for _, code in sorted(t.trials)]
        n, c = len(grid), sum(1 for code in grid if code == 1)
        counts.append((n, c))
        by_tier.setdefault(t.tier or "-", []).append((n, c))
        rows.append({
            "id": t.id, "tier": t.tier, "split": t.split, "n": n, "passed": c,
            "errors": sum(1 for code in grid if code == 2), "pass1": round(c / n, 4) if n else 0.0,
            "pass1_ci": _ci(c, n),
            "pass_hat": [round(pass_hat_k(n, c, k), 4) for k in range(1, n + 1)],
            "flaky": 0 < c < n, "grid": grid, "trial_ids": [trial for trial, _ in sorted(t.trials)],
        })
    tiers = {tier: {"tasks": len(tc), "curve": _curve(tc, kmax)} for tier, tc in sorted(by_tier.items())}
    return rows, _curve(counts, kmax), tiers


def digest_run_dir(run_dir: Path, *, label: str = "",
                   on_episode: Callable[[int, EpisodeResult], None] | None = None) -> dict[str, Any]:
    store = open_store(run_dir)
    try:
        return digest_store(store, label=label, on_episode=on_episode)
    finally:
        store.close()


# --- comparing runs ---------------------------------------------------------------------------------


def compare_if_paired(digests: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The comparison of two runs that share tasks (two runs of different packs are not paired)."""
    if len(digests) != 2:
        return None
    result = compare(digests[0], digests[1])
    return result if result["common_tasks"] else None


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Paired comparison of two digests over the tasks both ran: sign test on per-task pass@1 and
    the tasks whose pass rate changed (fixed / improved / regressed / broken)."""
    ta = {t["id"]: t for t in a["tasks"]}
    tb = {t["id"]: t for t in b["tasks"]}
    common = [tid for tid in ta if tid in tb]
    xs = [ta[t]["pass1"] for t in common]
    ys = [tb[t]["pass1"] for t in common]
    test = paired_sign_test(xs, ys) if common else {"mean_diff": 0.0, "wins_a": 0, "wins_b": 0, "ties": 0,
                                                     "p_value": 1.0}
    changed = []
    for tid, x, y in zip(common, xs, ys, strict=True):
        if x == y:
            continue
        if x == 0 and y > 0:
            kind = "fixed"
        elif y == 0 and x > 0:
            kind = "broken"
        else:
            kind = "improved" if y > x else "regressed"
        changed.append({"id": tid, "a": x, "b": y, "delta": round(y - x, 4), "change": kind})
    changed.sort(key=lambda row: (-abs(row["delta"]), row["id"]))
    return {
        "a": a["label"], "b": b["label"], "common_tasks": len(common),
        "only_a": sorted(set(ta) - set(tb)), "only_b": sorted(set(tb) - set(ta)),
        "pass1_a": round(sum(xs) / len(xs), 4) if xs else 0.0, "pass1_b": round(sum(ys) / len(ys), 4) if ys else 0.0,
        "test": {**test, "mean_diff": round(test["mean_diff"], 4)},
        "changed": changed,
    }


# --- the leaderboard ---------------------------------------------------------------------------------


def leaderboard(digests: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per pack, runs ranked by pass@1; an entry whose 95 % interval overlaps its group leader's
    shares the leader's rank ("statistically tied"), the next group starts after them."""
    by_pack: dict[str, list[dict[str, Any]]] = {}
    for d in digests:
        if not d["episodes"]:
            continue
        by_pack.setdefault(d["pack"]["id"], []).append({
            "label": d["label"], "policy": d["policy_label"], "run_id": d["run_id"], "key": d.get("key", ""),
            "rate": d["pass1"]["rate"], "ci": list(d["pass1"]["ci"]), "episodes": d["episodes"],
            "passed": d["pass1"]["passed"], "cost_usd": d["usage"]["cost_usd"], "state": d["state"],
            "pass_hat": d["curve"][-1]["pass_hat"] if d["curve"] else 0.0,
            "k": d["curve"][-1]["k"] if d["curve"] else 1,
        })
    out = {}
    for pack, entries in sorted(by_pack.items()):
        out[pack] = rank(entries)
    return out


def rank(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sort by rate (ties broken by the lower bound) and give ranks with the overlap rule."""
    ordered = sorted(entries, key=lambda e: (-e["rate"], -e["ci"][0], e["label"]))
    placed = 0
    i = 0
    while i < len(ordered):
        leader = ordered[i]
        group = [leader]
        j = i + 1
        while j < len(ordered) and ordered[j]["ci"][1] >= leader["ci"][0]:
            group.append(ordered[j])
            j += 1
        for entry in group:
            entry["rank"] = placed + 1
            entry["tied"] = len(group) > 1
        placed += len(group)
        i = j
    return ordered


def check_run_dirs(paths: Iterable[Path]) -> list[Path]:
    """Every path must be a run directory; the error names the first that is not."""
    out = []
    for path in paths:
        path = Path(path)
        if not is_run_dir(path):
            what = "does not exist" if not path.exists() else f"has no {STORE_FILE}"
            raise AgentsynthError(f"{path}: not an agentsynth run directory ({what}); "
                                  "make one with `agentsynth bench ... --run-dir DIR` or `agentsynth run`")
        out.append(path)
    return out
