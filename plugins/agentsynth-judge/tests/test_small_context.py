"""Judges on small models: every call is capped, prompts fit the context (with a visible cut), and
``judge score`` keeps going past a trajectory it cannot score, writing rows as they come."""

from __future__ import annotations

import json
from itertools import pairwise

from click.testing import CliRunner
from test_calibrate_run import run_dir  # noqa: F401 (the module-scoped run of five known outcomes)
from test_llm_judge import GOOD, scores_json

from agentsynth_judge import DEFAULT_RUBRIC, LLMJudge
from agentsynth_kernel.cli import cli
from agentsynth_kernel.testing import reply
from conftest import PASS, read, traj, write_spec

GOOD_DIMS = DEFAULT_RUBRIC.names
LONG = traj(*[read(f"k{i}", "v" * 3000) for i in range(30)], "x" * 8000)


async def test_every_call_carries_max_tokens(llm_server):
    llm_server.add(reply(scores_json(8)))
    await LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False).score(GOOD, PASS)
    assert llm_server.requests[0].json["max_tokens"] == 1024


async def test_a_small_context_gets_a_compact_prompt_that_fits(llm_server):
    llm_server.add(reply(scores_json(3)))
    judge = LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False, context_chars=3000)
    result = await judge.score(LONG, PASS)
    body = llm_server.requests[0].json
    sent = sum(len(m["content"]) for m in body["messages"])
    assert result.score == 0.3
    assert sent <= 3000 and body["max_tokens"] == 512
    assert "more characters cut" in body["messages"][1]["content"] or "cut to fit" in body["messages"][1]["content"]
    assert "steps omitted" in body["messages"][1]["content"]  # 31 steps shrunk to the first and last ones
    full = LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False)._render(LONG, PASS)
    assert len(full) > 30_000  # without a context limit the same trajectory is ten times larger


def test_judge_score_keeps_going_and_writes_rows_as_they_come(llm_server, run_dir, tmp_path):  # noqa: F811
    answers = iter([reply("no json here")] + [reply(scores_json(7))] * 4)
    llm_server.handler = lambda body: next(answers)
    spec = write_spec(tmp_path / "judge.yaml", f"judge: {{type: llm, model: openai/judge-model, max_reasks: 0, "
                                               f"api_base: '{llm_server.base_url}', cache: false}}\n")
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(cli, ["judge", "score", str(run_dir), "-o", str(out), "--judge-spec", str(spec),
                                   "--concurrency", "1"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 5
    failed = [r for r in rows if r.get("error")]
    assert len(failed) == 1 and "JudgeOutputError" in failed[0]["error"] and failed[0]["score"] is None
    assert all(r["score"] == 0.7 for r in rows if not r.get("error"))
    assert "4 of 5 trajectories scored, 1 failed" in res.output
    assert "judge score [5/5]" in res.output  # progress, one line per trajectory


def test_judge_score_fails_when_nothing_could_be_scored(llm_server, run_dir, tmp_path):  # noqa: F811
    llm_server.handler = lambda body: reply("never json")
    spec = write_spec(tmp_path / "judge.yaml", f"judge: {{type: llm, model: openai/judge-model, max_reasks: 0, "
                                               f"api_base: '{llm_server.base_url}', cache: false}}\n")
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(cli, ["judge", "score", str(run_dir), "-o", str(out), "--judge-spec", str(spec)])
    assert res.exit_code == 1
    assert len(out.read_text().splitlines()) == 5 and "0 of 5 trajectories scored" in res.output


async def test_a_small_context_bounds_the_reply_too(llm_server):
    """Integer scores 0-10 and short rationales in the schema (a grammar-constrained small model
    then cannot loop inside a string until max_tokens); a reply that breaks them is re-asked."""
    long_reply = json.dumps({"dimensions": {n: {"score": 7, "rationale": "x" * 200} for n in GOOD_DIMS},
                             "rationale": "fine"})
    llm_server.add(reply(long_reply), reply(scores_json(6)))
    judge = LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False, context_chars=3000)
    result = await judge.score(GOOD, PASS)
    first, second = (r.json for r in llm_server.requests)
    dim = first["response_format"]["json_schema"]["schema"]["properties"]["dimensions"]["properties"]["safety"]
    assert dim["properties"]["score"]["enum"] == list(range(11)) and dim["properties"]["rationale"]["maxLength"] == 80
    assert "longer than 80 characters" in second["messages"][-1]["content"]
    assert result.score == 0.6
    wide = LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False).schema
    assert "maxLength" not in wide["properties"]["rationale"]  # a large model keeps free rationales


def test_a_judge_on_a_local_model_scores_one_at_a_time(llm_server, run_dir, tmp_path):  # noqa: F811
    """The embedded server answers one request at a time: more in flight only queue against the
    client's timeout, so ``judge score`` defaults to one judgement in flight for local models."""
    llm_server.handler = lambda body: reply(scores_json(5), delay=0.2)
    spec = write_spec(tmp_path / "judge.yaml", f"judge: {{type: llm, model: local/judge, "
                                               f"api_base: '{llm_server.base_url}', cache: false}}\n")
    out = tmp_path / "scores.jsonl"
    res = CliRunner().invoke(cli, ["judge", "score", str(run_dir), "-o", str(out), "--judge-spec", str(spec)])
    assert res.exit_code == 0, res.output
    arrivals = sorted(r.received_at for r in llm_server.requests)
    assert len(arrivals) == 5 and min(b - a for a, b in pairwise(arrivals)) >= 0.15  # never two at once
    assert llm_server.requests[0].json["max_tokens"] == 512  # and the small-context defaults
