"""A budget holds across kill -9: every LLM request's worst case is journaled in the run store
before it leaves, so requests that were in flight when the run was killed (and may have been
billed) still count on resume, and the whole run never spends more than its cap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentsynth_kernel.store import RunStore
from agentsynth_kernel.testing import ScriptedLLMServer, hang, reply

TASKS = 6
CAP = 6_000  # tokens for the whole run: a few requests, not every task
MAX_TOKENS = 100  # per request: the worst case the ledger reserves next to the prompt


def _spec(tmp_path: Path, base_url: str) -> Path:
    tasks = "\n".join(f"  - {{id: t{i}, instruction: 'set t{i}', checkers: [{{type: kv_equals, key: t{i}, value: v}}]}}"
                      for i in range(TASKS))
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""environment: {{type: kv}}
policy: {{type: llm, model: openai/scripted-model, api_base: "{base_url}", max_tokens: {MAX_TOKENS},
         cache: false, max_turns: 1}}
budget: {{tokens: {CAP}}}
concurrency: 3
tasks:
{tasks}
""")
    return spec


def _run(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AGENTSYNTH_LLM_CACHE": "off"}
    return subprocess.Popen([sys.executable, "-m", "agentsynth_kernel", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a live process has used so far; None where /proc is not there."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait(proc: subprocess.Popen[bytes], done, *, cpu: float = 60.0, wall: float = 600.0) -> None:
    """Until ``done()`` or the process exits. A loaded machine stretches the child's start-up
    (Python, the plugins, aiohttp: ~2 s of CPU) over more than the 30 s of wall time this test
    once allowed, so the bound is the CPU time the child spent (its work, ~30x what it needs);
    the wall clock is only a backstop for a child stuck idle."""
    deadline = time.monotonic() + wall
    while not done() and proc.poll() is None:
        spent = _cpu_seconds(proc.pid)
        assert spent is None or spent < cpu, f"{spent:.1f} s of CPU and still not there"
        assert time.monotonic() < deadline, f"nothing after {wall:g} s"
        time.sleep(0.02)


def _finish(proc: subprocess.Popen[bytes], **bounds: float) -> tuple[bytes, bytes]:
    """The output of a process run to its end, under the same bounds as :func:`_wait`."""
    chunks: list[tuple[bytes, bytes]] = []

    def ended() -> bool:
        try:
            chunks.append(proc.communicate(timeout=0.5))  # reads both pipes meanwhile (no full-pipe stall)
        except subprocess.TimeoutExpired:
            return False
        return True

    _wait(proc, ended, **bounds)
    if not chunks:
        chunks.append(proc.communicate())
    return chunks[-1]


def test_requests_in_flight_at_kill_9_still_count_against_the_budget(tmp_path):
    server = ScriptedLLMServer(handler=lambda body: hang(3600)).start()
    try:
        spec = _spec(tmp_path, server.base_url)
        proc = _run(tmp_path, "run", str(spec), "--run-dir", "d", "-q")
        try:
            _wait(proc, lambda: server.count >= 3)
            assert server.count == 3, proc.stderr.read().decode() if proc.poll() is not None else "no requests"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            proc.kill()
        store = RunStore(tmp_path / "d", create=False)
        tokens, _, unsettled = store.spend_total()
        store.close()
        assert unsettled == 3 and tokens >= 3 * MAX_TOKENS  # the three in flight, at their worst case
        server.handler = lambda body: reply("done", usage=(50, 10))
        proc = _run(tmp_path, "resume", "d", "-q")
        out, err = _finish(proc)
        store = RunStore(tmp_path / "d", create=False)
        total, _, still_unsettled = store.spend_total()
        store.close()
        assert still_unsettled == 3  # never answered: they stay counted at their worst case
        assert total <= CAP, (total, out.decode(), err.decode())
        answered = server.count - 3
        assert answered >= 1  # the resumed session did run requests, within what was left
        assert tokens + answered * 60 <= CAP
    finally:
        server.stop()
