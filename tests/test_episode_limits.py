"""What one episode may hold and do, whatever the agent or pack code does: observations are
capped, and a component's sys.exit(), raised KeyboardInterrupt or hang at import fails its
episode (or gate), never the run, never with exit 0."""

from __future__ import annotations

import json

import msgspec

from agentsynth_kernel import hookimpl
from agentsynth_kernel.episode import MAX_OBSERVATION_CHARS, MAX_OBSERVATION_DATA_BYTES, cap_observation
from agentsynth_kernel.records import Observation

BIG_VALUE = "x" * (MAX_OBSERVATION_CHARS * 3)

SPEC = """
environment: {type: kv}
policy: {type: oracle}
oracle: oracle.py
timeout: 5
tasks:
  - {id: big, instruction: "store a big value and read it", checkers: [{type: kv_equals, key: a, value: "1"}]}
  - {id: fine, instruction: "set a to 1", checkers: [{type: kv_equals, key: a, value: "1"}]}
"""


def test_cap_observation_cuts_text_and_data_with_a_visible_marker():
    obs = cap_observation(Observation(BIG_VALUE, data={"rows": [BIG_VALUE] * 5}))
    assert len(obs.content) < MAX_OBSERVATION_CHARS + 100
    assert obs.content.endswith(f"[... output truncated: {MAX_OBSERVATION_CHARS * 2:,} more characters not shown]")
    assert obs.data["truncated"] is True and obs.data["bytes"] > MAX_OBSERVATION_DATA_BYTES
    small = Observation("ok", data={"rows": [[1, 2]]})
    assert cap_observation(small) is small  # nothing to cut: the same object, no copy
    assert cap_observation(None).content == ""


def test_a_huge_tool_result_is_capped_in_the_stored_trajectory(cli, write, tmp_path):
    write("oracle.py", f"""
ORACLE = {{
    "big": [{{"tool": "set", "arguments": {{"key": "b", "value": "x" * {len(BIG_VALUE)}}}}},
            {{"tool": "get", "arguments": {{"key": "b"}}}}, {{"tool": "set", "arguments": {{"key": "a", "value": "1"}}}}],
    "fine": [{{"tool": "set", "arguments": {{"key": "a", "value": "1"}}}}],
}}
""")
    write("spec.yaml", SPEC)
    code, out, err = cli("run", "spec.yaml", "--run-dir", "d", "--json", "r.json", "-q")
    assert code == 0, out + err
    from agentsynth_kernel.store import RunStore

    store = RunStore(tmp_path / "d", create=False)
    [big] = [r for r in store.results() if r.task_id == "big"]
    store.close()
    got = big.trajectory.steps[1].observation
    assert len(got.content) < MAX_OBSERVATION_CHARS + 100 and "output truncated" in got.content
    assert got.data == {"truncated": True, "bytes": len(BIG_VALUE), "limit": MAX_OBSERVATION_DATA_BYTES}
    assert len(msgspec.json.encode(big.trajectory)) < 2 * (MAX_OBSERVATION_CHARS + MAX_OBSERVATION_DATA_BYTES) + len(BIG_VALUE)


def test_sys_exit_and_keyboard_interrupt_from_a_policy_fail_only_their_episode(cli, write, tmp_path):
    write("agent.py", """
import sys
from agentsynth_kernel import ToolCall

def act(state):
    if state.task.id == "exit":
        sys.exit(0)
    if state.task.id == "interrupt":
        raise KeyboardInterrupt
    return ToolCall("set", {"key": "a", "value": "1"})
""")
    write("spec.yaml", """
environment: {type: kv}
policy: {type: callable, function: agent.py:act}
max_steps: 1
tasks:
  - {id: exit, instruction: "x", checkers: [{type: kv_equals, key: a, value: "1"}]}
  - {id: interrupt, instruction: "x", checkers: [{type: kv_equals, key: a, value: "1"}]}
  - {id: works, instruction: "x", checkers: [{type: kv_equals, key: a, value: "1"}]}
""")
    code, out, err = cli("run", "spec.yaml", "--json", "r.json", "-q")
    report = json.loads((tmp_path / "r.json").read_text())
    by_task = {r["task_id"]: r for r in report["results"]}
    assert by_task["works"]["status"] == "passed"
    assert by_task["exit"]["status"] == "error" and "SystemExit" in by_task["exit"]["error"]
    assert by_task["interrupt"]["status"] == "error" and "KeyboardInterrupt" in by_task["interrupt"]["error"]
    assert by_task["exit"]["error_kind"] == "policy"


