"""The agentsynth-mcp plugin: hook implementations only (components live in their own modules).

Imports here stay light: the ``mcp`` SDK is imported when a session starts, so
``agentsynth plugins`` and ``agentsynth --help`` stay fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsynth_kernel import hookimpl

PACKS = Path(__file__).parent / "packs"


@hookimpl
def register_environments(register: Any) -> None:
    register("mcp", "agentsynth_mcp.environment:McpEnvironment", spec_cls="agentsynth_mcp.environment:McpSpec",
             description="Any MCP server (stdio command, or streamable HTTP / SSE url) as a world")


@hookimpl
def register_checkers(register: Any) -> None:
    register("mcp_call", "agentsynth_mcp.checkers:McpCall", description="Call an MCP tool / read a resource at the end and compare the result")
    register("mcp_file", "agentsynth_mcp.checkers:McpFile", description="A file in the MCP world directory exists / has the expected content")
    register("mcp_sql", "agentsynth_mcp.checkers:McpSql", description="A query on an SQLite file in the MCP world directory returns the expected value")


@hookimpl
def register_packs(register: Any) -> None:
    register("mcp-tickets", PACKS / "tickets",
             description="A stateful MCP ticketing service (stdio server written with the SDK's MCPServer)")


@hookimpl
def register_commands(cli: Any) -> None:
    from .commands import mcp

    cli.add_command(mcp)


@hookimpl
def adversarial_exploits(environment: str) -> list[Any] | None:
    if environment != "mcp":
        return None
    from .exploits import mcp_exploits

    return mcp_exploits()
