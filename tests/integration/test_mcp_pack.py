"""The mcp-tickets pack with every plugin installed: no name conflicts, an oracle run exported as OpenAI
chat messages (the MCP tool schemas and results end up in the training data), and `agentsynth verify`
replaying the stored tool calls against fresh MCP servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("agentsynth_mcp")

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def agentsynth(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=300)


def test_plugins_lists_mcp_without_conflicts(tmp_path):
    done = agentsynth("plugins", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    mcp = next(p for p in json.loads(done.stdout) if p["name"] == "mcp")
    assert mcp["errors"] == [] and mcp["loaded"]
    assert mcp["registered"] == {"environment": ["mcp"], "checker": ["mcp_call", "mcp_file", "mcp_sql"],
                                 "pack": ["mcp-tickets"]}


def test_mcp_pack_run_export_and_verify(tmp_path):
    only = ["reopen-oncall", "export-bob", "close-duplicate"]
    spec = "pack: mcp-tickets\npolicy: oracle\nonly: [" + ", ".join(only) + "]\n"
    try:
        import agentsynth_export  # noqa: F401

        spec += "export:\n  - {type: openai, path: out/sft.jsonl, include_test: true}\n"
        exported = True
    except ImportError:
        exported = False
    (tmp_path / "spec.yaml").write_text(spec)
    done = agentsynth("run", "spec.yaml", "--run-dir", "run", "--json", "report.json", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"] == {"passed": 3, "failed": 0, "error": 0}

    if exported:
        rows = [json.loads(line) for line in (tmp_path / "out/sft.jsonl").read_text().splitlines()]
        assert len(rows) == 3
        row = next(r for r in rows if any("on-call" in str(m.get("content")) for m in r["messages"]))
        names = {t["function"]["name"] for t in row["tools"]}
        assert {"get_ticket", "update_ticket", "read_resource"} <= names
        update = next(t for t in row["tools"] if t["function"]["name"] == "update_ticket")
        assert update["function"]["parameters"]["properties"]["ticket_id"]["type"] == "integer"

    verified = agentsynth("verify", "run", "--json", cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