def test_an_oracle_that_exits_or_hangs_at_import_cannot_pass_validate(cli, write, tmp_path):
    pack = """
id: p
environment: {type: kv}
tasks:
  - {id: t, instruction: "set a to 1", checkers: [{type: kv_equals, key: a, value: "1"}]}
"""
    write("exits/pack.yaml", pack)
    write("exits/oracle.py", "import sys\nsys.exit(0)\n")
    code, out, _ = cli("pack", "validate", "exits", "--timeout", "2", "--random-trials", "1", "--json", "g.json")
    gates = {g["name"]: g for g in json.loads((tmp_path / "g.json").read_text())["gates"]}
    assert code == 1 and gates["oracle"]["status"] == "fail" and "SystemExit" in gates["oracle"]["problems"][0]
    write("hangs/pack.yaml", pack)
    write("hangs/oracle.py", "import time\ntime.sleep(3600)\n")
    code, out, _ = cli("pack", "validate", "hangs", "--timeout", "1", "--random-trials", "1", "--json", "h.json")
    gates = {g["name"]: g for g in json.loads((tmp_path / "h.json").read_text())["gates"]}
    assert code == 1 and "timeout" in gates["oracle"]["problems"][0]


def test_arguments_nested_past_any_depth_are_refused_not_a_crash(host):
    import asyncio

    from agentsynth_kernel.episode import EpisodeConfig, run_episode
    from agentsynth_kernel.spec import ComponentSpec, Pack, Task

    nested: dict = {}
    inner = nested
    for _ in range(20_000):
        inner["x"] = {}
        inner = inner["x"]
    task = Task("t", "set a", checkers=[ComponentSpec("kv_equals", {"key": "a", "value": "1"})])
    pack = Pack("p", [task], environment=ComponentSpec("kv"))
    script = [{"tool": "set", "arguments": {"key": "a", "value": nested}}, {"answer": "x"}]
    result = asyncio.run(run_episode(host, pack, task, 0, 0,
                                     EpisodeConfig(ComponentSpec("scripted", {"actions": script}), timeout=10)))
    step = result.trajectory.steps[0]
    assert result.status == "failed" and step.invalid and "the call was not run" in step.observation.content


class OrderedCheckers:
    """Two sync checkers: the first hands back a coroutine that writes to the world, the second
    must see that write (checks run in order, even when batched into one thread hop)."""

    @hookimpl
    def register_checkers(self, register):
        from agentsynth_kernel.records import Verdict

        class Probe:
            def check(self, env, trajectory):
                async def later():
                    env.data["probe"] = "seen"
                    return Verdict("probe", True, 1.0, "wrote probe")
                return later()

        class SeesProbe:
            def check(self, env, trajectory):
                ok = env.data.get("probe") == "seen"
                return Verdict("sees_probe", ok, float(ok), f"probe={env.data.get('probe')!r}")

        register("probe_then", Probe)
        register("sees_probe", SeesProbe)


def test_batched_sync_checkers_await_each_result_before_the_next_runs(host):
    import asyncio

    from agentsynth_kernel.episode import EpisodeConfig, run_episode
    from agentsynth_kernel.spec import ComponentSpec, Pack, Task

    host.add_plugin(OrderedCheckers(), "ordered-checkers")
    task = Task("t", "x", checkers=[ComponentSpec("probe_then"), ComponentSpec("sees_probe"),
                                    ComponentSpec("sees_probe")])
    pack = Pack("p", [task], environment=ComponentSpec("kv"))
    result = asyncio.run(run_episode(host, pack, task, 0, 0, EpisodeConfig(ComponentSpec("noop"), timeout=10)))
    assert [v.checker for v in result.verdicts] == ["probe", "sees_probe", "sees_probe"]
    assert result.status == "passed", [v.detail for v in result.verdicts]
