"""What `agentsynth plugins` and the generated plugin table say about this plugin."""

METADATA = {
    "name": "agentsynth-mcp",
    "kind": "environment",
    "status": "beta",
    "capabilities": {
        "environments": ["mcp"],
        "checkers": ["mcp_call", "mcp_file", "mcp_sql"],
        "packs": ["mcp-tickets"],
        "commands": ["mcp tools"],
        "transports": ["stdio", "streamable-http", "sse"],
    },
}
