"""Reset, tool-call and check latency of the python world, per backend, against the bare work it wraps.

Run: python bench/bench_latency.py [--backend all|bwrap|container] [--n 20] [--out bench/results.json]
     [--container-out bench/container_results.json]

Medians and p90 in milliseconds, all measured in the same run, with the machine's load average
before and after. ``reset`` = kill the previous sandbox, a fresh world dir with the seeded files, a
new sandbox with its interpreter ready. No warm pool: every reset starts a new sandbox (that is the
isolation).

- bwrap (``results.json``): against ``python -I -S -c pass`` and the same inside bwrap.
- container (``container_results.json``): the container backend against the bwrap backend and a
  bare ``podman run --rm IMAGE true`` (with only the flags this host needs), ``--n`` halved (a
  container reset costs ~0.5 s). Skipped with a message when no container runtime or image is
  there (``agentsynth-python build-image`` builds it); the committed results are then left as they
  were.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentsynth_kernel import ToolCall
from agentsynth_python import PythonEnvironment
from agentsynth_python import container as c
from agentsynth_python.checkers import PythonFile, PythonValue
from agentsynth_python.sandbox import Limits, bwrap_argv, probe, python_install

HERE = Path(__file__).resolve().parent
PACK = HERE.parent / "agentsynth_python" / "packs" / "python-data"


def timed(fn: Callable[[], Any], n: int) -> dict[str, Any]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return {"median_ms": round(statistics.median(samples), 2), "p90_ms": round(samples[int(0.9 * (n - 1))], 2), "n": n}


def machine(load_before: tuple[float, ...], **extra: Any) -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), **extra,
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def bare_bwrap_argv() -> list[str]:
    """``python -I -S -c pass`` inside a bwrap sandbox with the world's flags: the floor of a reset."""
    exe, _ = python_install()
    return [*bwrap_argv(Path(tempfile.mkdtemp()), writable=True, limits=Limits(), packages=[]),
            exe, "-I", "-S", "-c", "pass"]


def world_costs(env: PythonEnvironment, n: int, *, extra: bool) -> dict[str, Any]:
    """reset, python_exec, the value check (a fresh sandbox per check) and close of one backend;
    ``extra``: also a CSV read, a shell command and the host-read file check."""
    out = {"reset": timed(lambda: env.reset(0), n)}
    env.reset(0)
    out["step_python_exec_1plus1"] = timed(lambda: env.step(ToolCall("python_exec", {"code": "1 + 1"})), n * 5)
    if extra:
        out["step_python_exec_read_csv"] = timed(lambda: env.step(ToolCall(
            "python_exec", {"code": "import csv\nlen(list(csv.DictReader(open('sales.csv'))))"})), n * 5)
        out["step_shell_echo"] = timed(lambda: env.step(ToolCall("shell", {"command": "echo hi"})), n * 5)
    value = PythonValue(expr="len(read_csv('sales.csv'))", equals=40)
    out["check_python_value_fresh_sandbox"] = timed(lambda: value.check(env, None), n)
    if extra:
        file_check = PythonFile(file="inventory.json", json_path="$.warehouses.east.items[0].sku", equals="MUG-01")
        out["check_python_file_host_read"] = timed(lambda: file_check.check(env, None), n * 5)
    closes = []
    for _ in range(n):
        env.reset(0)
        start = time.perf_counter()
        env.close()
        closes.append((time.perf_counter() - start) * 1000)
    closes.sort()
    out["close"] = {"median_ms": round(statistics.median(closes), 2), "p90_ms": round(closes[int(0.9 * (n - 1))], 2),
                    "n": n}
    return out


def bench_bwrap(n: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    exe, _ = python_install()
    bare = bare_bwrap_argv()
    results: dict[str, Any] = {
        "bare_python_start": timed(lambda: subprocess.run([exe, "-I", "-S", "-c", "pass"], check=True), n),
        "bare_bwrap_python_start": timed(lambda: subprocess.run(bare, check=True), n),
    }
    results.update(world_costs(PythonEnvironment(base_dir=PACK, files="world"), n, extra=True))
    results["reset_over_bare_bwrap"] = round(results["reset"]["median_ms"] /
                                             results["bare_bwrap_python_start"]["median_ms"], 2)
    return {"machine": machine(load_before), **results}


def bench_container(n: int, rt: c.Runtime) -> dict[str, Any]:
    load_before = os.getloadavg()
    oci = ["--runtime", rt.oci_runtime] if rt.oci_runtime else []
    image = ["--rootfs", rt.rootfs] if rt.rootfs else [str(rt.image)]
    bare_container = [rt.path, *oci, "run", "--rm", "--network", "none", "--ulimit", "nofile=256:256",
                      "--ulimit", "nproc=64:64", *image, "true"]
    bare = bare_bwrap_argv()
    results: dict[str, Any] = {
        "bare_container_run_true": timed(lambda: subprocess.run(bare_container, check=True), n),
        "bare_bwrap_python_start": timed(lambda: subprocess.run(bare, check=True), n),
    }
    for backend in ("bwrap", "container"):
        env = PythonEnvironment(base_dir=PACK, files="world", isolation=backend)
        for key, value in world_costs(env, n, extra=False).items():
            results[f"{key.replace('_fresh_sandbox', '')}_{backend}"] = value
    results["reset_container_over_bare_container"] = round(
        results["reset_container"]["median_ms"] / results["bare_container_run_true"]["median_ms"], 2)
    results["reset_container_over_reset_bwrap"] = round(
        results["reset_container"]["median_ms"] / results["reset_bwrap"]["median_ms"], 2)
    return {"machine": machine(load_before, runtime=c.describe(rt)), **results}


def write(path: Path, results: dict[str, Any]) -> None:
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    print(f"-> {path}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("all", "bwrap", "container"), default="all")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    parser.add_argument("--container-out", type=Path, default=HERE / "container_results.json")
    args = parser.parse_args()
    why_not = probe()
    if why_not:  # both backends compare against bwrap
        print(f"bench_latency: skipped, no bwrap sandbox here: {why_not}", file=sys.stderr)
        return 0
    if args.backend in ("all", "bwrap"):
        write(args.out, bench_bwrap(args.n))
    if args.backend in ("all", "container"):
        try:
            rt = c.probe(c.ContainerSpec())
        except c.ContainerError as exc:
            print(f"bench_latency: container backend skipped ({args.container_out} left as it was): {exc}",
                  file=sys.stderr)
            return 0
        write(args.container_out, bench_container(max(3, args.n // 2), rt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
