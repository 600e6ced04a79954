"""``agentsynth pack new NAME --from-demo FILE`` in the kernel: the command plays a demonstration in
a real world (the test key-value world), asks the world's plugin for the checks through the
``checks_from_demo`` hook, and writes a pack only when its oracle passes and a no-op fails."""

from __future__ import annotations

import random
from pathlib import Path

import click
import pytest
import yaml

from agentsynth_kernel import ComponentSpec, RunSpec, hookimpl, load_pack, run
from agentsynth_kernel.commands import pack_demo


class KVDemo:
    """What a world plugin implements: checks for exactly the keys the demonstration changed."""

    def __init__(self, mode: str = "exact") -> None:
        self.mode = mode

    @hookimpl
    def checks_from_demo(self, environment, world, trajectory):
        if environment != "kv":
            return None
        if self.mode == "garbage":
            return ["not", "a", "mapping"]
        if self.mode == "broken":
            raise KeyError("a bug in the plugin")
        changed = {k: world.data.get(k) for k in {*world.data, *world.initial}
                   if world.data.get(k) != world.initial.get(k)}
        if self.mode == "random":
            changed["nonce"] = str(random.random())
        checks = [{"type": "kv_equals", "key": k, "value": v} for k, v in sorted(changed.items())]
        if self.mode == "weak":  # a check that holds whatever the agent does
            checks = [{"type": "kv_equals", "key": "never-set", "value": None}]
        return {"changes": len(changed), "checkers": checks, "summary": [f"{k} -> {v!r}" for k, v in changed.items()]}


def demo(write, actions, **extra) -> Path:
    doc = {"environment": {"type": "kv", "initial": {"a": "1"}}, "id": "set-b", "instruction": "Set b to 2, drop a",
           "actions": actions, **extra}
    return write("demo.yaml", yaml.safe_dump(doc, sort_keys=False))


SET_B = {"tool": "set", "arguments": {"key": "b", "value": "2"}}
DEL_A = {"tool": "delete", "arguments": {"key": "a"}}


def test_a_demonstration_becomes_a_pack_whose_oracle_passes_and_noop_fails(host, cli, write, tmp_path):
    host.add_plugin(KVDemo(), "kvdemo")
    path = demo(write, [{"tool": "get", "arguments": {"key": "a"}}, SET_B, DEL_A, {"answer": "done"}])
    code, out, err = cli("pack", "new", "kvpack", "--from-demo", str(path), "-o", "made")
    assert code == 0, err
    assert "changed: b -> '2'" in out and "next: agentsynth pack validate made" in out
    pack = load_pack(tmp_path / "made")
    assert [c.params for c in pack.tasks[0].checkers] == [{"key": "a", "value": None}, {"key": "b", "value": "2"}]
    for policy, status in (("oracle", "passed"), ("noop", "failed")):
        [result] = run(RunSpec(policy=ComponentSpec(policy)), pack).results
        assert result.status == status
    # half the change is not the change
    half = ComponentSpec("scripted", {"actions": [SET_B]})
    assert run(RunSpec(policy=half), pack).results[0].status == "failed"


@pytest.mark.parametrize(("mode", "actions", "message"), [
    ("random", [SET_B], "two replays of the demonstration gave different end states"),
    ("weak", [SET_B], "an agent that does nothing passes the generated checks"),
    ("garbage", [SET_B], "not a mapping with a 'checkers' list"),
    ("broken", [SET_B], "the 'kv' world's checks_from_demo hook failed: KeyError: 'a bug in the plugin'"),
    ("exact", [{"tool": "get", "arguments": {"key": "a"}}], "changed nothing in the world and gave no answer"),
    ("exact", [SET_B, {"tool": "get", "arguments": {"key": "zz"}}], "actions[1] (get): the world returned an error: no key 'zz'"),
    ("exact", [SET_B, {"tool": "fail", "arguments": {}}], "actions[1] (fail): the world raised RuntimeError: the world broke"),
    ("exact", [{"tool": "sett", "arguments": {}}], "the world has no tool 'sett' (did you mean 'set'?)"),
])
def test_what_cannot_make_a_sound_pack_is_refused_and_nothing_is_written(host, cli, write, tmp_path, mode, actions,
                                                                       message):
    host.add_plugin(KVDemo(mode), "kvdemo")
    path = demo(write, actions)
    code, _out, err = cli("pack", "new", "kvpack", "--from-demo", str(path), "-o", "made")
    assert code != 0 and message in err and str(path) in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "made").exists() and not list(tmp_path.glob(".made.partial*"))


