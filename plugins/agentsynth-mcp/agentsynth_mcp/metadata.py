"""What this plugin is, for the generated plugin table (plugins/README.md) and `agentsynth plugins`."""

METADATA = {
    "kind": ["environment", "checker", "pack", "command"],
    "status": "beta",
    "capabilities": [
        "environment:mcp", "checker:mcp_call", "checker:mcp_file", "checker:mcp_sql", "pack:mcp-tickets",
        "command:mcp tools", "command:mcp call", "transports: stdio, streamable-http, sse",
    ],
    "requires": ["mcp>=2.3 (the official MCP Python SDK)"],
}
