"""What one round of the sandbox guard costs (it runs every 0.25 s per sandbox, between calls too).

Baseline, measured in the same run: the round as it was (the sandbox's processes from /proc and
their proportional set size). Then the round as it is: plus unlinked files held through
/proc/PID/fd and map_files, /tmp's inodes, and the socket buffers of the sandbox's network
namespace (sock_diag). Both over an idle sandbox (the interpreter) and a busy one (16 processes,
each with 64 open files and 8 socketpairs). Results as JSON with the load average before and after.

    python plugins/agentsynth-python/bench/bench_guard.py [--out bench/guard_results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentsynth_kernel import ToolCall
from agentsynth_python import PythonEnvironment
from agentsynth_python.sandbox import memory_of, probe, processes_in, tmp_entries, unlinked_files

BUSY = """import os, socket, subprocess, sys
child = '''import os, socket, time
files = [open('/dev/null') for _ in range(64)]
pairs = [socket.socketpair() for _ in range(8)]
time.sleep(3600)'''
kids = [subprocess.Popen([sys.executable, '-c', child]) for _ in range(16)]
"""


def rounds(env: PythonEnvironment, n: int) -> dict[str, float]:
    proc = env.proc
    assert proc is not None and proc.namespace is not None
    before, after = [], []
    for _ in range(n):
        started = time.perf_counter()
        pids = processes_in({proc.namespace})
        memory_of(proc.namespace, pids)
        before.append(time.perf_counter() - started)
        started = time.perf_counter()
        pids = processes_in({proc.namespace})
        memory_of(proc.namespace, pids)
        unlinked_files(pids)
        tmp_entries(pids)
        proc.socket_bytes(pids)
        after.append(time.perf_counter() - started)
    return {"processes": len(processes_in({proc.namespace})),
            "baseline_round_ms": round(statistics.median(before) * 1000, 3),
            "round_ms": round(statistics.median(after) * 1000, 3),
            "ratio": round(statistics.median(after) / statistics.median(before), 2)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).with_name("guard_results.json")))
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    if probe():
        print(f"skipped: no bwrap sandbox here: {probe()}")
        return 0
    load_before = os.getloadavg()
    env = PythonEnvironment(base_dir=Path(tempfile.gettempdir()), isolation="bwrap", max_processes=64)
    try:
        env.reset(0)
        idle = rounds(env, args.rounds)
        env.step(ToolCall("python_exec", {"code": BUSY}))
        time.sleep(2)
        busy = rounds(env, args.rounds)
    finally:
        env.close()
    result = {"what": "one guard round (every 0.25 s per sandbox)", "rounds": args.rounds, "idle": idle, "busy": busy,
              "host_processes": sum(1 for p in os.listdir("/proc") if p.isdigit()),
              "load_before": load_before, "load_after": os.getloadavg(), "python": sys.version.split()[0]}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
