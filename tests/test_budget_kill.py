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


def test_requests_in_flight_at_kill_9_still_count_against_the_budget(tmp_path):
    server = ScriptedLLMServer(handler=lambda body: hang(3600)).start()
    try:
        spec = _spec(tmp_path, server.base_url)
        proc = _run(tmp_path, "run", str(spec), "--run-dir", "d", "-q")
        try:
            deadline = time.monotonic() + 30
            while server.count < 3 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.02)
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
        out, err = proc.communicate(timeout=120)
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
