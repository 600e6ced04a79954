"""The pack as an OpenEnv server, driven by OpenEnv's own clients over a real socket."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

pytest.importorskip("openenv.core")
import uvicorn  # noqa: E402
from openenv.core import GenericEnvClient  # noqa: E402

from agentsynth_kernel.cli import main  # noqa: E402
from agentsynth_rl.serve import PackAction, PackEnvClient, make_app  # noqa: E402


@pytest.fixture
def server(pack, host):
    """A uvicorn server on a free port in this process (the kv world is registered on the host)."""
    config = uvicorn.Config(make_app(pack, host=host, max_concurrent_envs=8), host="127.0.0.1", port=0,
                            log_level="warning", ws="auto")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not srv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the OpenEnv server did not start")
        time.sleep(0.01)
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=30)


def test_generic_client_plays_an_episode_to_its_verdict(server):
    with GenericEnvClient(base_url=server).sync() as env:
        first = env.reset(task_id="set-b", seed=4)
        assert first.observation["content"].startswith("Set b to 2.") and first.observation["split"] == "train"
        assert [t["function"]["name"] for t in first.observation["tools"]] == ["get", "put", "boom"]
        step = env.step({"tool": "put", "arguments": {"key": "b", "value": "2"}})
        assert (step.observation["content"], step.done, step.reward) == ("b = 2", False, 0.0)
        end = env.step({"answer": "done"})
        assert end.done and end.reward == 1.0
        assert end.observation["status"] == "passed" and end.observation["verdicts"][0]["checker"] == "kv_equals"
        assert end.observation["provenance"]["seed"] == 4 and end.observation["provenance"]["split"] == "train"


async def test_typed_clients_in_concurrent_sessions_have_their_own_worlds(server):
    async with PackEnvClient(base_url=server) as a, PackEnvClient(base_url=server) as b:
        await asyncio.gather(a.reset(task_id="set-b"), b.reset(task_id="set-b"))
        await a.step(PackAction(tool_calls=[{"id": "1", "type": "function",
                                             "function": {"name": "put", "arguments": '{"key": "b", "value": "2"}'}}]))
        seen = await b.step(PackAction(tool="get", arguments={"key": "b"}))
        assert seen.observation.content == "(missing)"
        ra, rb = await asyncio.gather(a.step(PackAction(answer="ok")), b.step(PackAction(answer="ok")))
        assert (ra.reward, rb.reward) == (1.0, 0.0)
        assert ra.observation.status == "passed" and rb.observation.error_kind == "agent"


def test_the_server_refuses_test_tasks_and_bad_actions(server):
    with GenericEnvClient(base_url=server).sync() as env:
        with pytest.raises(Exception, match="test' split"):
            env.reset(task_id="held-out")
    with GenericEnvClient(base_url=server).sync() as env:
        env.reset(task_id="set-b")
        with pytest.raises(Exception, match="exactly one of"):
            env.step({"tool": "get", "answer": "both"})


def test_make_app_checks_before_serving(pack, host):
    with pytest.raises(ValueError, match="has no 'test' tasks|split"):
        make_app(pack, host=host, split="dev")


def test_rl_serve_is_a_command(host, capsys):
    assert main(["rl", "serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Serve PACK" in out and "--split" in out
    with pytest.raises(SystemExit) as exc:
        main(["rl", "serve", "no-such-pack"])
    assert exc.value.code == 2
    assert "no such pack" in capsys.readouterr().err
