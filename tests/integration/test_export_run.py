"""A real run exported in every training format, then deduplicated and decontaminated against its own
pack: `agentsynth run` (sql `core` pack, oracle, `export:` entries in the spec) -> `agentsynth export`
(hf, dpo) -> `agentsynth dedup --decontaminate core`. Test-split tasks stay out of training exports unless
asked for; an export with nothing to write fails; a key the agent echoes is in no export."""

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
        "  - {type: jsonl, path: out/all.jsonl, canary: always, include_test: true}\n"
    )
    done = agentsynth("run", "spec.yaml", "--run-dir", "runs/oracle", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (tmp_path / "out/all.jsonl").read_text().splitlines()]
    n = len(rows)
    n_test = sum(r["split"] == "test" for r in rows)
    n_train = n - n_test
    assert n >= 20 and n_test >= 2 and n_train >= 2 and all(r["status"] == "passed" for r in rows)
    assert all(r["canary"].startswith("AGENTSYNTH CANARY GUID ") for r in rows)
    assert len({r["canary"] for r in rows}) == 1  # one canary per pack version
    assert "test-split tasks included" in done.stderr  # include_test warns
    # the training formats leave the benchmark's test split out
    test_ids = {r["task_id"] for r in rows if r["split"] == "test"}
    sft = [json.loads(line) for line in (tmp_path / "out/sft.jsonl").read_text().splitlines()]
    assert len(sft) == n_train and all(m["messages"][-1]["role"] == "assistant" for m in sft)
    assert any(any(msg.get("tool_calls") for msg in m["messages"]) for m in sft)
    # both trials of an oracle task are the same trajectory: dedup keeps one per task
    sharegpt = (tmp_path / "out/sharegpt.jsonl").read_text().splitlines()
    assert len(sharegpt) == n_train // 2
    table = pq.read_table(tmp_path / "out/all.parquet")
    assert table.num_rows == n_train and table.column("pack").to_pylist()[0] == "core"
    assert set(table.column("split").to_pylist()) == {"train"}
    assert not test_ids & set(table.column("task_id").to_pylist())

    done = agentsynth("export", "runs/oracle", "-f", "hf", "-o", "out/hf", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ds = datasets.load_from_disk(str(tmp_path / "out/hf"))
    assert len(ds) == n_train and set(ds["status"]) == {"passed"}
    done = agentsynth("export", "runs/oracle", "-f", "hf", "-o", "out/hf-all", "--include-test", cwd=tmp_path)
    assert done.returncode == 0 and "test-split" in done.stderr
    assert len(datasets.load_from_disk(str(tmp_path / "out/hf-all"))) == n

    # the oracle never fails: no preference pair, an error that says so, and no file
    done = agentsynth("export", "runs/oracle", "-f", "dpo", "-o", "out/dpo.jsonl", cwd=tmp_path)
    assert done.returncode == 2 and "no task has both a passing and a failing trial" in done.stderr
    assert "--trials 2" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out/dpo.jsonl").exists()

    # the run's own pack is the benchmark: every record is contaminated
    done = agentsynth("dedup", "runs/oracle", "--decontaminate", "core", "--scope", "instruction", "--json",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seen"] == n and report["contaminated"] == n and report["kept"] == 0


KEY = "sk-test-4hR9vQ2mX7nL5wK8pT3zB6yC"
LEAKY_AGENT = """
import os


def act(state):
    key = os.environ["OPENAI_API_KEY"]
    if not state.trajectory.steps:
        return {"tool": "sql_query", "arguments": {"sql": f"SELECT '{key}' AS key"}}
    email = "dana.whitfield@example.com" if state.seed % 2 == 0 else "no idea"
    return {"answer": f"{email}. Your key is {key}; the database said: {state.observation.content}"}
"""


def test_a_key_the_agent_echoes_is_in_no_export(tmp_path):
    """A real run whose agent puts the process's OPENAI_API_KEY in a tool call, gets it back in the tool
    observation and answers with it; every export format of the run, written by the spec and by the
    command, is grepped for the key."""
    from agentsynth_kernel.engine import derive_seed

    seed = next(s for s in range(100)
                if {derive_seed(s, "lookup-customer-email", t) % 2 for t in (0, 1)} == {0, 1})  # a pass and a fail
    (tmp_path / "agent.py").write_text(LEAKY_AGENT)
    formats = {"jsonl": "x.jsonl", "openai": "x.openai.jsonl", "sharegpt": "x.sharegpt.jsonl", "adp": "x.adp.jsonl",
               "dpo": "x.dpo.jsonl", "parquet": "x.parquet", "hf": "hf"}
    entries = "".join(f"  - {{type: {f}, path: spec-out/{p}{'' if f == 'dpo' else ', filter: all'}}}\n"
                      for f, p in formats.items())
    (tmp_path / "spec.yaml").write_text(
        f"pack: core\nonly: [lookup-customer-email]\ntrials: 2\nseed: {seed}\n"
        "policy: {type: callable, function: agent.py:act}\nexport:\n" + entries)
    env = {**ENV, "OPENAI_API_KEY": KEY}
    done = subprocess.run([sys.executable, "-m", "agentsynth_kernel", "run", "spec.yaml", "--run-dir", "runs/leak",
                           "-q", "--json", "-"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["pass_rate"]["passed"] == 1 and all("count" in e for e in report["exports"]), report["exports"]
    for fmt, name in formats.items():
        args = ["export", "runs/leak", "-f", fmt, "-o", f"cmd-out/{name}", *(() if fmt == "dpo" else ("--filter", "all"))]
        done = subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert KEY not in done.stdout + done.stderr
    written = [p for d in ("spec-out", "cmd-out") for p in (tmp_path / d).rglob("*") if p.is_file()]
    assert len(written) >= 2 * (len(formats) - 1)
    for path in written:
        data = path.read_bytes()
        assert KEY.encode() not in data, path
        if path.suffix == ".parquet":  # compressed pages: look at the values too
            import pyarrow.parquet as pq

            assert KEY not in json.dumps(pq.read_table(path).to_pylist(), default=str), path
    for d in ("spec-out/hf", "cmd-out/hf"):
        import datasets

        assert KEY not in json.dumps(datasets.load_from_disk(str(tmp_path / d)).to_list(), default=str)
    sft = (tmp_path / "cmd-out/x.openai.jsonl").read_text()
    assert "Your key is <redacted>" in sft  # the answer is there, its key is not
