"""``back_translation``: execute a chain, write its request, the end state becomes the checker."""

from __future__ import annotations

import asyncio

import yaml

from agentsynth_kernel import ComponentSpec, EpisodeConfig, RunStore, load_pack, run_episode
from agentsynth_synth import run_generator
from conftest import NotesWorld


def params(server, **extra):
    return {"model": "openai/writer", "api_base": server.base_url,
            "explorer": {"type": "llm", "model": "openai/explorer", "api_base": server.base_url},
            "focus": ["green", "purple", "orange"], **extra}


def play(pack, task, policy):
    from agentsynth_kernel import get_host

    config = EpisodeConfig(policy, 10, 30.0)
    return asyncio.run(run_episode(get_host(), pack, task, 0, 1, config))


def test_task_checker_passes_on_the_executed_chain_and_fails_on_noop(llm, pack_dir, tmp_path):
    out = tmp_path / "bt-pack"
    report = run_generator("back_translation", pack_dir, params(llm, n=3), run_dir=tmp_path / "run", out=out,
                           cache=False)
    assert report.done_items == 3 and not report.rejected, report.to_dict()
    assert sorted(r.task_id for r in report.accepted) == ["bt-0000", "bt-0001", "bt-0002"]
    # per item: explorer 3 turns + writer 1
    assert report.requests == 12 and report.requests_per_accepted == 4.0
    data = yaml.safe_load((out / "pack.yaml").read_text())
    assert [t["instruction"] for t in data["tasks"]] == [
        "Please change our color note to green.", "Please change our color note to purple.",
        "Please change our color note to orange."]
    task0 = data["tasks"][0]
    assert task0["checkers"][0] == {"type": "state_probe", "probes": [
        {"tool": "read", "arguments": {"key": "color"}, "expect": {"content": "green", "error": False}}]}
    assert task0["checkers"][1]["type"] == "state_digest"  # the notes world can digest its whole state
    new = load_pack(out)
    task = new.tasks[0]
    # the checker is independent of the generator: re-check it with the kernel, in fresh worlds
    chain = play(new, task, ComponentSpec("oracle"))
    assert chain.passed, chain.verdicts
    noop = play(new, task, ComponentSpec("noop"))
    assert not noop.passed and "got 'red', expected 'green'" in noop.verdicts[0].detail
    other = play(new, new.tasks[1], ComponentSpec("oracle"))
    assert other.passed
    # the right probe value plus an unrelated change: the probe passes, the whole-state digest does not
    extra = ComponentSpec("synth_replay", {"actions": [{"tool": "write", "arguments": {"key": "color", "value": "green"}},
                                                       {"tool": "write", "arguments": {"key": "mood", "value": "x"}}]})
    sloppy = play(new, task, extra)
    assert not sloppy.passed
    assert [v.passed for v in sloppy.verdicts] == [True, False]
    assert sloppy.verdicts[1].detail.startswith("the end state differs from the verified one")
    # without exact_state only the probes decide
    loose = run_generator("back_translation", pack_dir, params(llm, n=1, exact_state=False), cache=False)
    loose_checkers = loose.accepted[0].trajectory.metadata["synth"]["task"]["checkers"]
    assert [c["type"] for c in loose_checkers] == ["state_probe"]
    stored = RunStore(tmp_path / "run", create=False)
    try:
        results = list(stored.results())
        assert len(results) == 3
        for r in results:
            synth = r.trajectory.metadata["synth"]
            assert synth["generator"] == "back_translation" and synth["item_requests"] == 4
            assert synth["oracle"][-1] == {"answer": "Done."}
            assert r.verdicts[0].checker == "state_probe" and r.verdicts[0].passed
    finally:
        stored.close()


def test_read_only_chain_is_rejected_because_noop_passes(llm, pack_dir):
    report = run_generator("back_translation", pack_dir, params(llm, n=2, focus=["green", "green readonly"]),
                           cache=False)
    assert [r.task_id for r in report.accepted] == ["bt-0000"]
    assert report.rejected == {"noop_passes": 1}


def test_chain_with_a_failing_call_is_rejected(llm, pack_dir):
    def broken(request):
        from conftest import reply, tool_calls, turn

        return tool_calls(("read", {"key": "nope"})) if turn(request) == 0 else reply("done")

    llm.router.routes["explorer"] = broken
    report = run_generator("back_translation", pack_dir, params(llm, n=1), cache=False)
    assert not report.accepted and report.rejected == {"chain_errors": 1}
    assert llm.router.counts.get("writer", 0) == 0, "no writer request for a broken chain"


def test_unparseable_writer_answer_is_rejected(llm, pack_dir):
    from conftest import reply

    llm.router.routes["writer"] = lambda request: reply("Sure! The user wanted a new color.")
    report = run_generator("back_translation", pack_dir, params(llm, n=1), cache=False)
    assert report.rejected == {"unparseable": 1}


