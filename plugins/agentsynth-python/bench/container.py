"""Per-episode reset cost of the container backend vs the bubblewrap backend vs a bare container.

Run: python bench/container.py [--out bench/container_results.json] [--n 10]
Medians and p90 in milliseconds, all measured in the same run, with the machine's load average
before and after. ``reset`` = kill the previous sandbox (the container removed), a fresh world dir
with the seeded files, a new sandbox with its interpreter ready. The bare costs: ``podman run
--rm IMAGE true`` (with only the flags this host needs) and ``python -I -S -c pass`` inside bwrap.
No warm pool: every reset starts a new container (that is the isolation).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentsynth_kernel import ToolCall
from agentsynth_python import PythonEnvironment
from agentsynth_python import container as c
from agentsynth_python.checkers import PythonValue
from agentsynth_python.sandbox import Limits, bwrap_argv, python_install

PACK = Path(__file__).resolve().parents[1] / "agentsynth_python" / "packs" / "python-data"


def timed(fn, n):
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 1), "p90_ms": round(samples[int(0.9 * (n - 1))], 1), "n": n}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).with_name("container_results.json")))
    parser.add_argument("--n", type=int, default=10)
    args = parser.parse_args()
    n = args.n
    rt = c.probe(c.ContainerSpec())
    load_before = os.getloadavg()
    exe, _ = python_install()
    world = Path(tempfile.mkdtemp())
    oci = ["--runtime", rt.oci_runtime] if rt.oci_runtime else []
    image = ["--rootfs", rt.rootfs] if rt.rootfs else [str(rt.image)]
    bare_container = [rt.path, *oci, "run", "--rm", "--network", "none", "--ulimit", "nofile=256:256",
                      "--ulimit", "nproc=64:64", *image, "true"]
    bare_bwrap = [*bwrap_argv(world, writable=True, limits=Limits(), packages=[]), exe, "-I", "-S", "-c", "pass"]
    results: dict = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "runtime": c.describe(rt),
                    "load_before": [round(x, 2) for x in load_before]},
        "bare_container_run_true": timed(lambda: subprocess.run(bare_container, check=True), n),
        "bare_bwrap_python_start": timed(lambda: subprocess.run(bare_bwrap, check=True), n),
    }
    for backend in ("bwrap", "container"):
        env = PythonEnvironment(base_dir=PACK, files="world", isolation=backend)
        results[f"reset_{backend}"] = timed(lambda env=env: env.reset(0), n)
        env.reset(0)
        results[f"step_python_exec_1plus1_{backend}"] = timed(
            lambda env=env: env.step(ToolCall("python_exec", {"code": "1 + 1"})), n * 5)
        value = PythonValue(expr="len(read_csv('sales.csv'))", equals=40)
        results[f"check_python_value_{backend}"] = timed(lambda env=env, value=value: value.check(env, None), n)
        closes = []
        for _ in range(n):
            env.reset(0)
            start = time.perf_counter()
            env.close()
            closes.append((time.perf_counter() - start) * 1000)
        closes.sort()
        results[f"close_{backend}"] = {"median_ms": round(statistics.median(closes), 1),
                                       "p90_ms": round(closes[int(0.9 * (n - 1))], 1), "n": n}
    results["reset_container_over_bare_container"] = round(
        results["reset_container"]["median_ms"] / results["bare_container_run_true"]["median_ms"], 2)
    results["reset_container_over_reset_bwrap"] = round(
        results["reset_container"]["median_ms"] / results["reset_bwrap"]["median_ms"], 2)
    results["machine"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
