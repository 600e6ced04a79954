"""Judge calls saved vs agreement lost by confidence routing, at several thresholds.

Runs the `core` pack (agentsynth-sql) for training (oracle, noop, random, a careless agent) and for
routing (fresh seeds), trains a verifier on the training runs' verdicts, judges every fresh item
with the blind heuristic judge (the baseline, measured in the same run), then routes the fresh
items at each threshold pair. Writes JSON with the machine load before and after::

    python plugins/agentsynth-judge/bench/bench_route.py --out route-bench.json
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
SLOPPY = HERE.parent / "tests" / "sloppy_agent.py"
THRESHOLDS = [(0.95, 0.05), (0.9, 0.1), (0.8, 0.2), (0.7, 0.3), (0.6, 0.4), (0.5, 0.5 - 1e-9)]
RUNS = {
    "oracle": ("oracle", 1, None),
    "noop": ("noop", 1, None),
    "random": ("{type: random, calls: 3}", 2, None),
    "sloppy": (f"{{type: callable, function: '{SLOPPY}:SloppyOracle'}}", 3, None),
    "fresh-sloppy": (f"{{type: callable, function: '{SLOPPY}:SloppyOracle'}}", 3, 7),
    "fresh-random": ("{type: random, calls: 3}", 1, 7),
    "fresh-oracle": ("oracle", 1, 7),
}
TRAIN, FRESH = ("oracle", "noop", "random", "sloppy"), ("fresh-sloppy", "fresh-random", "fresh-oracle")


def run_cli(*argv: str) -> int:
    from agentsynth_kernel.cli import main

    try:
        main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "results.json"))
    ap.add_argument("--llm-delay", type=float, default=0.05,
                    help="Seconds the stand-in LLM judge (a scripted server on 127.0.0.1) takes per reply.")
    ap.add_argument("--workdir", help="Keep the runs here (default: a temporary directory).")
    args = ap.parse_args()
    missing = [m for m in ("sklearn", "skops") if importlib.util.find_spec(m) is None]
    if missing:  # the learned extra is not installed: say so, do not fail a bench session
        print(f"bench_route: skipped: the learned verifier needs {' and '.join(missing)} "
              "(pip install 'agentsynth-judge[learned]')", file=sys.stderr)
        return
    load_before = os.getloadavg()
    base = Path(args.workdir or tempfile.mkdtemp(prefix="route-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(SLOPPY.parent))

    from agentsynth_judge import HeuristicJudge
    from agentsynth_judge.cli import _read_runs
    from agentsynth_judge.learned import label_examples, train_verifier
    from agentsynth_judge.routing import route_results

    t0 = time.perf_counter()
    for name, (policy, trials, seed) in RUNS.items():
        spec = base / f"{name}.yaml"
        spec.write_text(f"pack: core\npolicy: {policy}\ntrials: {trials}\nconcurrency: 4\n", encoding="utf-8")
        extra = ["--seed", str(seed)] if seed else []
        if not (base / name).exists():
            assert run_cli("run", str(spec), "--run-dir", str(base / name), "-q", *extra) == 0, name
    runs_s = time.perf_counter() - t0

    train_pairs, infos, _ = _read_runs([base / n for n in TRAIN])
    t0 = time.perf_counter()
    examples, _ = asyncio.run(label_examples(train_pairs, "verdicts"))
    verifier, report = train_verifier(examples, label_source="verdicts", runs=infos)
    train_s = time.perf_counter() - t0

    fresh, _, _ = _read_runs([base / n for n in FRESH])
    judge = HeuristicJudge()
    t0 = time.perf_counter()
    baseline = asyncio.run(route_results(fresh, verifier, judge, accept_above=1.0, drop_below=0.0, compare=True))
    baseline_s = time.perf_counter() - t0
    judge_all = {(r["run"], r["task_id"], r["trial"]): r["judge_all"] for r in baseline.rows}
    world = [r for r in baseline.rows if r["world"] in ("passed", "failed")]
    all_vs_world = sum(r["judge_all"] == (r["world"] == "passed") for r in world) / len(world)

    results: list[dict[str, Any]] = []
    for accept, drop in THRESHOLDS:
        t0 = time.perf_counter()
        rep = asyncio.run(route_results(fresh, verifier, judge, accept_above=accept, drop_below=drop))
        seconds = time.perf_counter() - t0
        d = rep.to_dict()
        same = sum(r["passed"] == judge_all[(r["run"], r["task_id"], r["trial"])] for r in rep.rows)
        results.append({
            "accept_above": accept, "drop_below": round(drop, 4), "n": d["n"], "accepted": d["accepted"],
            "dropped": d["dropped"], "judged": d["judged"], "out_of_distribution": d["novel"],
            "judge_calls": d["judge_calls"], "judge_calls_saved": d["judge_calls_saved"],
            "saved_fraction": d["saved_fraction"],
            "agreement_with_judge_all": round(same / d["n"], 4), "agreement_lost": round(1 - same / d["n"], 4),
            "routed_vs_world": d["vs_world"]["routed"], "judge_all_vs_world": round(all_vs_world, 4),
            "auto_vs_world": d["vs_world"]["auto"], "seconds": round(seconds, 4),
        })
        print(f"accept >= {accept:<4} drop <= {drop:<6.2f} saved {d['judge_calls_saved']:>3}/{d['n']} "
              f"({d['saved_fraction']:.0%})  agreement with judge-all {same / d['n']:.3f}  "
              f"vs world {d['vs_world']['routed']:.3f} (judge-all {all_vs_world:.3f})")
    llm = asyncio.run(_llm_judge_timing(fresh, verifier, args.llm_delay))
    out = {
        "benchmark": "agentsynth-judge route", "machine": {
            "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "platform": platform.platform()},
        "runs_seconds": round(runs_s, 2), "train": {"seconds": round(train_s, 3), **report},
        "baseline": {"judge": "heuristic (blind), every item", "n": len(baseline.rows), "judge_calls": len(baseline.rows),
                     "vs_world": round(all_vs_world, 4), "seconds": round(baseline_s, 4)},
        "thresholds": results, "llm_judge": llm, "workdir": str(base),
    }
    Path(args.out).write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"-> {args.out}")


async def _llm_judge_timing(fresh: Any, verifier: Any, delay: float) -> dict[str, Any]:
    """Wall time and requests of an llm judge (a stand-in: the kernel's scripted OpenAI-compatible server on
    127.0.0.1, ``delay`` s per reply) judging everything vs routed, 4 judgements in flight."""
    from agentsynth_judge import DEFAULT_RUBRIC, LLMJudge
    from agentsynth_judge.routing import route_results
    from agentsynth_kernel.testing import ScriptedLLMServer, reply

    body = json.dumps({"dimensions": {n: {"score": 8, "rationale": "ok"} for n in DEFAULT_RUBRIC.names},
                       "rationale": "stand-in judge"})
    out: dict[str, Any] = {"stand_in": f"scripted OpenAI-compatible server on 127.0.0.1, {delay} s per reply",
                           "concurrency": 4, "by_threshold": []}
    with ScriptedLLMServer(handler=lambda _req: reply(body, delay=delay)) as server:
        judge = LLMJudge("openai/stand-in", api_base=server.base_url, cache=False)
        gate = asyncio.Semaphore(4)

        async def one(r: Any) -> None:
            async with gate:
                await judge.score(r.trajectory, [])

        t0 = time.perf_counter()
        await asyncio.gather(*(one(r) for _, r in fresh if r.trajectory is not None))
        out["everything_judged"] = {"requests": len(server.requests), "seconds": round(time.perf_counter() - t0, 3)}
        for accept, drop in [(0.9, 0.1), (0.8, 0.2), (0.7, 0.3)]:
            before = len(server.requests)
            t0 = time.perf_counter()
            rep = await route_results(fresh, verifier, judge, accept_above=accept, drop_below=drop, concurrency=4)
            out["by_threshold"].append({"accept_above": accept, "drop_below": drop, "requests": len(server.requests) - before,
                                        "judge_calls": rep.judge_calls, "seconds": round(time.perf_counter() - t0, 3)})
        await judge.client.aclose()
    return out


if __name__ == "__main__":
    main()
