"""The llm judge against a real OpenAI-compatible server on 127.0.0.1 (scripted replies)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from agentsynth_judge import (
    DEFAULT_RUBRIC,
    EnsembleJudge,
    HeuristicJudge,
    JudgeOutputError,
    LLMJudge,
    compare,
    parse_reply,
    read_run,
    score_schema,
)
from agentsynth_kernel import LLMError
from agentsynth_kernel.cli import cli, main
from agentsynth_kernel.testing import reply, status
from conftest import FAIL, PASS, read, traj, write, write_spec

GOOD = traj(read("color", "red"), write("color", "blue"), "The note 'color' is now blue.")
BAD = traj("Done! I have updated the note successfully.")


def scores_json(values: dict[str, float] | float = 8, rationale: str = "solid work", dims=None) -> str:
    names = dims or DEFAULT_RUBRIC.names
    if not isinstance(values, dict):
        values = {n: values for n in names}
    return json.dumps({"dimensions": {n: {"score": values[n], "rationale": f"{n} ok"} for n in names},
                       "rationale": rationale})


def judge_for(server, **kwargs) -> LLMJudge:
    return LLMJudge("openai/judge-model", api_base=server.base_url, cache=False, **kwargs)


async def test_valid_structured_reply_is_scored(llm_server):
    llm_server.add(reply(scores_json({**{n: 10 for n in DEFAULT_RUBRIC.names}, "efficiency": 5}), usage=(100, 20)))
    result = await judge_for(llm_server).score(GOOD, PASS)
    assert result.dimensions["efficiency"] == 0.5 and result.dimensions["task_completion"] == 1.0
    assert result.score == pytest.approx(0.95) and result.passed
    assert result.dimensions["reward"] == pytest.approx(0.8 + 0.2 * 0.95)
    assert "solid work" in result.rationale and "efficiency 0.50: efficiency ok" in result.rationale
    assert result.usage.prompt_tokens == 100 and result.usage.completion_tokens == 20
    body = llm_server.requests[0].json
    assert body["model"] == "judge-model" and body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == score_schema(DEFAULT_RUBRIC)
    prompt = body["messages"][1]["content"]
    assert "call write({\"key\": \"color\", \"value\": \"blue\"}) -> ok" in prompt
    assert "note_equals: PASSED" in prompt and "task_completion (weight 0.30)" in prompt
    assert "Do not reward length" in body["messages"][0]["content"]


async def test_invalid_json_is_reasked_with_the_problem(llm_server):
    llm_server.add(reply("Sure! Here is my evaluation: the agent did well."), reply(scores_json(6)))
    result = await judge_for(llm_server).score(GOOD, PASS)
    assert result.score == pytest.approx(0.6) and "valid after 2 attempts" in result.rationale
    assert len(llm_server.requests) == 2
    second = llm_server.requests[1].json["messages"]
    assert second[-2] == {"role": "assistant", "content": "Sure! Here is my evaluation: the agent did well."}
    assert "not valid JSON" in second[-1]["content"] and '"required"' in second[-1]["content"]
    assert result.usage.requests == 2


async def test_schema_violations_are_reasked_with_paths(llm_server):
    bad = json.loads(scores_json(7))
    bad["dimensions"]["safety"]["score"] = 15
    del bad["dimensions"]["reasoning"]
    llm_server.add(reply("```json\n" + json.dumps(bad) + "\n```"), reply("```json\n" + scores_json(7) + "\n```"))
    result = await judge_for(llm_server).score(GOOD, PASS)
    assert result.score == pytest.approx(0.7)
    feedback = llm_server.requests[1].json["messages"][-1]["content"]
    assert "reply.dimensions.safety.score: must be <= 10" in feedback
    assert "reply.dimensions.reasoning: missing required argument" in feedback


async def test_gives_up_after_max_reasks(llm_server):
    llm_server.add(reply("nope"), reply("{\"dimensions\": {}}"), reply("still nope"))
    with pytest.raises(JudgeOutputError, match="no valid reply after 3 attempts"):
        await judge_for(llm_server, max_reasks=2).score(GOOD, PASS)
    assert len(llm_server.requests) == 3
    assert JudgeOutputError.agentsynth_error_kind == "judge"


async def test_provider_errors_are_retried_by_the_kernel_client(llm_server):
    from agentsynth_kernel import LLMClient

    client = LLMClient(api_base=llm_server.base_url, cache=False, max_retries=1, backoff_base=0.001, backoff_max=0.01)
    llm_server.add(status(503), reply(scores_json(9)))
    judge = LLMJudge("openai/judge-model", api_base=llm_server.base_url, cache=False, client=client)
    assert (await judge.score(GOOD, PASS)).score == pytest.approx(0.9)
    llm_server.add(status(500), status(500))
    with pytest.raises(LLMError):
        await judge.score(GOOD, PASS)
    await client.aclose()


async def test_custom_rubric_json_object_mode_and_blind_prompt(llm_server):
    rubric = {"pass_threshold": 0.5, "dimensions": [
        {"name": "politeness", "weight": 1, "description": "Is the answer polite?"},
        {"name": "task_completion", "weight": 1}]}
    llm_server.add(reply(scores_json({"politeness": 2, "task_completion": 4}, dims=["politeness", "task_completion"])))
    judge = judge_for(llm_server, rubric=rubric, response_format="json_object", include_verdicts=False)
    result = await judge.score(BAD, FAIL)
    assert result.score == pytest.approx(0.3) and not result.passed
    body = llm_server.requests[0].json
    assert body["response_format"] == {"type": "json_object"}
    assert "politeness (weight 0.50): Is the answer polite?" in body["messages"][1]["content"]
    assert "note_equals" not in body["messages"][1]["content"]


async def test_verbosity_budget_cuts_long_answers(llm_server):
    long = traj(write("color", "blue"), "blue " * 5000)
    llm_server.add(reply(scores_json(5)))
    await judge_for(llm_server, max_answer_chars=100).score(long, PASS)
    prompt = llm_server.requests[0].json["messages"][1]["content"]
    assert "more characters cut]" in prompt and len(prompt) < 4000


def test_parse_reply_tolerates_fences_and_prose():
    schema = score_schema(DEFAULT_RUBRIC)
    value, problems = parse_reply("Here you go:\n" + scores_json(3) + "\nThanks", schema)
    assert problems == [] and value["dimensions"]["safety"]["score"] == 3
    assert parse_reply("", schema)[1] == ["the reply was empty"]


async def test_pairwise_position_bias_is_cancelled_by_swapping(llm_server):
    # a judge that always picks the first trajectory shown: inconsistent under swapping -> tie
    llm_server.handler = lambda body: reply(json.dumps({"winner": "first", "rationale": "first looks fine"}))
    biased = await compare(judge_for(llm_server), GOOD, BAD)
    assert biased.winner == "tie" and not biased.consistent and len(llm_server.requests) == 2
    first_prompt = llm_server.requests[0].json["messages"][1]["content"]
    second_prompt = llm_server.requests[1].json["messages"][1]["content"]
    assert first_prompt.index("is now blue") < first_prompt.index("Done!")
    assert second_prompt.index("Done!") < second_prompt.index("is now blue")
    assert llm_server.requests[0].json["response_format"]["json_schema"]["name"] == "pairwise_preference"

    # a judge that reads the content prefers the trajectory that acted, in both orders
    def fair(body):
        text = body["messages"][1]["content"]
        winner = "first" if text.index("is now blue") < text.index("Done!") else "second"
        return reply(json.dumps({"winner": winner, "rationale": "it actually wrote the note"}))

    llm_server.handler = fair
    for a, b, expected in ((GOOD, BAD, "a"), (BAD, GOOD, "b")):
        res = await compare(judge_for(llm_server), a, b)
        assert res.winner == expected and res.consistent and res.rationale == "it actually wrote the note"


async def test_ensemble_of_llm_and_heuristic_judges(llm_server):
    llm_server.add(reply(scores_json(2)))
    ens = EnsembleJudge([HeuristicJudge(), judge_for(llm_server)], "mean", pass_threshold=0.5)
    result = await ens.score(GOOD, PASS)
    assert result.score == pytest.approx((1.0 + 0.2) / 2)
    assert result.dimensions["agreement"] == 0.5 and result.dimensions["score_range"] == pytest.approx(0.8)
    assert "(openai/judge-model)" in result.rationale
    assert result.usage is not None and result.usage.requests == 1


SPEC = """
name: llm-judged
environment: {{type: notes, initial: {{color: red}}}}
policy: script
tasks:
  - id: good
    instruction: Set the note 'color' to blue.
    checkers: [{{type: note_equals, key: color, value: blue}}]
    metadata: {{script: [{{tool: write, arguments: {{key: color, value: blue}}}}, {{answer: "color is blue"}}]}}
  - id: lazy
    instruction: Set the note 'color' to blue.
    checkers: [{{type: note_equals, key: color, value: blue}}]
    metadata: {{script: [{{answer: "Done!"}}]}}
