"""The Dockerfile cannot be built here (no Docker daemon): check what can be checked without one."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).parents[3]
DOCKERFILE = Path(__file__).parents[1] / "Dockerfile"


def test_every_copied_path_exists_in_the_repository():
    copies = re.findall(r"^COPY (.+) \S+$", DOCKERFILE.read_text(), re.MULTILINE)
    sources = [src for line in copies for src in line.split()]
    assert "plugins/agentsynth-hub" in sources and "agentsynth_kernel" in sources
    for src in sources:
        assert (ROOT / src).exists(), src


def test_the_command_is_one_the_hub_accepts():
    cmd = re.search(r"^CMD (\[.*\])$", DOCKERFILE.read_text(), re.MULTILINE).group(1)
    import json

    argv = json.loads(cmd)
    assert argv[:3] == ["agentsynth", "hub", "serve"]
    from agentsynth_hub.cli import hub

    # every option of the container's command exists (parsed by the real command, stopped at --help)
    result = CliRunner().invoke(hub, [*argv[2:], "--help"])
    assert result.exit_code == 0, result.output
    for option in (a for a in argv if a.startswith("--")):
        assert option in result.output
    assert "/api/packs" in DOCKERFILE.read_text()  # the health check's route exists on the server
