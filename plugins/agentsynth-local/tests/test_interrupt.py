"""Ctrl-C with a slow model server: ``agentsynth bench`` in a real subprocess gets a real SIGINT.

- mid-episode on the embedded model: the run stops at once, is stored as interrupted, and the
  embedded server is stopped (not left decoding answers nobody will read);
- against a server the user runs (it outlives agentsynth): the requests agentsynth abandoned are
  dropped, waiting or mid-decoding, so the server is idle right after the interrupt;
- a fast run (no model) stops promptly on Ctrl-C, and a run that completed is not marked interrupted.

Needs the sql plugin (the ``core`` pack): ``[tool.agentsynth] test-with``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import needs_runtime

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


class Agentsynth:
    """``agentsynth ARGS`` as a subprocess whose stderr is collected by a thread (never blocks)."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "agentsynth_kernel", *args], cwd=cwd,
                                     env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                                          "AGENTSYNTH_LLM_CACHE": "off", **(env or {})},
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail(f"no {pattern!r} on agentsynth's stderr: {''.join(self.lines)[-2000:]}")

    def interrupt(self, timeout: float = 60) -> float:
        """SIGINT, then the seconds until the process exited."""
        began = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout)
        self.reader.join(10)
        return time.monotonic() - began

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def stderr(self) -> str:
        return "".join(self.lines)


def health(api_base: str) -> dict:
    with urllib.request.urlopen(api_base.removesuffix("/v1") + "/health", timeout=30) as response:
        return json.loads(response.read())


def wait_health(api_base: str, ok, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = health(api_base)
        if ok(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.05)


def gone(pid: int) -> bool:
    """Exited (a zombie counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def server_children(parent: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == parent and b"agentsynth_local.server" in cmdline:
            pids.append(int(entry.name))
    return pids


def last_run_event(run_dir: Path) -> dict:
    with sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT data FROM events WHERE kind = 'run_finished' ORDER BY id DESC LIMIT 1").fetchone()
    assert row, f"no run_finished event in {run_dir}"
    return json.loads(row[0])


def stored(run_dir: Path) -> int:
    try:
        with sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM episodes").fetchone()[0]
    except sqlite3.Error:
        return 0


@needs_runtime
def test_ctrl_c_mid_episode_stops_the_run_and_the_embedded_server(tmp_path):
    run = Agentsynth("bench", "--pack", "core", "--policy", "llm,model=local", "--run-dir", "run", "-q",
                     cwd=tmp_path)
    try:
        api_base = run.wait_for(r"ready in .* at (http://127\.0\.0\.1:\d+/v1)", 600).group(1)
        [server] = server_children(run.proc.pid)
        busy = wait_health(api_base, lambda h: h["busy"] == 1, 300)
        assert busy["busy"] == 1, busy  # an answer is being decoded right now
        seconds = run.interrupt()
    finally:
        run.kill()
    assert run.proc.returncode == 130, run.stderr[-2000:]
    assert "interrupted" in run.stderr
    deadline = time.monotonic() + 30
    while not gone(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(server), "the embedded server outlived the interrupted run"
    assert last_run_event(tmp_path / "run")["interrupted"] is True
    print(f"\nSIGINT mid-episode: agentsynth exited in {seconds:.2f} s, the embedded server with it")
    assert seconds < 30  # it normally takes well under a second


@pytest.fixture
def own_server(tmp_path):
    """A server the user runs themselves (it outlives agentsynth runs)."""
    from agentsynth_local.models import find_gguf

    proc = subprocess.Popen([sys.executable, "-m", "agentsynth_local.server", "--model", str(find_gguf("smollm2")),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == "READY", ready
        yield f"http://127.0.0.1:{ready[1]}/v1"
    finally:
        proc.terminate()
        proc.wait(30)


@needs_runtime
def test_ctrl_c_leaves_a_server_the_user_runs_idle(tmp_path, own_server):
    run = Agentsynth("bench", "--pack", "core", "--policy", "llm,model=local,max_tokens=1024", "--concurrency", "4",
                     "--run-dir", "run", "-q", cwd=tmp_path, env={"AGENTSYNTH_LOCAL_API_BASE": own_server})
    try:
        queued = wait_health(own_server, lambda h: h["busy"] == 1 and h["waiting"] >= 1, 300)
        assert queued["busy"] == 1 and queued["waiting"] >= 1, queued  # one decoding, others queued
        seconds = run.interrupt()
    finally:
        run.kill()
    assert run.proc.returncode == 130, run.stderr[-2000:]
    began = time.monotonic()
    idle = wait_health(own_server, lambda h: h["busy"] == 0 and h["waiting"] == 0, 60)
    idle_after = time.monotonic() - began
    assert idle["busy"] == 0 and idle["waiting"] == 0, idle
    in_flight = queued["busy"] + queued["waiting"]
    dropped = idle["abandoned_waiting"] + idle["abandoned_generating"]
    # what was in flight at the signal was dropped, not answered (one may have finished in between)
    assert dropped >= in_flight - 1 and idle["served"] - queued["served"] <= 1, (queued, idle)
    print(f"\nSIGINT with {in_flight} requests at the user's server: agentsynth exited in {seconds:.2f} s, "
          f"the server idle {idle_after:.2f} s later ({dropped} dropped)")


def test_ctrl_c_stops_a_fast_run_promptly_and_a_finished_run_is_complete(tmp_path):
    """No model: the oracle on core (the local plugin's run hooks are installed and must not delay it)."""
    run = Agentsynth("bench", "--pack", "core", "--policy", "oracle", "--trials", "300", "--run-dir", "run", "-q",
                     cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while stored(tmp_path / "run") < 50 and time.monotonic() < deadline and run.proc.poll() is None:
            time.sleep(0.02)
        seconds = run.interrupt()
    finally:
        run.kill()
    assert run.proc.returncode == 130, run.stderr[-2000:]
    assert 50 <= stored(tmp_path / "run") < 22 * 300 and seconds < 30
    assert last_run_event(tmp_path / "run")["interrupted"] is True
    done = subprocess.run([sys.executable, "-m", "agentsynth_kernel", "bench", "--pack", "core", "--policy", "oracle",
                           "--run-dir", "done", "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr
    assert last_run_event(tmp_path / "done")["interrupted"] is False
    status = subprocess.run([sys.executable, "-m", "agentsynth_kernel", "status", "done"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert "interrupted" not in status.stdout + status.stderr, status.stdout
    print(f"\nSIGINT during a fast run: stopped in {seconds:.2f} s")
