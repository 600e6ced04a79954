"""Real components: run directories written by `agentsynth bench`, a real hub server process on
127.0.0.1 (uvicorn), its real SQLite database, uploads over HTTP with httpx."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

CLI = [sys.executable, "-m", "agentsynth_kernel"]


def agentsynth(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


class Hub:
    """`agentsynth hub serve` as its own process."""

    def __init__(self, root: Path, *extra: str, db: str | None = None) -> None:
        self.root = root
        self.db = db or str(root / "hub.sqlite")
        from agentsynth_hub.db import HubDB

        store = HubDB(self.db)
        self.tokens = {name: store.create_token(name) for name in ("alice", "bob", "mallory", "flood", "revoked")}
        store.revoke_token("revoked")
        store.close()
        self.proc = subprocess.Popen([*CLI, "hub", "serve", "--db", self.db, "--port", "0", "--pack", "core",
                                      "--cache", str(root / "cache"), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        deadline = time.time() + 60
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("listening ") or not line:
                break
        assert line.startswith("listening "), (line, self.proc.stderr.read() if self.proc.stderr else "")
        self.url = line.split()[1]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def hub_class():
    """Start more hubs (another database, other limits): ``hub_class(root, *serve_args, db=URL)``."""
    return Hub


@pytest.fixture(scope="session")
def cli():
    """Run the real `agentsynth` command line in a subprocess."""
    return agentsynth


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run directories of the core pack: the oracle (1 and 2 trials), the noop floor, runs to tamper with, a one-task run."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for name, args in (("oracle", ["--policy", "oracle"]), ("oracle2", ["--policy", "oracle", "--trials", "2"]),
                       ("noop", ["--policy", "noop"]),
                       # runs kept for tampering (never submitted honestly, so no duplicate refusal)
                       ("oracle_t", ["--policy", "oracle"]), ("noop_t", ["--policy", "noop"]),
                       ("only", ["--policy", "oracle", "--only", "update-email"])):
        run = agentsynth("bench", "--pack", "core", *args, "--run-dir", str(root / name), "-q")
        assert run.returncode == 0, (name, run.stdout[-1500:], run.stderr[-1500:])
        out[name] = root / name
    return out


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    server = Hub(tmp_path_factory.mktemp("hub"), "--rate-limit", "25", "--max-upload-mb", "1",
                 "--max-payload-mb", "8", "--sample", "32")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def accepted(hub, runs, cli):
    """The honest submissions, through the real `agentsynth hub submit` command."""
    out = {}
    for name, label in (("oracle", "oracle A"), ("noop", ""), ("oracle2", "oracle B")):
        run = cli("hub", "submit", str(runs[name]), "--url", hub.url, "--label", label, "--json",
                         env={"AGENTSYNTH_HUB_TOKEN": hub.tokens["alice"]})
        assert run.returncode == 0, (name, run.stdout[-2000:], run.stderr[-2000:])
        out[name] = json.loads(run.stdout)
    return out
