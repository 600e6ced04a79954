"""One LLM budget across workers: every worker reserves on the driver's ledger (and its journal)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentsynth_kernel import Budget, ComponentSpec, RunSpec, RunStore, execute, get_host, resolve_pack
from agentsynth_kernel.testing import ScriptedLLMServer, reply

PRICES = (1e-6, 4e-6)  # USD per prompt / completion token
# what the server bills each request: close to the worst case the ledger reserves (a core prompt is
# ~3,000 bytes, reserved as 3,000 tokens, + max_tokens), so the cap binds after a handful of requests
USAGE = (2900, 100)
COST = USAGE[0] * PRICES[0] + USAGE[1] * PRICES[1]  # 0.0033
CAP = 0.02  # about six requests, far fewer than the run's 44 episodes


def test_a_usd_budget_holds_across_two_workers(ray_cluster, tmp_path):
    server = ScriptedLLMServer(handler=lambda body: reply("done", usage=USAGE), latency=0.05).start()
    try:
        policy = ComponentSpec("llm", {"model": "openai/scripted-model", "api_base": server.base_url,
                                       "max_tokens": 100, "cache": False, "max_turns": 1,
                                       "prices": {"openai/scripted-model": list(PRICES)}})
        spec = RunSpec(policy=policy, pack="core", trials=2, seed=1, budget=Budget(usd=CAP),
                       executor=ComponentSpec("ray", {"workers": 2, "per_worker": 2}))
        pack = resolve_pack(spec, base_dir=tmp_path, source="test", host=get_host())
        report = asyncio.run(execute(spec, pack, run_dir=tmp_path / "run"))
        billed = server.count * COST
        assert report.stopped.startswith("budget"), report.stopped
        assert 2 <= server.count < 2 * len(pack.tasks)  # it ran some requests, then stopped
        assert billed <= CAP + 1e-12, (server.count, billed)
        # more than half the cap went on requests: two workers each with a budget of its own would
        # together have spent more than the cap, so this run did draw on one ledger
        assert billed > CAP / 2
        store = RunStore(tmp_path / "run", create=False)
        try:
            tokens, pico, unsettled = store.spend_total()  # the driver's journal saw every request
        finally:
            store.close()
        assert unsettled == 0 and 0 < tokens <= server.count * sum(USAGE)
        assert pico <= round(CAP * 10**12)
        spent = sum((r.usage.cost_usd or 0.0) for r in report.results)
        assert spent <= CAP + 1e-12
    finally:
        server.stop()


def _busy_worker_pids() -> list[int]:
    """PIDs of this cluster's worker actors playing an episode now (Ray titles them so)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            title = (proc / "cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if title.startswith("ray::EpisodeWorker.run_episode"):
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow
def test_a_worker_killed_with_requests_in_flight_is_charged_their_worst_case(ray_cluster, tmp_path):
    import os
    import signal
    import sqlite3
    import threading
    import time

    from agentsynth_kernel import STORE_FILE

    slow = threading.Event()
    slow.set()
    server = ScriptedLLMServer(handler=lambda body: reply("done", usage=USAGE, delay=4.0 if slow.is_set() else 0.0))
    server.start()
    try:
        policy = ComponentSpec("llm", {"model": "openai/scripted-model", "api_base": server.base_url,
                                       "max_tokens": 100, "cache": False, "max_turns": 1, "max_retries": 0,
                                       "prices": {"openai/scripted-model": list(PRICES)}})
        spec = RunSpec(policy=policy, pack="core", trials=1, seed=1, budget=Budget(usd=1.0),
                       only=["lookup-customer-email", "count-pending-orders", "lowest-stock-east", "order-total"],
                       executor=ComponentSpec("ray", {"workers": 2, "per_worker": 2, "retries": 1}))
        pack = resolve_pack(spec, base_dir=tmp_path, source="test", host=get_host())
        done: list = []
        runner = threading.Thread(target=lambda: done.append(asyncio.run(execute(spec, pack, run_dir=tmp_path / "r"))))
        runner.start()
        deadline = time.monotonic() + 120
        while server.count < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.count == 4  # two requests in flight on each worker
        busy = _busy_worker_pids()
        assert busy, "no busy worker actor found"
        slow.clear()  # from now on the server answers at once (the retried episodes)
        os.kill(busy[0], signal.SIGKILL)
        runner.join(timeout=120)
        assert done, "the run did not finish"
        report = done[0]
        assert len(report.results) == 4 and not any(r.error_kind == "environment" for r in report.results)
        db = sqlite3.connect(tmp_path / "r" / STORE_FILE)
        rows = [t for (t,) in db.execute("SELECT tokens FROM spend WHERE settled = 1")]
        unsettled = db.execute("SELECT count(*) FROM spend WHERE settled = 0").fetchone()[0]
        db.close()
        actual = sum(USAGE)
        assert unsettled == 0 and len(rows) == 6, rows  # 4 first requests + 2 replays of the lost episodes
        worst = [t for t in rows if t != actual]
        assert len(worst) == 2 and all(t > actual for t in worst), rows  # the dead worker's two, at worst case
    finally:
        server.stop()


