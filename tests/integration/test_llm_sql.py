"""The whole stack with a model in the loop: ``agentsynth run`` on the SQL ``core`` pack, the ``llm``
policy talking to a real OpenAI-compatible server on 127.0.0.1 whose scripted "model" replays the
pack's oracle as multi-turn, parallel tool calls (plus a rate limit and a malformed call to recover
from), real SQLite worlds, and the pack's own checkers. No network, no API key."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentsynth_kernel.builtins.policies import to_action
from agentsynth_kernel.importing import import_file
from agentsynth_kernel.records import Answer
from agentsynth_kernel.spec import load_pack
from agentsynth_kernel.testing import ScriptedLLMServer, reply, status, tool_calls

pytest.importorskip("agentsynth_sql")

SECRET = "sk-integration-secret-0123456789"


def oracle_model(pack):
    """A handler that answers like a model that knows the oracle: two tool calls per turn (parallel),
    then the oracle's answer. On one task its first turn also carries a call with broken JSON."""
    table = import_file(pack.oracle_path).ORACLE
    by_instruction = {task.instruction.strip(): task.id for task in pack.tasks}
    first_request = [True]

    def handle(request):
        if first_request[0]:
            first_request[0] = False
            return status(429, headers={"Retry-After": "0"})
        messages = request["messages"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        task_id = next(tid for text, tid in by_instruction.items() if user.startswith(text))
        actions = [to_action(a) for a in table[task_id]]
        calls = [a for a in actions if not isinstance(a, Answer)]
        answer = next((a.content for a in actions if isinstance(a, Answer)), "done")
        turn = sum(1 for m in messages if m["role"] == "assistant")
        batch = calls[2 * turn: 2 * turn + 2]
        if not batch:
            return reply(answer)
        out = [(c.name, c.arguments) for c in batch]
        if task_id == "update-email" and turn == 0:
            out.append(("sql_query", '{"sql": "SELECT * FROM customers'))  # truncated JSON
        return tool_calls(*out, content="Working on it.")

    return handle


def test_llm_policy_solves_the_sql_core_pack_through_the_cli(host, cli, write, tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSYNTH_LLM_CACHE", str(tmp_path / "llm-cache"))
    monkeypatch.setenv("SCRIPTED_MODEL_KEY", SECRET)
    pack = load_pack("core", host=host)
    with ScriptedLLMServer(handler=oracle_model(pack)) as server:
        write("spec.yaml", f"""
            pack: core
            policy:
              type: llm
              model: hosted_vllm/oracle-7b
              api_base: {server.base_url}
              api_key_env: SCRIPTED_MODEL_KEY
              max_turns: 8
            concurrency: 8
            budget: {{tokens: 2000000}}
        """)
        code, out, err = cli("run", "spec.yaml", "--run-dir", "run", "--json", "report.json", "-q")
        requests = list(server.requests)
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["counts"] == {"passed": len(pack.tasks), "failed": 0, "error": 0}, [
        (r["task_id"], r["error"], r["verdicts"]) for r in report["results"] if r["status"] != "passed"
    ]
    assert report["usage"]["requests"] >= 2 * len(pack.tasks) and report["usage"]["prompt_tokens"] > 0
    # the model really drove it: every request carried the pack's tools and the key, turns were multi-call
    assert all(r.json["model"] == "oracle-7b" for r in requests)
    assert all({t["function"]["name"] for t in r.json["tools"]} == {"sql_query", "sql_execute"} for r in requests)
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in requests)
    assert any(len(r.json["messages"]) > 4 for r in requests)
    assert requests[0].json["messages"][0]["content"] == pack.system_prompt
    # the key is nowhere in the run directory or the report
    for path in [tmp_path / "report.json", *Path(tmp_path / "run").rglob("*")]:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path

    from agentsynth_kernel.store import RunStore

    store = RunStore(tmp_path / "run", create=False)
    try:
        results = {r.task_id: r for r in store.results()}
    finally:
        store.close()
    email = results["update-email"].trajectory
    invalid = [s for s in email.steps if s.invalid]
    assert len(invalid) == 1 and "not valid JSON" in invalid[0].observation.content
    assert email.metadata["llm"]["invalid_tool_calls"] == 1
    assert sum(r.trajectory.metadata["llm"]["retries"] for r in results.values()) == 1  # the one 429
    parallel = [r for r in results.values() if len({s.turn for s in r.trajectory.steps}) < len(r.trajectory.steps)]
    assert parallel, "some turns should carry several tool calls"
    assert re.search(r"\bcore\b", json.dumps(report["pack"]))
