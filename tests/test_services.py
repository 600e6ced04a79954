"""Run-scoped services (e.g. the LLM client) are shared by a run's episodes, closed when the run
ends, and their stats land in the run store."""

from __future__ import annotations

from agentsynth_kernel import Answer, ToolCall, hookimpl
from agentsynth_kernel.engine import run
from agentsynth_kernel.spec import load_run_spec
from agentsynth_kernel.store import RunStore


class Stats:
    def __init__(self):
        self.calls = 0

    def to_dict(self):
        return {"calls": self.calls}


class Service:
    instances: list[Service] = []

    def __init__(self):
        self.stats = Stats()
        self.closed = False
        Service.instances.append(self)

    async def aclose(self):
        self.closed = True


class UsesService:
    def __init__(self, run):
        if "counter" not in run.services:
            run.services["counter"] = Service()
        self.service = run.services["counter"]

    async def act(self, state):
        self.service.stats.calls += 1
        if not state.trajectory.steps:
            return ToolCall("set", {"key": "x", "value": "1"})
        return Answer("ok")


def test_services_are_shared_closed_and_recorded(write, host, tmp_path):
    class Reg:
        @hookimpl
        def register_policies(self, register):
            register("uses_service", UsesService)

    host.add_plugin(Reg(), "svc")
    Service.instances.clear()
    spec_path = write("spec.yaml", """
environment: {type: kv}
tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: x, value: "1"}]}]
policy: uses_service
trials: 3
""")
    spec, pack = load_run_spec(spec_path, host=host)
    report = run(spec, pack, host=host, run_dir=tmp_path / "run")
    assert all(r.passed for r in report.results)
    (service,) = Service.instances  # one per run, shared by its three episodes
    assert service.closed and service.stats.calls == 6
    store = RunStore(tmp_path / "run")
    try:
        events = [data for _, kind, data in store.events() if kind == "service_stats"]
    finally:
        store.close()
    assert events == [{"service": "counter", "stats": {"calls": 6}}]
    assert report.info.services == {}
