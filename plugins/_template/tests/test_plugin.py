"""The plugin's own tests: its components work, and its pack passes every gate of `pack validate`."""

from agentsynth_kernel import ToolCall, get_host, validate_pack


def test_environment_is_registered_and_keeps_state():
    env = get_host().get("environment", "__name__").factory(initial=["a"])
    assert env.reset(0).content == "1 note(s)"
    assert env.step(ToolCall("add_note", {"text": "b"})).content == "added note 2"
    assert env.step(ToolCall("list_notes", {})).content == "a\nb"
    assert env.step(ToolCall("add_note", {"text": ""})).error


def test_the_checker_reads_the_world_not_the_answer():
    host = get_host()
    env = host.get("environment", "__name__").factory()
    env.reset(0)
    check = host.get("checker", "__name___note_exists").factory(text="call Bob")
    assert not check.check(env, None).passed  # claiming it in an answer changes nothing
    env.step(ToolCall("add_note", {"text": "call Bob"}))
    assert check.check(env, None).passed


def test_the_pack_passes_every_gate():
    pack, gates = validate_pack("__name__-demo")
    failed = {g.name: g.problems for g in gates if g.status == "fail"}
    assert pack is not None and not failed, failed
