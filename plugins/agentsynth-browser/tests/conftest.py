"""Shared fixtures: real Chromium, found like the plugin finds it, and a process census.

Every Chromium this test session starts (in process or through the CLI) inherits
AGENTSYNTH_BROWSER_TEST_TAG, so the census counts exactly our processes, not other
people's browsers on the same machine.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from agentsynth_browser import launcher

TAG = f"agentsynth-browser-test-{uuid.uuid4().hex[:8]}"
os.environ["AGENTSYNTH_BROWSER_TEST_TAG"] = TAG
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

PACK = Path(__file__).resolve().parents[1] / "agentsynth_browser" / "packs" / "webshop"
CLI = str(Path(sys.executable).parent / "agentsynth")


def tagged_processes() -> list[tuple[int, str]]:
    """Live (non-zombie) processes started by this test session's browsers and drivers."""
    found = []
    needle = f"AGENTSYNTH_BROWSER_TEST_TAG={TAG}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fp:
                state = fp.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{entry}/environ", "rb") as fp:
                environ = fp.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fp:
                cmd = fp.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if state != b"Z" and needle in environ:
            found.append((int(entry), cmd))
    return found


def wait_for_no_processes(timeout: float = 10.0) -> list[tuple[int, str]]:
    deadline = time.monotonic() + timeout
    left = tagged_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = tagged_processes()
    return left


@pytest.fixture(scope="session", autouse=True)
def chromium() -> str | None:
    try:
        path = launcher.find_chromium()
    except launcher.BrowserUnavailable as exc:
        pytest.fail(str(exc))
    if path is None and not os.environ.get("CI"):
        pytest.skip("no Chromium on this machine (apt-get install chromium, or set PLAYWRIGHT_CHROMIUM_EXECUTABLE)")
    yield path
    launcher.shutdown()


@pytest.fixture
def pack_dir() -> Path:
    return PACK


class Census:
    tagged = staticmethod(tagged_processes)
    wait_gone = staticmethod(wait_for_no_processes)


@pytest.fixture
def procs() -> Census:
    return Census()


@pytest.fixture
def cli():
    """Run ``agentsynth ARGS`` in a subprocess; returns the CompletedProcess."""
    import subprocess

    def run(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "NO_COLOR": "1"})

    return run
