"""Benchmark: the report of a 10,000-episode run: build time, file size, memory, load in Chromium.

    python plugins/agentsynth-report/bench/bench_report_load.py [--episodes 10000] [--out bench/results.json]

Targets (issue #20): the file stays under 20 MB and opens in under 2 s in Chromium. Measured in the
same run as baselines: a blank page's load in the same browser (the machine's floor), and the size
the episodes would take as plain JSON (what the gzip chunks save). The run is synthetic (written
through the real run store: 6 tool calls per episode with LLM-like observations, costs, judge
scores, every failure kind), since no local pack makes 10,000 LLM episodes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from agentsynth_report.html import build_report
from agentsynth_report.synthetic import write_run

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--no-first-run"]


def load_times(url: str, repeats: int) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    wall, app, dcl, loaded, viewer = [], [], [], [], []
    is_report = "report" in url
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            started = time.perf_counter()
            page.goto(url, wait_until="commit")
            page.wait_for_selector("body[data-ready]" if is_report else "body")
            wall.append(1000 * (time.perf_counter() - started))
            page.wait_for_load_state("load")
            nav = page.evaluate("performance.getEntriesByType('navigation')[0].toJSON()")
            dcl.append(nav["domContentLoadedEventEnd"])
            loaded.append(nav["loadEventEnd"])
            if is_report:
                app.append(float(page.get_attribute("body", "data-ready") or 0))
                t = time.perf_counter()
                page.locator("button.open").first.click()
                page.wait_for_selector("#viewer.open .episode li.step")
                viewer.append(1000 * (time.perf_counter() - t))
            page.close()
        browser.close()
    # wall: page.goto() until the report is drawn (what a user waits for; the episode data after it
    # is still being read); the others from the page's navigation start
    out = {"wall_ms_median": statistics.median(wall), "wall_ms_max": max(wall),
           "dom_content_loaded_ms_median": statistics.median(dcl), "load_event_ms_median": statistics.median(loaded)}
    if is_report:
        out["app_ready_ms_median"] = statistics.median(app)
        out["open_episode_ms_median"] = statistics.median(viewer)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = parser.parse_args()
    import importlib.util

    if importlib.util.find_spec("playwright") is None or not Path(CHROMIUM).exists():
        print(f"bench_report_load: skipped: needs playwright and Chromium at {CHROMIUM}", file=sys.stderr)
        return
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        t = time.perf_counter()
        write_run(run, tasks=args.episodes // args.trials, trials=args.trials, seed=7, steps=6)
        write_s = time.perf_counter() - t
        out = Path(tmp) / "report.html"
        info = build_report([run], out)  # timed without tracemalloc (it slows allocation down)
        tracemalloc.start()
        build_report([run], Path(tmp) / "traced.html")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        blank = Path(tmp) / "blank.html"
        blank.write_text("<!doctype html><html><body><p>blank</p></body></html>")
        baseline = load_times(blank.as_uri(), args.repeats)
        report = load_times(out.as_uri(), args.repeats)
        result = {
            "benchmark": "agentsynth-report: report of a synthetic run",
            "episodes": info["episodes"],
            "report_bytes": info["bytes"],
            "report_mb": round(info["bytes"] / 1e6, 2),
            "episodes_as_plain_json_bytes": info["episode_json_bytes"],
            "build_s": info["seconds"],
            "build_peak_python_mb": round(peak / 1e6, 1),
            "process_max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "chromium_report": report,
            "chromium_blank_page_baseline": baseline,
            "targets": {"report_mb_below": 20, "wall_ms_below": 2000},
            "met": info["bytes"] < 20e6 and report["wall_ms_max"] < 2000,
            "store_write_s": round(write_s, 2),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
