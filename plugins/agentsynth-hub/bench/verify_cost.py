"""What verifying a submission costs: the hub's answer time for core runs, per replay sample.

    python plugins/agentsynth-hub/bench/verify_cost.py      # writes bench/results.json next to this file

A real hub process on 127.0.0.1 per sample size, real oracle runs (1 and 4 trials) from `agentsynth bench`.
"""

from __future__ import annotations

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
    from agentsynth_hub.client import build_submission, encode, post
    from agentsynth_hub.db import HubDB

    root = Path(tempfile.mkdtemp(prefix="hub-bench-"))
    runs = {}
    for trials in (1, 4):
        run = root / f"oracle-{trials}"
        subprocess.run([*CLI, "bench", "--pack", "core", "--policy", "oracle", "-k", str(trials), "--run-dir", str(run),
                        "-q"], check=True, env=ENV)
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
                             "build_s": round(built, 3), "hub_s": round(seconds, 3), "upload_bytes": len(body),
                             "payload_bytes": len(gzip.decompress(body))})
                print(rows[-1], flush=True)
        finally:
            proc.terminate()
            proc.wait()
    out = {"load_average": os.getloadavg(), "cpus": os.cpu_count(), "rows": rows,
           "note": "build_s: reading the run directory into a gzip submission; hub_s: the POST, i.e. the hub's checks, recomputation and replays, until its answer"}
    (Path(__file__).parent / "results.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
