"""agentsynth-rest: any HTTP API from its OpenAPI document, and apps a pack ships, as worlds.

Names are imported on first use: loading the plugin (its entry point) imports no HTTP client.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"OpenAPIError": "openapi", "RestEnvSpec": "env", "RestEnvironment": "env", "WorldStartError": "server"}

__all__ = ["OpenAPIError", "RestEnvSpec", "RestEnvironment", "WorldStartError"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentsynth_rest' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
