"""agentsynth-mcp: any MCP server as an outcome-checked agentsynth environment.

Names are imported on first use.
"""

from __future__ import annotations

from agentsynth_kernel import lazy_exports

__version__ = "0.1.0"

__all__ = ["McpEnvironment", "McpServerError", "McpSession", "McpSpec", "ServerInfo", "__version__", "jsonpath"]

_EXPORTS: dict[str, str | None] = {  # name -> the submodule it comes from (None: the submodule itself)
    **dict.fromkeys(("jsonpath",), None),
    **dict.fromkeys(("McpEnvironment", "McpSpec"), "environment"),
    **dict.fromkeys(("McpServerError", "McpSession", "ServerInfo"), "session"),
}


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
