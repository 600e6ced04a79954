"""agentsynth-synth on the SQL world (`core` pack), the LLM scripted by a local OpenAI-compatible server:
forward keeps only teachers that leave the right end state, back_translation turns an executed SQL chain
into a task whose checker passes on the chain and fails on noop (through the real CLI, with `pack
validate`), challenger accepts a task with a `sql` checker only when a strong solver passes it, and
replay_filter re-verifies a run of the `core` pack, evolve keeps only variants whose oracle passes the sql
checkers (collateral included), and from_failures targets a noop run's failures."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("agentsynth_sql")
pytest.importorskip("agentsynth_synth")

from agentsynth_kernel.engine import execute  # noqa: E402
from agentsynth_kernel.episode import EpisodeConfig, run_episode  # noqa: E402
from agentsynth_kernel.plugins import get_host  # noqa: E402
from agentsynth_kernel.spec import ComponentSpec, RunSpec, load_pack  # noqa: E402
from agentsynth_kernel.testing import ScriptedLLMServer, reply, tool_calls  # noqa: E402
from agentsynth_synth import run_generator  # noqa: E402

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
NEW_EMAIL = "maya.chen@newmail.example"


def turn(request):
    return sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")


def user(request):
    return next((m.get("content") or "" for m in request["messages"] if m.get("role") == "user"), "")


def q(sql):
    return ("sql_query", {"sql": sql})


def x(sql):
    return ("sql_execute", {"sql": sql})


def explorer(request):
    steps = [tool_calls(q("SELECT id, name, email FROM customers WHERE name = 'Maya Chen'")),
             tool_calls(x(f"UPDATE customers SET email = '{NEW_EMAIL}' WHERE id = 6"))]
    k = turn(request)
    return steps[k] if k < len(steps) else reply("Updated Maya Chen's email.")


def writer(request):
    assert "UPDATE customers" in user(request)
    return reply(json.dumps({"instruction": f"Maya Chen changed her email to {NEW_EMAIL}; please update it.",
                             "answer": "Updated.",
                             "probes": [{"tool": "sql_query", "arguments": {"sql": "SELECT email FROM customers "
                                                                                  "WHERE id = 6"}}]}))


def teacher(good: bool):
    def handle(request):
        if "maya@chen.example.org" not in user(request):
            return reply("I cannot do that.")
        row = 6 if good else 5
        k = turn(request)
        if k == 0:
            return tool_calls(x(f"UPDATE customers SET email = 'maya@chen.example.org' WHERE id = {row}"))
        return reply("done")
    return handle


MUG = {"instruction": "Set the price of the Travel Mug (SKU MUG-02) to $27.50.",
       "environment": {"allowed_changes": {"products": {"update": ["price_cents"], "where": "sku = 'MUG-02'"}}}}


def challenger(request):
    k = turn(request)
    if k == 0:  # wrong expectation: the strong solver cannot satisfy it
        return reply(json.dumps({**MUG, "checkers": [{"type": "sql", "query": "SELECT price_cents FROM products "
                                                      "WHERE sku = 'MUG-02'", "expect": 2705}]}))
    return reply(json.dumps({**MUG, "checkers": [{"type": "sql", "query": "SELECT price_cents FROM products "
                                                  "WHERE sku = 'MUG-02'", "expect": 2750}]}))


def strong(request):
    m = re.search(r"SKU (\S+)\) to \$(\d+)\.(\d\d)", user(request))
    if m and turn(request) == 0:
        cents = int(m.group(2)) * 100 + int(m.group(3))
        return tool_calls(x(f"UPDATE products SET price_cents = {cents} WHERE sku = '{m.group(1)}'"))
    return reply("done")


def evolver(request):
    original = re.search(r"Original task:\n(.*)", user(request)).group(1)
    if "Travel Mug" in original:
        return reply(json.dumps({
            "instruction": "The Travel Mug (MUG-02) is underpriced: set it to $29.00, and leave every other price alone.",
            "checkers": [{"type": "sql", "query": "SELECT price_cents FROM products WHERE sku = 'MUG-02'",
                          "expect": 2900}],
            "oracle": [{"tool": "sql_execute", "arguments": {"sql": "UPDATE products SET price_cents = 2900 "
                                                                    "WHERE sku = 'MUG-02'"}}, {"answer": "Done."}]}))
    # the email variant's oracle also changes the tier: the collateral check rejects it
    return reply(json.dumps({
        "instruction": "Maya Chen's email is now maya@chen.example.net; please update her record.",
        "checkers": [{"type": "sql", "query": "SELECT email FROM customers WHERE id = 6",
                      "expect": "maya@chen.example.net"}],
        "oracle": [{"tool": "sql_execute", "arguments": {"sql": "UPDATE customers SET email = "
                                                                "'maya@chen.example.net', tier = 'gold' WHERE id = 6"}},
                   {"answer": "Done."}]}))


def judge(request):
    names = list(request["response_format"]["json_schema"]["schema"]["properties"]["dimensions"]["properties"])
    return reply(json.dumps({"dimensions": {n: {"score": 8, "rationale": "step 1 does it"} for n in names},
                             "rationale": "correct and short"}))


ROUTES = {"explorer": explorer, "writer": writer, "good": teacher(True), "bad": teacher(False),
          "challenger": challenger, "evolver": evolver, "judge": judge, "strong": strong, "weak": lambda r: reply("Done, the price is updated.")}


@pytest.fixture
def server():
    with ScriptedLLMServer(handler=lambda r: ROUTES[r["model"]](r)) as s:
        yield s


def llm(server, model):
    return {"type": "llm", "model": f"openai/{model}", "api_base": server.base_url}


def test_forward_keeps_teachers_that_leave_the_right_end_state(server):
    report = run_generator("forward", "core", {"teachers": [llm(server, "good"), llm(server, "bad")],
                                               "only": ["update-email"]}, cache=False)
    assert [r.trajectory.metadata["llm"]["model"] for r in report.accepted] == ["openai/good"]
    assert report.rejected == {"failed_checkers": 1}
    # consensus uses the SQL world's row-level changes as the end-state fingerprint
    assert report.accepted[0].trajectory.metadata["synth"]["fingerprint"].startswith("sha256:")


def test_back_translation_on_sql_through_the_cli(server, tmp_path):
    args = [sys.executable, "-m", "agentsynth_kernel", "synth", "core", "-g", "back_translation",
            "-p", "model=openai/writer", "-p", f"api_base={server.base_url}",
            "-p", f"explorer={json.dumps(llm(server, 'explorer'))}", "-p", "n=1",
            "-o", "bt-pack", "--run-dir", "rd", "--no-cache", "--json", "report.json"]
    done = subprocess.run(args, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["accepted"] == 1 and data["llm_requests_per_accepted"] == 4
    assert all(v == "pass" for v in data["validation"].values()), data
    pack = load_pack(tmp_path / "bt-pack")
    task = pack.tasks[0]
    assert task.checkers[0].type == "state_probe"
    assert NEW_EMAIL in task.checkers[0].params["probes"][0]["expect"]["content"]

    def play(policy):
        config = EpisodeConfig(ComponentSpec(policy), 10, 60.0)
        return asyncio.run(run_episode(get_host(), pack, task, 0, 3, config))

    assert play("oracle").passed
    noop = play("noop")
    assert not noop.passed and "got 'email\\nmaya.chen@example.com" in noop.verdicts[0].detail


def test_challenger_accepts_a_sql_task_only_once_the_strong_solver_passes(server, tmp_path):
    out = tmp_path / "challenged"
    report = run_generator("challenger", "core", {
        "model": "openai/challenger", "api_base": server.base_url, "strong": [llm(server, "strong")],
        "weak": [llm(server, "weak")], "n": 1, "rounds": 2}, out=out, cache=False)
    assert len(report.accepted) == 1, report.to_dict()
    meta = report.accepted[0].trajectory.metadata["synth"]
    assert [h["reason"] for h in meta["history"]] == ["unsolvable", "accepted"]
    from agentsynth_kernel.commands.pack import validate_pack

    _, gates = validate_pack(out)
    assert all(g.status == "pass" for g in gates), [(g.name, g.problems) for g in gates]


def test_replay_filter_reverifies_a_core_run(tmp_path):
    pack = load_pack("core")
    asyncio.run(execute(RunSpec(policy=ComponentSpec("oracle"), only=["update-email", "set-price"]), pack,
                        run_dir=tmp_path / "run"))
    report = run_generator("replay_filter", "core", {"input": str(tmp_path / "run")}, cache=False)
    assert len(report.accepted) == 2 and not report.rejected


def test_evolve_and_from_failures_on_sql(server, tmp_path):
    params = {"model": "openai/evolver", "api_base": server.base_url, "only": ["set-price", "update-email"],
              "rounds": 1}
    out = tmp_path / "evolved"
    report = run_generator("evolve", "core", params, out=out, cache=False)
    assert [r.task_id for r in report.accepted] == ["ev-set-price-0"]
    assert report.rejected == {"oracle_fails": 1}
    assert "unexpected changes" in report.per_item[[e["item"] for e in report.per_item].index(
        "ev-update-email-0")]["rejected"][0]["detail"]
    from agentsynth_kernel.commands.pack import validate_pack

    pack, gates = validate_pack(out)
    assert all(g.status == "pass" for g in gates), [(g.name, g.problems) for g in gates]
    # the variant keeps the source task's allowed_changes, so its collateral check stays meaningful
    assert pack.tasks[0].environment["allowed_changes"] == {"products": {"update": ["price_cents"],
                                                                        "where": "sku = 'MUG-02'"}}
    core = load_pack("core")
    asyncio.run(execute(RunSpec(policy=ComponentSpec("noop"), only=["set-price", "update-email"]), core,
                        run_dir=tmp_path / "bench"))
    report = run_generator("from_failures", "core", {"model": "openai/evolver", "api_base": server.base_url,
                                                     "run": str(tmp_path / "bench"), "rounds": 1}, cache=False)
    assert report.planned == 2 and [r.task_id for r in report.accepted] == ["ev-set-price-0"]
    assert report.accepted[0].trajectory.metadata["synth"]["gap"] == "no_call"


def test_forward_with_the_llm_judge_counts_its_requests(server):
    pytest.importorskip("agentsynth_judge")
    report = run_generator("forward", "core", {
        "teachers": [llm(server, "good"), llm(server, "bad")], "only": ["update-email"],
        "judge": {"type": "llm", "model": "openai/judge", "api_base": server.base_url}, "min_judge": 0.5},
        cache=False)
    assert len(report.accepted) == 1 and report.rejected == {"failed_checkers": 1}
    assert report.accepted[0].scores["judge"] == pytest.approx(0.8)
    # 2 teacher turns each + 1 judge request each
    assert report.requests == 6 and report.requests_per_accepted == 6
