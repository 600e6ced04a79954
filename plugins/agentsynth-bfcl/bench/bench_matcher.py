"""How fast the AST matcher scores BFCL items, next to a baseline measured in the same run.

Baseline: comparing the calls with the ground truth by plain equality of canonical JSON (what a
checker without BFCL's rules would cost). Runs on the installed bfcl-eval's data (or
$AGENTSYNTH_BFCL_DATA, or the test subset) and writes bench/results.json::

    python plugins/agentsynth-bfcl/bench/bench_matcher.py
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from agentsynth_bfcl.convert import CATEGORIES, data_dir, data_version, load_items
from agentsynth_bfcl.matcher import ground_truth_calls, match

HERE = Path(__file__).parent


def main() -> None:
    directory = data_dir() or HERE.parent / "tests" / "data" / "bfcl"
    load_before = os.getloadavg()
    rows = {}
    for name, cat in CATEGORIES.items():
        if cat.kind != "calls" or not (directory / f"BFCL_v4_{cat.stem}.json").is_file():
            continue
        items = load_items(name, directory)
        cases = [(it["function"], ground_truth_calls(it["function"], it["answers"]), it["answers"]) for it in items]
        reps = max(1, 20_000 // len(cases))
        started = time.perf_counter()
        passed = 0
        for _ in range(reps):
            for functions, calls, answers in cases:
                passed += match(functions, calls, answers).passed
        ast_s = time.perf_counter() - started
        canon = [(json.dumps(calls, sort_keys=True), json.dumps(answers, sort_keys=True)) for _, calls, answers in cases]
        started = time.perf_counter()
        for _ in range(reps):
            for (_, calls, _answers), (_, want) in zip(cases, canon, strict=True):
                _ = json.dumps(calls, sort_keys=True) == want
        base_s = time.perf_counter() - started
        n = reps * len(cases)
        rows[name] = {"items": len(cases), "scored": n, "passed_share": round(passed / n, 4),
                      "ast_us_per_item": round(ast_s / n * 1e6, 2),
                      "baseline_json_equality_us_per_item": round(base_s / n * 1e6, 2),
                      "ratio": round(ast_s / base_s, 2) if base_s else None}
    result = {"bench": "bfcl_matcher", "data": data_version(directory), "python": platform.python_version(),
              "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "categories": rows}
    (HERE / "results.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
