"""metaopt: not built yet."""

from __future__ import annotations

from pathlib import Path

from agentsynth_kernel import AgentsynthError


def run_metaopt_command(spec_file: Path, run_dir: Path | None, json_path: str | None, quiet: bool) -> int:
    raise AgentsynthError("metaopt is not implemented yet")
