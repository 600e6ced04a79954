"""agentsynth-rest: any HTTP API from its OpenAPI document, and apps a pack ships, as worlds."""

from .env import RestEnvironment, RestEnvSpec
from .openapi import OpenAPIError
from .server import WorldStartError

__all__ = ["OpenAPIError", "RestEnvSpec", "RestEnvironment", "WorldStartError"]