def test_budget_stop_mid_way_leaves_only_complete_items_and_resume_finishes(llm, pack_dir, tmp_path):
    llm.router.usage = (2000, 50)  # billed usage above the client's prompt estimate: a predictable spend
    full = run_generator("back_translation", pack_dir, params(llm, n=4), cache=False)
    assert len(full.accepted) == 4
    tokens = full.usage.prompt_tokens + full.usage.completion_tokens
    run_dir = tmp_path / "run"
    # 60 % of what 4 items cost: two items in flight finish, the next ones are cut
    stopped = run_generator("back_translation", pack_dir, params(llm, n=4), run_dir=run_dir, cache=False,
                            budget_tokens=int(tokens * 0.6), concurrency=2)
    assert stopped.stopped.startswith("budget"), stopped.to_dict()
    assert 1 <= len(stopped.accepted) < 4
    store = RunStore(run_dir, create=False)
    try:
        done_events = [d for _, kind, d in store.events() if kind == "synth_item"]
        results = list(store.results())
        # every stored item is complete: its event, its task, its oracle and a passing checker
        assert {r.task_id for r in results} == {i for d in done_events for i in d["accepted"]}
        for r in results:
            synth = r.trajectory.metadata["synth"]
            assert synth["task"]["checkers"][0]["type"] == "state_probe"
            assert synth["oracle"] and r.passed and r.verdicts[0].passed
        assert any(kind == "budget_stop" for _, kind, _ in store.events())
    finally:
        store.close()
    # a rerun with a larger budget continues: nothing done twice, nothing lost
    before = {r.task_id for r in stopped.accepted}
    resumed = run_generator("back_translation", pack_dir, params(llm, n=4), run_dir=run_dir, cache=False)
    assert resumed.restored_items == len(before) and resumed.done_items == 4 - len(before)
    assert sorted(r.task_id for r in resumed.accepted) == ["bt-0000", "bt-0001", "bt-0002", "bt-0003"]
    assert not resumed.stopped


def test_written_pack_passes_pack_validate(llm, pack_dir, tmp_path, monkeypatch, capsys):
    from agentsynth_kernel.cli import main

    out = tmp_path / "validated"
    run_generator("back_translation", pack_dir, params(llm, n=2), out=out, cache=False)
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["pack", "validate", str(out)])
    except SystemExit as exc:
        code = exc.code
    printed = capsys.readouterr().out
    assert (code or 0) == 0, printed
    assert "all gates pass" in printed


def test_world_type_is_generic(pack_dir):
    # the generator never names the notes world: it only uses the pack's environment through the kernel
    import agentsynth_synth.back_translation as bt

    assert "notes" not in open(bt.__file__).read()
    assert NotesWorld().reset(0).content.startswith("notes:")


def test_provider_failure_leaves_the_item_for_a_rerun(llm, pack_dir, tmp_path):
    from conftest import status

    good = llm.router.routes["writer"]
    llm.router.routes["writer"] = lambda request: status(400, "model overloaded")
    run_dir = tmp_path / "run"
    report = run_generator("back_translation", pack_dir, params(llm, n=2), run_dir=run_dir, cache=False)
    assert report.incomplete == 2 and not report.accepted and not report.rejected
    assert "provider" in report.errors[0] and "model overloaded" in report.errors[0]
    store = RunStore(run_dir, create=False)
    try:
        assert store.count() == 0
        assert not [d for _, kind, d in store.events() if kind == "synth_item"]
    finally:
        store.close()
    llm.router.routes["writer"] = good
    report = run_generator("back_translation", pack_dir, params(llm, n=2), run_dir=run_dir, cache=False)
    assert report.done_items == 2 and len(report.accepted) == 2 and report.incomplete == 0


def test_same_seed_and_warm_cache_write_the_same_pack_without_requests(llm, pack_dir, tmp_path):
    cache = tmp_path / "cache"
    run_generator("back_translation", pack_dir, params(llm, n=2), out=tmp_path / "a", cache=cache, seed=5)
    sent = llm.count
    report = run_generator("back_translation", pack_dir, params(llm, n=2), out=tmp_path / "b", cache=cache, seed=5,
                           concurrency=2)
    assert llm.count == sent and report.requests == 0
    for name in ("pack.yaml", "oracle.py"):
        assert (tmp_path / "a" / name).read_text().replace("id: a", "id: b") == (tmp_path / "b" / name).read_text()


def test_a_local_writer_gets_a_prompt_that_fits_and_a_constrained_reply(llm, pack_dir):
    """``model: local...`` (a small model): the writer's prompt fits 6000 characters although the chain
    read a 5000-character note (cut with a marker), and the reply is constrained to the answer's
    schema (probes are calls to the real tools), so a tiny model's reply parses."""
    chain = [{"tool": "write", "arguments": {"key": "color", "value": "green" * 1000}},
             {"tool": "read", "arguments": {"key": "color"}}, {"answer": "done"}]
    report = run_generator("back_translation", pack_dir, {
        "model": "local/writer", "api_base": llm.base_url, "n": 1,
        "explorer": {"type": "scripted", "actions": chain}}, cache=False)
    assert [r.task_id for r in report.accepted] == ["bt-0000"], report.to_dict()
    [sent] = [r.json for r in llm.requests if r.json and r.json.get("model") == "writer"]
    prompt = sent["messages"][0]["content"]
    assert len(prompt) <= 6000 and "characters cut" in prompt and "- write(key: string, value: string)" in prompt
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["instruction"]["maxLength"] == 400
    assert [c["properties"]["tool"]["const"] for c in schema["properties"]["probes"]["items"]["anyOf"]] == [
        "read", "write", "list"]


def test_a_hosted_writer_keeps_the_full_prompt(llm, pack_dir):
    run_generator("back_translation", pack_dir, params(llm, n=1), cache=False)
    [sent] = [r.json for r in llm.requests if r.json and r.json.get("model") == "writer"]
    assert "response_format" not in sent and '"parameters"' in sent["messages"][0]["content"]
