"""One LLM budget across workers: every worker reserves on the driver's ledger (and its journal)."""

from __future__ import annotations

import asyncio

from agentsynth_kernel import get_host
from agentsynth_kernel.engine import execute
from agentsynth_kernel.spec import Budget, ComponentSpec, RunSpec, resolve_pack
from agentsynth_kernel.store import RunStore
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
