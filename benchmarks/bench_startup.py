"""Start-up and teardown CPU of the ``agentsynth`` command (issue #21).

CPU time (user + sys of the child, from ``wait4``), never wall time: the machine is shared. For each
environment, (a) only the kernel + agentsynth-sql (``.nox/plugin-agentsynth-sql``) and (b) every
plugin (``.nox/together``), the median of N runs of:

- ``python -c pass`` (the floor, measured in the same run: every figure is also given as a ratio to it)
- ``agentsynth --help``
- ``agentsynth plugins``
- ``agentsynth bench --pack core --policy oracle -q`` (22 episodes of ~1 ms: almost all start-up and teardown)

``--baseline DIR`` also measures another copy of the repository (e.g. ``git archive`` of an older
commit unpacked in DIR) in the same venvs: its kernel and plugin packages shadow the editable installs
through ``PYTHONPATH``. Runs of both copies alternate, so load changes hit both alike.

Writes $AGENTSYNTH_BENCH_OUT/startup.json (default benchmarks/results/), with ``os.getloadavg()``
before and after.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results"))
VENVS = {"sql_only": ROOT / ".nox" / "plugin-agentsynth-sql", "everything": ROOT / ".nox" / "together"}
CWD = tempfile.mkdtemp(prefix="agentsynth-bench-startup-")
COMMANDS = {
    "python_pass": ["-c", "pass"],
    "help": ["-m", "agentsynth_kernel", "--help"],
    "plugins": ["-m", "agentsynth_kernel", "plugins"],
    "bench_core_oracle": ["-m", "agentsynth_kernel", "bench", "--pack", "core", "--policy", "oracle", "-q"],
}


def _env(copy: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    # each copy its own cache (``agentsynth plugins`` caches its listing, keyed on the installed
    # distributions, which both copies share), warmed by the first run like a user's
    env["AGENTSYNTH_CACHE_DIR"] = os.path.join(CWD, "cache-baseline" if copy is not None else "cache-current")
    if copy is not None:  # the copy's packages first: the kernel and every plugin directory
        env["PYTHONPATH"] = os.pathsep.join([str(copy)] + sorted(str(p) for p in (copy / "plugins").glob("agentsynth-*")))
    return env


def cpu_of(argv: list[str], env: dict[str, str]) -> float:
    """User + sys CPU seconds of one child process (and its children), from its rusage."""
    # a neutral working directory: ``-m`` puts it first on sys.path, where it would shadow a --baseline copy
    proc = subprocess.Popen(argv, env=env, cwd=CWD, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err.decode(errors='replace')[-400:]}")
    return usage.ru_utime + usage.ru_stime


def measure(repeats: int, baseline: Path | None, only: list[str] | None) -> dict[str, object]:
    copies: dict[str, Path | None] = {"current": None}
    if baseline is not None:
        copies["baseline"] = baseline
    results: dict[str, object] = {}
    for venv_name, venv in VENVS.items():
        python = venv / "bin" / "python"
        if not python.exists():
            results[venv_name] = {"skipped": f"{venv} does not exist (nox -s 'tests' creates it)"}
            continue
        commands = {k: v for k, v in COMMANDS.items() if only is None or k in only or k == "python_pass"}
        samples: dict[str, dict[str, list[float]]] = {c: {k: [] for k in commands} for c in copies}
        for copy in copies.values():  # warm up: .pyc files written, page cache filled
            for args in commands.values():
                cpu_of([str(python), *args], _env(copy))
        for _ in range(repeats):
            for key, args in commands.items():
                for copy_name, copy in copies.items():  # alternate: both copies see the same load
                    samples[copy_name][key].append(cpu_of([str(python), *args], _env(copy)))
        out: dict[str, object] = {}
        for copy_name in copies:
            floor = statistics.median(samples[copy_name]["python_pass"])
            out[copy_name] = {
                key: {"cpu_s_median": round(statistics.median(values), 4), "cpu_s_min": round(min(values), 4),
                      "ratio_vs_python": round(statistics.median(values) / floor, 1) if floor else None}
                for key, values in samples[copy_name].items()
            }
        if baseline is not None:
            out["saved_cpu_s"] = {
                key: round(out["baseline"][key]["cpu_s_median"] - out["current"][key]["cpu_s_median"], 4)  # type: ignore[index]
                for key in commands if key != "python_pass"
            }
        results[venv_name] = out
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--repeats", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another copy of the repository to measure alongside")
    parser.add_argument("--only", nargs="*", choices=sorted(COMMANDS), help="measure only these commands")
    args = parser.parse_args()
    load_before = os.getloadavg()
    results = measure(args.repeats, args.baseline, args.only)
    report = {
        "benchmark": "startup",
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "repeats": args.repeats,
        "measure": "user+sys CPU seconds of the child process (wait4 rusage), median of repeats",
        "baseline": str(args.baseline) if args.baseline else None,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "results": results,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "startup.json").write_text(json.dumps(report, indent=2) + "\n")
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