@pytest.mark.slow
def test_requests_in_flight_on_workers_at_a_driver_kill_9_still_count_on_resume(cli_env, tmp_path):
    """The kernel's kill -9 budget guarantee, with the requests sent from Ray workers: each was in
    the driver's journal before it left."""
    import signal
    import subprocess
    import sys
    import time

    from agentsynth_kernel.testing import hang

    cap, max_tokens = 20_000, 100
    server = ScriptedLLMServer(handler=lambda body: hang(3600)).start()
    try:
        spec = tmp_path / "spec.yaml"
        spec.write_text(f"""pack: core
only: [lookup-customer-email, count-pending-orders, lowest-stock-east, order-total, update-email, set-price]
policy: {{type: llm, model: openai/scripted-model, api_base: "{server.base_url}", max_tokens: {max_tokens},
         cache: false, max_turns: 1}}
budget: {{tokens: {cap}}}
executor: {{type: ray, workers: 2, per_worker: 2}}
""")
        command = [sys.executable, "-m", "agentsynth_kernel"]
        proc = subprocess.Popen([*command, "run", str(spec), "--run-dir", "d", "-q"], cwd=tmp_path, env=cli_env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while server.count < 4 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert server.count == 4, proc.communicate()[1][-2000:] if proc.poll() is not None else "no requests"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            proc.kill()
        store = RunStore(tmp_path / "d", create=False)
        tokens, _, unsettled = store.spend_total()
        store.close()
        assert unsettled == 4 and tokens >= 4 * max_tokens  # the four in flight on two workers, at worst case
        server.handler = lambda body: reply("done", usage=(50, 10))
        resumed = subprocess.run([*command, "resume", "d", "-q"], cwd=tmp_path, env=cli_env, capture_output=True,
                                 text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        store = RunStore(tmp_path / "d", create=False)
        total, _, still = store.spend_total()
        episodes = len(store.keys())
        store.close()
        assert still == 4 and total <= cap  # never answered: they stay counted
        assert episodes == 6 and server.count - 4 >= 1
    finally:
        server.stop()


def test_a_worker_llm_client_charges_the_run_ledger():
    """``client_for`` on a worker hands out a client whose ledger is the RemoteLedger (the kernel's
    ``llm.ledger`` service), and a worker never charges earlier sessions' spend itself."""
    from agentsynth_kernel import RunInfo, client_for
    from agentsynth_ray.worker import LEDGER_SERVICE, RemoteLedger

    spec = RunSpec(policy=ComponentSpec("noop"), pack="core", budget=Budget(tokens=1000))
    ledger = RemoteLedger(broker=None, worker="w1", usd=None, tokens=1000)
    run = RunInfo("r", spec, None, None, total=1)  # type: ignore[arg-type]
    run.services[LEDGER_SERVICE] = ledger
    assert client_for(run).ledger is ledger
    ledger.charge(500)  # earlier sessions are charged on the driver's ledger, never per worker
    assert ledger.spent_tokens == 0
