"""Issue 13/14 for MCP worlds: checkers read only the world's real end state, under limits; observations,
arguments and the world are bounded; paths are placeholders; setup commands; stale directories are swept."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from mcp_helpers import HERE, TOY, wait_dead

from agentsynth_kernel import InvalidValue, ToolCall, Trajectory
from agentsynth_mcp import McpEnvironment, McpServerError, McpSpec
from agentsynth_mcp.checkers import McpCall, McpFile, McpSql
from agentsynth_mcp.world import sweep_stale

FILES = HERE / "servers" / "files_server.py"
TRAJ = Trajectory("t", "do it")


def _landlock() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    return ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1) >= 1


def files_env(tmp_path: Path, **params) -> McpEnvironment:
    world = tmp_path / "world"
    if not world.exists():
        world.mkdir()
        (world / "seed.sql").write_text("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);"
                                        "INSERT INTO items (name) VALUES ('bolt');")
        (world / "keep.txt").write_text("seeded")
    params.setdefault("call_timeout", 15)
    spec = McpSpec(command=sys.executable, args=[str(FILES), "--world", "{world}"], world="world", **params)
    return McpEnvironment(spec, base_dir=tmp_path)


async def call(env: McpEnvironment, tool: str, **arguments):
    return await env.step(ToolCall(tool, arguments))


# --- checkers read the world's real end state --------------------------------------------------


async def test_file_checkers_never_follow_links_out_of_the_world(tmp_path):
    bait = tmp_path / "elsewhere"
    bait.mkdir()
    (bait / "answer.txt").write_text("hello")
    (bait / "sub").mkdir()
    (bait / "sub" / "answer.txt").write_text("hello")
    env = files_env(tmp_path, confine_writes=False)  # a server that lets the agent link anywhere
    try:
        await env.reset(seed=0)
        assert not (await call(env, "symlink", target=str(bait / "answer.txt"), link="out.txt")).error
        assert not (await call(env, "symlink", target=str(bait / "sub"), link="dir")).error
        assert not (await call(env, "hardlink", target=str(bait / "answer.txt"), link="hard.txt")).error
        assert not (await call(env, "write_file", path="real.txt", text="hello")).error
        linked = await McpFile("out.txt", equals="hello").check(env, TRAJ)
        assert not linked.passed and "symbolic link" in linked.detail
        via_dir = await McpFile("dir/answer.txt", equals="hello").check(env, TRAJ)
        assert not via_dir.passed and "dir is a symbolic link" in via_dir.detail
        hard = await McpFile("hard.txt", equals="hello").check(env, TRAJ)
        assert not hard.passed and "2 hard links" in hard.detail
        assert (await McpFile("real.txt", equals="hello").check(env, TRAJ)).passed  # the real thing passes
    finally:
        await env.close()
    for bad in ("../elsewhere/answer.txt", "/etc/passwd", "a/../../b", ""):
        with pytest.raises(ValueError, match="relative path inside the world"):
            McpFile(bad)
        with pytest.raises(ValueError, match="relative path inside the world"):
            McpSql(bad, "SELECT 1", equals=1)


async def test_mcp_call_checks_on_a_fresh_server_not_the_agents(tmp_path):
    env = files_env(tmp_path)
    try:
        await env.reset(seed=0)
        await call(env, "draft", path="notes.txt", text="buy milk")  # only the agent's process shows it
        assert (await call(env, "read_file", path="notes.txt")).content == "buy milk"
        agent_session = env.session
        drafted = await McpCall(tool="read_file", arguments={"path": "notes.txt"}, contains="buy milk").check(env, TRAJ)
        assert not drafted.passed and "No such file" in drafted.detail
        assert env.session is None and agent_session.failure is None and not agent_session.alive  # stopped, not used
        with pytest.raises(McpServerError, match="checks have started"):
            await call(env, "write_file", path="notes.txt", text="buy milk")
    finally:
        await env.close()
    env = files_env(tmp_path)
    try:
        await env.reset(seed=0)
        await call(env, "write_file", path="notes.txt", text="buy milk")  # really doing it passes
        assert (await McpCall(tool="read_file", arguments={"path": "notes.txt"}, contains="buy milk")
                .check(env, TRAJ)).passed
    finally:
        await env.close()


async def test_checker_server_is_a_new_process(tmp_path):
    env = McpEnvironment(McpSpec(command=sys.executable, args=[str(TOY)]), base_dir=tmp_path)
    try:
        await env.reset(seed=0)
        agent_pid = int((await env.step(ToolCall("pid", {}))).content)
        checker_pid = (await env.call_tool("pid", {})).structured_content["result"]
        assert checker_pid != agent_pid and wait_dead(agent_pid)
    finally:
        await env.close()


async def test_sql_checker_reads_a_private_copy_and_refuses_tables_replaced_by_views(tmp_path):
    env = files_env(tmp_path)
    try:
        await env.reset(seed=0)
        assert env.seeded_schemas["app.db"]["items"] == "table"
        await call(env, "sql", query="ALTER TABLE items RENAME TO items_real; CREATE VIEW items AS "
                                     "SELECT * FROM items_real UNION ALL SELECT 99, 'widget'")
        faked = await call(env, "sql", query="SELECT count(*) FROM items WHERE name = 'widget'")
        assert faked.data["structured"]["result"] == [[1]]  # the agent's view shows the row
        shadowed = await McpSql("app.db", "SELECT count(*) FROM items WHERE name = 'widget'", equals=1).check(env, TRAJ)
        assert not shadowed.passed and "was a table in the seeded world and is now a view" in shadowed.detail
        world = env.world_dir
        assert sorted(p.name for p in world.iterdir() if p.name.startswith("app.db")) == ["app.db"]  # not written
    finally:
        await env.close()
    env = files_env(tmp_path, check_timeout=2)
    try:
        await env.reset(seed=0)
        await call(env, "sql", query="INSERT INTO items (name) VALUES ('widget')")
        assert (await McpSql("app.db", "SELECT count(*) FROM items WHERE name = 'widget'", equals=1)
                .check(env, TRAJ)).passed
        slow = await McpSql("app.db", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                                      "SELECT count(*) FROM c", equals=1).check(env, TRAJ)
        assert not slow.passed and "check_timeout" in slow.detail
    finally:
        await env.close()


async def test_a_server_that_hangs_or_crashes_under_a_checker_fails_the_check(tmp_path):
    env = files_env(tmp_path, check_timeout=1)
    try:
        await env.reset(seed=0)
        hung = await McpCall(tool="hang").check(env, TRAJ)
        assert not hung.passed and "did not answer tools/call 'hang' within 1s" in hung.detail
        assert "the server broke during the check" in hung.detail
    finally:
        await env.close()
    env = files_env(tmp_path)
    try:
        await env.reset(seed=0)
        crashed = await McpCall(tool="crash").check(env, TRAJ)
        assert not crashed.passed and "closed the connection" in crashed.detail
        assert not (await McpCall(tool="read_file", arguments={"path": "keep.txt"}).check(env, TRAJ)).passed
    finally:
        await env.close()
    # the agent left the world in a state where the server does not start: the check fails, within limits
    hang_world = tmp_path / "hanging"
    hang_world.mkdir()
    spec = McpSpec(command=sys.executable, args=[str(FILES), "--world", "{world}", "--hang-on-start-if", "stop"],
                   world="hanging", connect_timeout=15)
    env = McpEnvironment(spec, base_dir=tmp_path)
    try:
        await env.reset(seed=0)
        await call(env, "write_file", path="stop", text="")
        verdict = await McpCall(tool="read_file", arguments={"path": "stop"}).check(env, TRAJ)
        assert not verdict.passed and "did not start on the world the agent left" in verdict.detail
    finally:
        await env.close()


# --- bounded size --------------------------------------------------------------------------------


async def test_observations_and_arguments_are_capped(tmp_path):
    env = files_env(tmp_path, max_observation_bytes=4096, max_output_chars=0)
    try:
        await env.reset(seed=0)
        big = await call(env, "big", size=200_000)
        assert len(big.content.encode()) < 4200 and "truncated: 200000 bytes" in big.content
        structured = await call(env, "big_structured", items=200)
        kept = structured.data["structured"]
        assert kept["truncated"] is True and kept["bytes"] > 200_000 and len(kept["sha256"]) == 64
        huge = await call(env, "write_file", path="x.txt", text="A" * 2_000_000)
        assert huge.error and "max_argument_bytes" in huge.content
        deep: object = "leaf"
        for _ in range(100):
            deep = {"a": deep}
        nested = await call(env, "write_file", path="x.txt", text=deep)
        assert nested.error and "max_argument_depth" in nested.content
        surrogate = await call(env, "write_file", path="x.txt", text="bad \ud800")
        assert surrogate.error and "lone surrogate" in surrogate.content
        assert not (env.world_dir / "x.txt").exists()  # nothing was sent
        assert (await call(env, "read_file", path="keep.txt")).content == "seeded"  # the server is fine
    finally:
        await env.close()


async def test_the_world_quota_ends_the_episode_and_fails_the_checks(tmp_path):
    env = files_env(tmp_path, max_world_bytes=600_000)
    try:
        await env.reset(seed=0)
        one_call = await call(env, "write_file", path="one.txt", text="B" * 700_000)
        # no file grows past the quota even within one call (RLIMIT_FSIZE), and the quota is then reached
        assert one_call.error  # the server got EFBIG
        assert (env.world_dir / "one.txt").stat().st_size <= 600_000
        assert one_call.done and env.violation and "max_world_bytes" in env.violation
        last = await call(env, "read_file", path="keep.txt")
        assert last.error and last.done and "max_world_bytes" in last.content
        verdict = await McpFile("keep.txt", equals="seeded").check(env, TRAJ)
        assert not verdict.passed and "broke a limit of the world" in verdict.detail
    finally:
        await env.close()
    env = files_env(tmp_path, max_world_files=12)
    try:
        await env.reset(seed=0)
        observations = [await call(env, "write_file", path=f"f{i}.txt", text="x") for i in range(12)]
        assert observations[-1].done and "max_world_files" in observations[-1].content
    finally:
        await env.close()


@pytest.mark.skipif(not _landlock(), reason="needs Linux Landlock")
async def test_the_server_cannot_write_outside_its_episode(tmp_path):
    outside = tmp_path / "outside.db"
    env = files_env(tmp_path)
    try:
        await env.reset(seed=0)
        obs = await call(env, "sql", query=f"ATTACH '{outside}' AS x; CREATE TABLE x.t (a)")
        assert obs.error and not outside.exists()
        bait = tmp_path / "bait.txt"
        bait.write_text("hello")
        assert (await call(env, "hardlink", target=str(bait), link="h.txt")).error  # cross-tree links refused
        assert not (await call(env, "write_file", path="inside.txt", text="fine")).error
    finally:
        await env.close()


# --- issue 14: placeholders, setup commands, stale directories -------------------------------------


async def test_the_world_path_is_a_stable_placeholder(tmp_path):
    seen = []
    for seed in (1, 1):
        env = files_env(tmp_path, hide_tools=[])
        try:
            await env.reset(seed=seed)
            where = await call(env, "where")
            missing = await call(env, "read_file", path=f"{env.world_dir}/nope.txt")
            seen.append((where.content, missing.content))
            assert str(env.workdir) not in missing.content
            assert (await call(env, "read_file", path="<world>/keep.txt")).content == "seeded"
        finally:
            await env.close()
    assert seen[0] == seen[1] and seen[0][0] == "<world>" and "<world>/nope.txt" in seen[0][1]


async def test_setup_commands_seed_each_episode_before_the_server_starts(tmp_path):
    script = "import sys; open('seeded.txt', 'w').write('seed ' + sys.argv[1])"
    env = files_env(tmp_path, setup=[{"command": ["{python}", "-c", script, "{seed}"]},
                                     {"tool": "write_file", "arguments": {"path": "after.txt", "text": "tool"}}])
    try:
        await env.reset(seed=7)
        assert (await call(env, "read_file", path="seeded.txt")).content == "seed 7"
        assert (await call(env, "read_file", path="after.txt")).content == "tool"
    finally:
        await env.close()
    failing = files_env(tmp_path, setup=[{"command": ["{python}", "-c", "import sys; print('no seed'); sys.exit(3)"]}])
    with pytest.raises(McpServerError, match=r"(?s)setup\[0\]: command .* exited with code 3.*no seed"):
        await failing.reset(seed=0)
    await failing.close()
    slow = files_env(tmp_path, setup=[{"command": ["{python}", "-c", "import time; time.sleep(60)"], "timeout": 1}])
    with pytest.raises(McpServerError, match=r"did not finish within 1s \(setup timeout\)"):
        await slow.reset(seed=0)
    await slow.close()
    with pytest.raises(InvalidValue, match=r"setup\[1\]: commands run before the server starts"):
        McpSpec(command="x", setup=[{"tool": "t"}, {"command": ["true"]}])
    with pytest.raises(InvalidValue, match=r"setup\[0\].timeout"):
        McpSpec(command="x", setup=[{"command": ["true"], "timeout": -1}])
    with pytest.raises(InvalidValue, match=r"setup\[0\]: unknown key 'cwd'"):
        McpSpec(command="x", setup=[{"command": ["true"], "cwd": "/"}])


CHILD = textwrap.dedent("""
    import asyncio, sys, time
    from agentsynth_mcp import McpEnvironment, McpSpec

    async def main():
        spec = McpSpec(command=sys.executable, args=[sys.argv[1]], world="world")
        env = McpEnvironment(spec, base_dir=".")
        await env.reset(seed=0)
        print(env.workdir, flush=True)
        time.sleep(60)  # SIGKILLed here, without closing anything

    asyncio.run(main())
""")


def test_directories_of_killed_processes_are_swept_and_only_those(tmp_path):
    (tmp_path / "world").mkdir()
    (tmp_path / "child.py").write_text(CHILD)
    proc = subprocess.Popen([sys.executable, "child.py", str(TOY)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line, proc.stderr.read()
        left = Path(line)
        assert left.is_dir() and left.name.startswith(f"agentsynth-mcp-{proc.pid}-")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert left.is_dir()  # SIGKILL: nobody cleaned up
    mine = Path(tempfile.gettempdir()) / f"agentsynth-mcp-{os.getpid()}-test-live"
    mine.mkdir(exist_ok=True)
    unrelated = tmp_path / "agentsynth-mcp-notapid"
    unrelated.mkdir()
    try:
        removed = sweep_stale()
        assert left in removed and not left.exists()
        assert mine.is_dir()  # a live process's directory stays
        assert sweep_stale(tmp_path) == [] and unrelated.is_dir()
    finally:
        mine.rmdir()
