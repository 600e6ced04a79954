"""Reset and tool-call latency of the python world, against the bare work it wraps.

Run: python bench/latency.py [--out bench/results.json] [--n 20]
Medians and p90 in milliseconds. ``reset`` = fresh world dir + seeded files + a bwrap sandbox with
its interpreter ready; the bare costs are ``python -I -S -c pass`` and the same inside bwrap.
No warm pool: every reset starts a new sandbox (that is the isolation).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentsynth_kernel import ToolCall
from agentsynth_python import PythonEnvironment
from agentsynth_python.checkers import PythonFile, PythonValue
from agentsynth_python.sandbox import Limits, bwrap_argv, python_install

PACK = Path(__file__).resolve().parents[1] / "agentsynth_python" / "packs" / "python-data"


def timed(fn, n):
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 2), "p90_ms": round(samples[int(0.9 * (n - 1))], 2), "n": n}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).with_name("results.json")))
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    n = args.n
    exe, _ = python_install()
    world = Path(tempfile.mkdtemp())
    bare_bwrap = [*bwrap_argv(world, writable=True, limits=Limits(), packages=[]), exe, "-I", "-S", "-c", "pass"]
    results = {
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count(),
                    "load_1min": __import__("os").getloadavg()[0]},
        "bare_python_start": timed(lambda: subprocess.run([exe, "-I", "-S", "-c", "pass"], check=True), n),
        "bare_bwrap_python_start": timed(lambda: subprocess.run(bare_bwrap, check=True), n),
    }
    env = PythonEnvironment(base_dir=PACK, files="world")
    results["reset"] = timed(lambda: env.reset(0), n)
    env.reset(0)
    results["step_python_exec_1plus1"] = timed(lambda: env.step(ToolCall("python_exec", {"code": "1 + 1"})), n * 5)
    results["step_python_exec_read_csv"] = timed(lambda: env.step(ToolCall(
        "python_exec", {"code": "import csv\nlen(list(csv.DictReader(open('sales.csv'))))"})), n * 5)
    results["step_shell_echo"] = timed(lambda: env.step(ToolCall("shell", {"command": "echo hi"})), n * 5)
    value = PythonValue(expr="len(read_csv('sales.csv'))", equals=40)
    results["check_python_value_fresh_sandbox"] = timed(lambda: value.check(env, None), n)
    file_check = PythonFile(file="inventory.json", json_path="$.warehouses.east.items[0].sku", equals="MUG-01")
    results["check_python_file_host_read"] = timed(lambda: file_check.check(env, None), n * 5)
    env.close()
    results["reset_over_bare_bwrap"] = round(results["reset"]["median_ms"] /
                                             results["bare_bwrap_python_start"]["median_ms"], 2)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    sys.exit(main())