judge: {{type: llm, model: openai/judge-model, api_base: "{url}", cache: false, max_reasks: 1}}
"""


def test_llm_judge_in_a_run_spec_end_to_end(llm_server, tmp_path):
    def handler(body):
        text = body["messages"][-1]["content"]
        if "Reply again" in text:  # the re-ask after the invalid first answer of 'lazy'
            return reply(scores_json(1, "did nothing"))
        if "color is blue" in text:
            return reply(scores_json(9, "wrote the note"))
        return reply("I think it is fine")  # invalid: re-asked

    llm_server.handler = handler
    spec_file = write_spec(tmp_path / "spec.yaml", SPEC.format(url=llm_server.base_url))
    res = CliRunner().invoke(cli, ["run", str(spec_file), "--run-dir", str(tmp_path / "run"), "-q"])
    assert res.exit_code == 0, res.output
    results, _ = read_run(tmp_path / "run")
    by_task = {r.task_id: r for r in results}
    assert by_task["good"].scores["judge"] == pytest.approx(0.9)
    assert by_task["lazy"].scores["judge"] == pytest.approx(0.1)
    assert by_task["good"].scores["judge.reward"] == pytest.approx(0.8 + 0.2 * 0.9)
    assert len(llm_server.requests) == 3
    note = by_task["good"].trajectory.metadata["judge"]
    assert note["kind"] == "llm" and note["model"] == "openai/judge-model"
    assert "wrote the note" in note["rationale"] and note["usage"]["requests"] == 1
    assert "valid after 2 attempts" in by_task["lazy"].trajectory.metadata["judge"]["rationale"]
    # calibrate the llm judge on that run through the command line (blind: no verdicts in the prompt)
    llm_server.requests.clear()
    judge_file = write_spec(tmp_path / "judge.yaml", f"judge: {{type: llm, model: openai/judge-model, "
                                                     f"api_base: '{llm_server.base_url}', cache: false}}\n")
    out = CliRunner().invoke(cli, ["judge", "calibrate", str(tmp_path / "run"), "--judge-spec", str(judge_file),
                                   "--json", "-"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["confusion"] == {"tp": 1, "fp": 0, "fn": 0, "tn": 1} and data["kappa"] == 1.0
    assert data["judge"] == "llm (openai/judge-model)"
    assert all("CHECKS OF THE WORLD" not in r.json["messages"][1]["content"] for r in llm_server.requests)


def test_llm_judge_output_failure_is_a_judge_error_in_the_run(llm_server, tmp_path):
    llm_server.handler = lambda body: reply("not json at all")
    spec_file = write_spec(tmp_path / "spec.yaml", SPEC.format(url=llm_server.base_url))
    res = CliRunner().invoke(cli, ["run", str(spec_file), "--run-dir", str(tmp_path / "run"), "-q",
                                   "--json", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    results, _ = read_run(tmp_path / "run")
    # the judge failed, but the world's verdicts stand; the failure is recorded beside them
    assert {r.task_id: r.status for r in results} == {"good": "passed", "lazy": "failed"}
    assert all("judge" not in r.scores for r in results)
    assert "no valid reply after 2 attempts" in results[0].judge_error
    assert json.loads((tmp_path / "r.json").read_text())["judge_errors"] == 2
    assert len(llm_server.requests) == 4  # 2 episodes x (1 + max_reasks=1)


@pytest.mark.parametrize(("judge", "expected"), [
    ("{type: llm}", "judge.model: missing required key"),
    ("{type: llm, model: hosted_vllm/x}", "needs an api_base"),
    ("{type: llm, model: m, response_format: json}", "response_format: expected one of json_schema"),
    ("{type: llm, model: m, max_reasks: -1}", "max_reasks: must be >= 0"),
    ("{type: llm, model: m, temprature: 0}", "judge.temprature: unknown key (did you mean 'temperature'?)"),
    ("{type: llm, model: m, params: {response_format: x}}", "params.response_format: not allowed here"),
])
def test_bad_llm_judge_specs(tmp_path, capsys, judge, expected):
    text = SPEC.format(url="http://127.0.0.1:9/v1").split("judge:")[0] + f"judge: {judge}\n"
    spec_file = write_spec(tmp_path / "spec.yaml", text)
    with pytest.raises(SystemExit):
        main(["run", str(spec_file), "--no-store", "-q"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and expected in err


def test_llm_judge_spends_from_the_runs_budget(llm_server, tmp_path):
    """The judge uses the run-scoped client: the run's hard budget covers judge calls too."""
    llm_server.handler = lambda body: reply(scores_json(9))
    text = SPEC.format(url=llm_server.base_url) + "budget: {tokens: 50}\n"
    spec_file = write_spec(tmp_path / "spec.yaml", text)
    res = CliRunner().invoke(cli, ["run", str(spec_file), "--run-dir", str(tmp_path / "run"), "-q"])
    assert res.exit_code == 3, res.output  # stopped on the budget
    assert llm_server.requests == []  # refused before sending: the reservation exceeds 50 tokens
    results, _ = read_run(tmp_path / "run")
    assert results == []  # budget-stopped episodes are not stored, so a resume re-runs them
