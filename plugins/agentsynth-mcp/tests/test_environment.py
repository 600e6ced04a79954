"""The `mcp` environment against real MCP servers started as subprocesses (stdio and HTTP)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from mcp_helpers import process_alive, wait_dead

from agentsynth_kernel import ToolCall
from agentsynth_mcp import McpEnvironment, McpServerError, McpSpec


def make_env(tmp_path: Path, toy: Path, *extra: str, **params) -> McpEnvironment:
    params.setdefault("command", sys.executable)
    params.setdefault("args", [str(toy), *extra])
    return McpEnvironment(McpSpec(**params), base_dir=tmp_path)


async def test_stdio_tools_resources_prompts_and_results(tmp_path, toy):
    env = make_env(tmp_path, toy, media_dir="media")
    try:
        first = await env.reset(seed=1)
        tools = {t.name: t for t in await env.tools()}
        # tools discovered with their JSON schemas
        assert {"echo", "add", "fail", "picture", "crash", "hang"} <= set(tools)
        assert tools["add"].parameters["properties"]["a"]["type"] == "integer"
        assert tools["add"].parameters["required"] == ["a", "b"]
        assert tools["add"].description == "Add two integers."
        # the server's readOnlyHint is kept (judges read it), and never sent to a model
        assert (tools["echo"].read_only, tools["add"].read_only, tools["read_resource"].read_only) == (True, None, True)
        assert "read_only" not in str(tools["echo"].to_openai())
        # resources and prompts are listed, and a read_resource tool is offered
        assert "toy://readme" in first.content and "greet(name)" in first.content
        assert first.data["server"]["name"] == "toy"
        assert [r["uri"] for r in first.data["resources"]] == ["toy://readme", "toy://data", "toy://counter"]
        assert first.data["prompts"][0]["name"] == "greet"
        assert "read_resource" in tools

        # an MCP name with a dot is offered under an OpenAI-safe name and mapped back
        assert "notes.count" not in tools and "notes_count" in tools
        assert (await env.step(ToolCall("notes_count", {}))).error is False

        obs = await env.step(ToolCall("echo", {"text": "hi there"}))
        assert (obs.content, obs.error) == ("hi there", False)

        obs = await env.step(ToolCall("add", {"a": 2, "b": 40}))
        assert obs.content == "42" and obs.data["structured"] == {"result": 42}

        obs = await env.step(ToolCall("item", {"name": "box"}))
        assert obs.data["structured"] == {"name": "box", "tags": ["x", "y"]}

        obs = await env.step(ToolCall("fail", {"reason": "nope"}))  # isError -> error observation
        assert obs.error is True and "refused: nope" in obs.content and obs.data["is_error"] is True

        obs = await env.step(ToolCall("add", {"a": "x"}))  # bad arguments: the server says so
        assert obs.error is True and "validation" in obs.content.lower()

        obs = await env.step(ToolCall("picture", {}))  # images become references, never base64
        assert obs.error is False
        assert obs.content.startswith("[image image/png, 40 bytes, sha256:")
        assert obs.data["media"][0]["bytes"] == 40 and len(obs.data["media"][0]["sha256"]) == 64
        assert "iVBOR" not in obs.content
        saved = Path(obs.data["media"][0]["path"])  # media_dir: saved by content hash
        assert saved.parent == tmp_path / "media" and saved.read_bytes().startswith(b"\x89PNG")

        obs = await env.step(ToolCall("read_resource", {"uri": "toy://readme"}))
        assert obs.content == "toy server readme" and not obs.error
        obs = await env.step(ToolCall("read_resource", {"uri": "toy://missing"}))
        assert obs.error is True and "toy://missing" in obs.content
        obs = await env.step(ToolCall("read_resource", {}))
        assert obs.error is True and "uri" in obs.content

        prompt = await env.session.get_prompt("greet", {"name": "Ada"})
        assert "Ada" in prompt.messages[0].content.text
    finally:
        await env.close()
    assert env.session is None and env.workdir is not None and not env.workdir.exists()


async def test_setup_hide_tools_placeholders_and_env(tmp_path, toy):
    world = tmp_path / "world"
    world.mkdir()
    (world / "seeded.txt").write_text("from the pack")
    env = make_env(
        tmp_path, toy, world="world", hide_tools=["crash", "hang"],
        env={"TOY_SEED": "{seed}", "TOY_WORLD": "{world}"},
        setup=[{"tool": "bump"}, {"tool": "bump"}], resource_tool=False, protocol="legacy",
    )
    try:
        first = await env.reset(seed=77)
        assert first.data["server"]["protocol_version"] < "2026"  # the initialize handshake was used
        names = {t.name for t in await env.tools()}
        assert "crash" not in names and "hang" not in names and "read_resource" not in names
        assert (await env.step(ToolCall("env_var", {"name": "TOY_SEED"}))).content == "77"
        # the episode's path is shown as a stable placeholder (and turned back in the agent's arguments)
        assert (await env.step(ToolCall("env_var", {"name": "TOY_WORLD"}))).content == "<world>"
        assert (await env.step(ToolCall("read_note", {"name": "<world>/seeded.txt"}))).content == "from the pack"
        # setup ran twice before the agent's first call
        assert (await env.step(ToolCall("bump", {}))).content == "3"
        # the server's cwd is the episode's copy of the world
        assert (await env.step(ToolCall("read_note", {"name": "seeded.txt"}))).content == "from the pack"
        # checkers may call hidden tools
        assert (await env.call_tool("pid", {})).structured_content["result"] > 0
    finally:
        await env.close()


async def test_each_episode_gets_a_fresh_server_and_world(tmp_path, toy):
    world = tmp_path / "world"
    world.mkdir()
    results = []
    for seed in (1, 2):
        env = make_env(tmp_path, toy, world="world")
        try:
            await env.reset(seed=seed)
            counter = (await env.step(ToolCall("bump", {}))).content
            before = await env.step(ToolCall("read_note", {"name": "left.txt"}))
            await env.step(ToolCall("write_note", {"name": "left.txt", "text": f"episode {seed}"}))
            pid = int((await env.step(ToolCall("pid", {}))).content)
            results.append((counter, before.error, pid))
        finally:
            await env.close()
        assert wait_dead(pid), "the server outlived its episode"
    assert [r[0] for r in results] == ["1", "1"]  # in-memory state did not leak
    assert [r[1] for r in results] == [True, True]  # the file of episode 1 is not in episode 2
    assert results[0][2] != results[1][2]
    assert list(world.iterdir()) == []  # the pack's world itself is never written


async def test_crash_mid_episode_fails_clearly_and_leaves_no_process(tmp_path, toy):
    env = make_env(tmp_path, toy)
    try:
        await env.reset(seed=0)
        pid = int((await env.step(ToolCall("pid", {}))).content)
        with pytest.raises(McpServerError) as info:
            await env.step(ToolCall("crash", {}))
        message = str(info.value)
        assert "closed the connection during tools/call 'crash'" in message
        assert "crashing on purpose" in message  # the server's stderr tail
        assert not process_alive(pid)
        with pytest.raises(McpServerError):  # the session stays failed
            await env.step(ToolCall("echo", {"text": "x"}))
    finally:
        await env.close()


async def test_hanging_tool_times_out_and_kills_the_process_group(tmp_path, toy):
    env = make_env(tmp_path, toy, call_timeout=1.0)
    try:
        await env.reset(seed=0)
        pid = int((await env.step(ToolCall("pid", {}))).content)
        child = int((await env.step(ToolCall("spawn_child", {}))).content)
        assert process_alive(child)
        started = time.monotonic()
        with pytest.raises(McpServerError, match=r"did not answer tools/call 'hang' within 1s"):
            await env.step(ToolCall("hang", {}))
        assert time.monotonic() - started < 8
        assert wait_dead(pid) and wait_dead(child)  # no orphans, grandchildren included
    finally:
        await env.close()


async def test_server_that_hangs_at_start_hits_connect_timeout(tmp_path, toy):
    pidfile = tmp_path / "hang.pid"
    env = make_env(tmp_path, toy, "--hang-on-start", "--pidfile", str(pidfile), connect_timeout=2.0,
                   writable=[str(tmp_path)])
    try:
        with pytest.raises(McpServerError, match=r"did not connect within 2s \(connect_timeout\)"):
            await env.reset(seed=0)
    finally:
        await env.close()
    assert wait_dead(int(pidfile.read_text()))


async def test_server_that_crashes_at_start_shows_its_stderr(tmp_path, toy):
    env = make_env(tmp_path, toy, "--crash-on-start")
    try:
        with pytest.raises(McpServerError) as info:
            await env.reset(seed=0)
    finally:
        await env.close()
    assert "before the handshake finished" in str(info.value)
    assert "cannot start (--crash-on-start)" in str(info.value)


async def test_missing_command_is_a_clear_error(tmp_path):
    env = McpEnvironment(McpSpec(command="/nonexistent/mcp-server"), base_dir=tmp_path)
    try:
        with pytest.raises(McpServerError, match="No such file or directory"):
            await env.reset(seed=0)
    finally:
        await env.close()


async def test_close_from_another_task_while_a_call_is_in_flight(tmp_path, toy):
    """The engine cancels a timed-out episode and closes the env from another task: no
    'cancel scope in a different task' error, and the server is gone."""
    env = make_env(tmp_path, toy)
    await asyncio.create_task(env.reset(seed=0))
    pid = int((await asyncio.create_task(env.step(ToolCall("pid", {})))).content)
    call = asyncio.create_task(env.step(ToolCall("hang", {})))
    await asyncio.sleep(0.3)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.create_task(env.close())
    assert wait_dead(pid)
    await env.close()  # idempotent


async def test_launched_streamable_http_server_per_episode(tmp_path, toy):
    env = make_env(tmp_path, toy, "--http", "{port}", url="http://127.0.0.1:{port}/mcp", call_timeout=5)
    try:
        first = await env.reset(seed=0)
        assert first.data["server"]["name"] == "toy"
        assert (await env.step(ToolCall("add", {"a": 1, "b": 2}))).content == "3"
        assert (await env.step(ToolCall("fail", {}))).error is True
        pid = env.session.pid
        assert pid is not None and process_alive(pid)
        with pytest.raises(McpServerError) as info:
            await env.step(ToolCall("crash", {"code": 5}))
        assert "crash" in str(info.value) and "exited with code 5" in str(info.value)
    finally:
        await env.close()
    assert wait_dead(pid)


async def test_launched_sse_server(tmp_path, toy):
    env = make_env(tmp_path, toy, "--sse", "{port}", url="http://127.0.0.1:{port}/sse")
    try:
        await env.reset(seed=0)
        assert env.session.endpoint.transport == "sse"
        obs = await env.step(ToolCall("item", {"name": "over sse"}))
        assert obs.data["structured"]["name"] == "over sse"
        pid = env.session.pid
    finally:
        await env.close()
    assert wait_dead(pid)


async def test_running_http_server_by_url_with_headers(tmp_path, running_http_server):
    env = McpEnvironment(McpSpec(url=running_http_server, headers={"X-Api-Key": "secret"}), base_dir=tmp_path)
    try:
        await env.reset(seed=0)
        assert (await env.step(ToolCall("echo", {"text": "over http"}))).content == "over http"
        assert (await env.step(ToolCall("header", {"name": "x-api-key"}))).content == "secret"
        assert (await env.step(ToolCall("read_resource", {"uri": "toy://data"}))).content.startswith("{")
    finally:
        await env.close()


async def test_unreachable_url_is_a_clear_error(tmp_path):
    env = McpEnvironment(McpSpec(url="http://127.0.0.1:9/mcp", connect_timeout=5), base_dir=tmp_path)
    try:
        with pytest.raises(McpServerError, match="127.0.0.1:9"):
            await env.reset(seed=0)
    finally:
        await env.close()