def test_an_answer_only_demonstration_gets_an_answer_check_and_a_warning(host, cli, write, tmp_path):
    host.add_plugin(KVDemo(), "kvdemo")
    path = demo(write, [{"tool": "get", "arguments": {"key": "a"}}, {"answer": "a holds 1"}],
                instruction="What does key a hold?")
    code, _out, err = cli("pack", "new", "ask", "--from-demo", str(path), "-o", "ask")
    # the kv plugin offers no "nothing changed" check of its own: the answer check alone is not a
    # world check, so noop (empty answer) fails and the warning says what decides
    assert code == 0, err
    assert "has only answer checks" in err
    checks = yaml.safe_load((tmp_path / "ask" / "pack.yaml").read_text())["tasks"][0]["checkers"]
    assert checks == [{"type": "answer_number", "value": 1.0}]


def test_bad_demonstration_files_name_the_file_and_the_key(host, cli, write, tmp_path):
    host.add_plugin(KVDemo(), "kvdemo")
    cases = {
        "instrction: x\nenvironment: kv\nactions: []\n": "instrction",
        "environment: kv\ninstruction: x\nactions: {tool: set}\n": "actions: expected a list",
        "environment: kv\ninstruction: x\nactions: [{answer: a}, {tool: set, arguments: {}}]\n": "must be the last",
        "environment: kv\ninstruction: x\nactions: [{tool: set, arguments: {}}]\npack: p\n": "either 'environment'",
        "environment: kv\nactions: [{tool: set, arguments: {}}]\n": "instruction: the task's instruction is missing",
        "environment: nope\ninstruction: x\nactions: [{tool: set, arguments: {}}]\n": "nope",
        "environment: kv\ninstruction: x\nexpect_answer: [1]\nactions: [{answer: a}]\n": "expect_answer",
        "- just a list\n": "expected a mapping",
    }
    for text, message in cases.items():
        path = write("demo.yaml", text)
        code, _out, err = cli("pack", "new", "p", "--from-demo", str(path), "-o", "p")
        assert code != 0 and f"{path}: " in err and message in err, (text, err)
        assert not (tmp_path / "p").exists()
    code, _out, err = cli("pack", "new", "p", "--from-demo", str(tmp_path / "missing.yaml"))
    assert code != 0 and "missing.yaml: demonstration file not found" in err
    code, _out, err = cli("pack", "new", "bad name", "--from-demo", str(path))
    assert code != 0 and "not a valid pack name" in err


def test_the_option_refuses_what_does_not_go_with_it(tmp_path):
    with pytest.raises(click.UsageError, match="leave out --from-schema"):
        pack_demo.new_from_demo_option("p", "demo.yaml", None, parent=tmp_path, schema=tmp_path / "s.sql",
                                       environment=None)
    with pytest.raises(click.UsageError, match="-o/--out is for --from-demo"):
        pack_demo.new_from_demo_option("p", None, tmp_path / "o", parent=tmp_path, schema=None, environment=None)


def test_a_world_no_plugin_handles_is_named(host, cli, write, tmp_path):
    path = demo(write, [SET_B])  # no plugin writes checks for kv worlds here
    code, _out, err = cli("pack", "new", "kvpack", "--from-demo", str(path), "-o", "made")
    assert code != 0 and "no installed plugin writes checks from a demonstration in a 'kv' world" in err
    assert not (tmp_path / "made").exists()


def test_a_world_that_blocks_is_stopped_by_the_timeout_not_waited_for(write):
    """The world's sync methods run on a worker thread (as in an episode), so a step that blocks
    does not hold the event loop and the demonstration's timeout ends it."""
    import asyncio
    import time

    from agentsynth_kernel import AgentsynthError, get_host

    path = demo(write, [{"tool": "sleep", "arguments": {"seconds": 20}}, SET_B])
    started = time.monotonic()
    with pytest.raises(AgentsynthError, match="did not finish within 0.5s"):
        asyncio.run(pack_demo.play(pack_demo.load_demo(path, host=get_host()), host=get_host(), timeout=0.5))
    assert time.monotonic() - started < 15  # not the 20 s the world sleeps
