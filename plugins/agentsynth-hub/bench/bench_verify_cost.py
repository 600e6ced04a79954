"""What verifying a submission costs: the hub's answer time for core runs, per replay sample.

    python plugins/agentsynth-hub/bench/bench_verify_cost.py      # writes bench/results.json next to this file

A real hub process on 127.0.0.1 per sample size, real oracle runs (1 and 4 trials) from `agentsynth bench`.
Baseline, measured in the same run: the wall time of the `agentsynth bench` process that produced the run
(start-up included); ``hub_over_run`` is the hub's answer time over it (what verifying costs against
producing). The load average is recorded before and after.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [sys.executable, "-m", "agentsynth_kernel"]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results.json")
    args = parser.parse_args()
    from agentsynth_hub.client import build_submission, encode, post
    from agentsynth_hub.db import HubDB

    load_before = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    runs = {}
    run_s = {}
    for trials in (1, 4):
        run = root / f"oracle-{trials}"
        started = time.perf_counter()
        subprocess.run([*CLI, "bench", "--pack", "core", "--policy", "oracle", "-k", str(trials), "--run-dir", str(run),
                        "-q"], check=True, env=ENV)
        run_s[trials] = time.perf_counter() - started
        runs[trials] = run
    rows = []
    for sample in (0, 8, 32, 88):
        db = root / f"hub-{sample}.sqlite"
        store = HubDB(str(db))
        token = store.create_token("bench")
        store.close()
        proc = subprocess.Popen([*CLI, "hub", "serve", "--db", str(db), "--port", "0", "--pack", "core", "--sample",
                                 str(sample)], stdout=subprocess.PIPE, text=True, env=ENV)
        url = proc.stdout.readline().split()[-1] if proc.stdout else ""
        while not url.startswith("http"):
            url = proc.stdout.readline().split()[-1]
        try:
            for trials, run in runs.items():
                started = time.perf_counter()
                body = encode(build_submission(run))
                built = time.perf_counter() - started
                started = time.perf_counter()
                status, answer = post(url, body, token=token)
                seconds = time.perf_counter() - started
                assert status == 201, answer
                rows.append({"sample": sample, "episodes": 22 * trials, "replayed": answer.get("replayed"),
                             "build_s": round(built, 3), "hub_s": round(seconds, 3),
                             "run_s": round(run_s[trials], 3), "hub_over_run": round(seconds / run_s[trials], 3),
                             "upload_bytes": len(body),
                             "payload_bytes": len(gzip.decompress(body))})
                print(rows[-1], flush=True)
        finally:
            proc.terminate()
            proc.wait()
    out = {"load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
           "cpus": os.cpu_count(), "rows": rows,
           "note": ("build_s: reading the run directory into a gzip submission; hub_s: the POST, i.e. the hub's checks, "
                    "recomputation and replays, until its answer; run_s: the agentsynth bench process that made the run "
                    "(start-up included), the baseline of hub_over_run")}
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
