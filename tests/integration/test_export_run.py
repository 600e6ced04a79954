"""A real run exported in every training format, then deduplicated and decontaminated against its own
pack: `agentsynth run` (sql `core` pack, oracle, `export:` entries in the spec) -> `agentsynth export`
(hf, dpo) -> `agentsynth dedup --decontaminate core`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("agentsynth_sql")
pytest.importorskip("agentsynth_export")

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_DATASETS_OFFLINE": "1"}


def agentsynth(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300)


def test_run_export_dedup_decontaminate(tmp_path):
    import datasets
    import pyarrow.parquet as pq

    (tmp_path / "spec.yaml").write_text(
        "pack: core\npolicy: oracle\ntrials: 2\n"
        "export:\n"
        "  - {type: openai, path: out/sft.jsonl}\n"
        "  - {type: sharegpt, path: out/sharegpt.jsonl, dedup: true}\n"
        "  - {type: parquet, path: out/all.parquet}\n"
        "  - {type: jsonl, path: out/all.jsonl, canary: always}\n"
    )
    done = agentsynth("run", "spec.yaml", "--run-dir", "runs/oracle", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "out/all.jsonl").read_text().splitlines()]
    n = len(rows)
    assert n >= 20 and all(r["status"] == "passed" for r in rows)
    assert all(r["canary"].startswith("AGENTSYNTH CANARY GUID ") for r in rows)
    assert len({r["canary"] for r in rows}) == 1  # one canary per pack version
    sft = [json.loads(line) for line in (tmp_path / "out/sft.jsonl").read_text().splitlines()]
    assert len(sft) == n and all(m["messages"][-1]["role"] == "assistant" for m in sft)
    assert any(any(msg.get("tool_calls") for msg in m["messages"]) for m in sft)
    # both trials of an oracle task are the same trajectory: dedup keeps one per task
    sharegpt = (tmp_path / "out/sharegpt.jsonl").read_text().splitlines()
    assert len(sharegpt) == n // 2
    table = pq.read_table(tmp_path / "out/all.parquet")
    assert table.num_rows == n and table.column("pack").to_pylist()[0] == "core"

    done = agentsynth("export", "runs/oracle", "-f", "hf", "-o", "out/hf", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ds = datasets.load_from_disk(str(tmp_path / "out/hf"))
    assert len(ds) == n and set(ds["status"]) == {"passed"}

    # the run's own pack is the benchmark: every record is contaminated
    done = agentsynth("dedup", "runs/oracle", "--decontaminate", "core", "--scope", "instruction", "--json",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seen"] == n and report["contaminated"] == n and report["kept"] == 0
