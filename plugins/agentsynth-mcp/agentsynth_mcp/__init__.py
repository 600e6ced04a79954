"""agentsynth-mcp: any MCP server as an outcome-checked agentsynth environment."""

from .environment import McpEnvironment, McpSpec
from .session import McpServerError, McpSession, ServerInfo

__version__ = "0.1.0"

__all__ = ["McpEnvironment", "McpServerError", "McpSession", "McpSpec", "ServerInfo", "__version__"]
