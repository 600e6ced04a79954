from agentsynth_kernel import ToolCall, get_host


def test_environment_is_registered_and_answers():
    env = get_host().get("environment", "__name__").factory()
    assert env.reset(0).content == "ready"
    assert env.step(ToolCall("ping")).content == "pong"
