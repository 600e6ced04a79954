"""agentsynth-mcp: any MCP server as an outcome-checked agentsynth environment."""

from . import jsonpath
from .environment import McpEnvironment, McpSpec
from .session import McpServerError, McpSession, ServerInfo

__version__ = "0.1.0"

__all__ = ["jsonpath", "McpEnvironment", "McpServerError", "McpSession", "McpSpec", "ServerInfo", "__version__"]
