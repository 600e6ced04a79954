"""A launched HTTP server dies with agentsynth, even when agentsynth is killed with SIGKILL
(stdio servers notice their closed stdin; an HTTP server needs the kernel's parent-death signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from mcp_helpers import process_alive, wait_dead

CHILD = textwrap.dedent("""
    import asyncio, sys, time
    from agentsynth_mcp import McpEnvironment, McpSpec

    async def main():
        spec = McpSpec(command=sys.executable, args=[sys.argv[1], "--http", "{port}"],
                       url="http://127.0.0.1:{port}/mcp", call_timeout=5)
        env = McpEnvironment(spec, base_dir=".")
        await env.reset(seed=0)
        print(env.session.pid, flush=True)
        time.sleep(60)  # SIGKILLed here, without closing anything

    asyncio.run(main())
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only")
def test_http_server_dies_when_agentsynth_is_sigkilled(tmp_path, toy):
    (tmp_path / "child.py").write_text(CHILD)
    proc = subprocess.Popen([sys.executable, "child.py", str(toy)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.stderr.read()
        server_pid = int(line)
        assert process_alive(server_pid)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert wait_dead(server_pid, timeout=10), "the launched MCP server outlived its killed parent"
