"""agentsynth-generate: verified training trajectories from queries, a tool catalog or a world."""

from .api import generate_records
from .catalog import Scenario, load_queries, load_tools, parse_queries, parse_tools
from .core import GenerateConfig, Generation, Inputs, Report, generate
from .spec import GenerateSpec

__all__ = ["GenerateConfig", "GenerateSpec", "Generation", "Inputs", "Report", "Scenario", "generate",
           "generate_records", "load_queries", "load_tools", "parse_queries", "parse_tools"]
