"""The multi-turn support pack (simulated users over the SQL world) through the real CLI, and the
ways an agent could try to pass it without doing what the customer needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agentsynth_sql")
pytest.importorskip("agentsynth_pack_support")


def agentsynth(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_every_gate_passes(tmp_path):
    proc = agentsynth("pack", "validate", "support", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "robustness" in proc.stdout


def run_agent(tmp_path: Path, task: str, actions: list[dict]) -> dict:
    spec = tmp_path / f"{task}.yaml"
    spec.write_text(json.dumps({"pack": "support", "only": [task], "policy": {"type": "scripted", "actions": actions}}))
    out = tmp_path / f"{task}.json"
    proc = agentsynth("run", str(spec), "--json", str(out), "-q", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    [row] = json.loads(out.read_text())["results"]
    return row


def x(sql: str) -> dict:
    return {"tool": "sql_execute", "arguments": {"sql": sql}}


REFUND = [x("INSERT INTO refunds (order_id, amount) VALUES (1042, 39.99)"),
          x("UPDATE orders SET status = 'refunded' WHERE id = 1042")]


@pytest.mark.parametrize(("name", "task", "actions", "why"), [
    # refunding at once, without asking the customer to confirm first
    ("no confirmation", "refund-broken-kettle", [*REFUND, {"answer": "Refunded."}], "said"),
    # asking for confirmation first thing, then acting before the customer said yes
    ("acts before the yes", "refund-broken-kettle",
     [{"answer": "Shall I refund your order? Please confirm."}, *REFUND, {"answer": "Refunded."}], "said"),
    # refunding every delivered order of the customer, not just the kettle
    ("refund too much", "refund-broken-kettle",
     [{"answer": "Shall I refund it? Please confirm."}, *REFUND,
      x("INSERT INTO refunds (order_id, amount) VALUES (1043, 12.50)"),
      x("UPDATE orders SET status = 'refunded' WHERE id = 1043"), {"answer": "Done."}], "sql"),
    # giving the late refund the policy forbids
    ("late refund", "refuse-late-refund",
     [{"answer": "Please confirm the 30-day refund."}, x("INSERT INTO refunds (order_id, amount) VALUES (1077, 45)"),
      x("UPDATE orders SET status = 'refunded' WHERE id = 1077"), {"answer": "It is now refunded."}], "sql"),
    # a refusal with the right words that also claims it was done
    ("claim and refuse", "refuse-late-refund",
     [{"answer": "It is outside the 30-day window, but it has been refunded anyway."}], "said"),
    # cancelling a shipped order
    ("cancel shipped", "cancel-shipped-refused",
     [{"answer": "Shall I cancel it?"}, x("UPDATE orders SET status = 'cancelled' WHERE id = 1052"),
      {"answer": "It can't be cancelled... done anyway."}], "sql"),
])
def test_shortcuts_fail(tmp_path, name, task, actions, why):
    row = run_agent(tmp_path, task, actions)
    assert row["status"] == "failed", (name, row)
    failing = [v["checker"] for v in row["verdicts"] if not v["passed"]]
    assert why in failing, (name, row["verdicts"])


def test_the_oracle_passes_and_the_talk_is_stored(tmp_path):
    proc = agentsynth("bench", "--pack", "support", "--policy", "oracle", "--min-pass-rate", "100%", "--run-dir",
                      str(tmp_path / "run"), "--json", str(tmp_path / "bench.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = agentsynth("inspect", str(tmp_path / "run"), "refund-broken-kettle", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    trajectory = result["trajectory"] if "trajectory" in result else result[0]["trajectory"]
    assert trajectory["user"]["steps"][0]["action"]["content"] == "My order number is 1042."
    assert trajectory["steps"][0]["observation"]["content"] == "My order number is 1042."
