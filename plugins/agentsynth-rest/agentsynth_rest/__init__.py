"""agentsynth-rest: any HTTP API from its OpenAPI document, and apps a pack ships, as worlds.

Names are imported on first use: loading the plugin (its entry point) imports no HTTP client.
"""

from __future__ import annotations

from agentsynth_kernel import lazy_exports

_EXPORTS = {"OpenAPIError": "openapi", "RestEnvSpec": "env", "RestEnvironment": "env", "WorldStartError": "server"}

__all__ = ["OpenAPIError", "RestEnvSpec", "RestEnvironment", "WorldStartError"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
