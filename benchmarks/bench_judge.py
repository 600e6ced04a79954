"""agentsynth-judge benchmarks: what judging costs, as ratios against baselines of the same run.

- heuristic scoring: one 40-step trajectory scored N times vs encoding it to JSON N times
  (msgspec) - "how many JSON encodes is one heuristic judgement";
- engine overhead: N episodes of a tiny world through the engine with `judge: heuristic`
  vs the same run without a judge;
- llm judge overhead: N judgements against the scripted OpenAI-compatible server vs N raw
  `LLMClient.complete` calls with the same reply (prompt rendering + schema validation).

Writes $AGENTSYNTH_BENCH_OUT/judge.json (default benchmarks/results/).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from agentsynth_judge import DEFAULT_RUBRIC, HeuristicJudge, LLMJudge
from agentsynth_kernel import (
    Answer,
    Observation,
    Step,
    ToolCall,
    ToolSpec,
    Trajectory,
    Verdict,
    get_host,
    hookimpl,
)
from agentsynth_kernel.engine import execute
from agentsynth_kernel.records import to_json
from agentsynth_kernel.spec import ComponentSpec, Pack, RunSpec, Task

OUT = Path(os.environ.get("AGENTSYNTH_BENCH_OUT", Path(__file__).parent / "results"))
_STR = {"type": "string"}
TOOLS = [ToolSpec("set", "Set a key", {"type": "object", "properties": {"key": _STR, "value": _STR},
                                        "required": ["key", "value"]}),
         ToolSpec("get", "Read a key", {"type": "object", "properties": {"key": _STR}, "required": ["key"]})]


def trajectory(steps: int = 40) -> Trajectory:
    out = []
    for i in range(steps):
        if i % 2:
            out.append(Step(ToolCall("get", {"key": f"k{i % 7}"}), Observation(f"value {i} " * 10), i))
        else:
            out.append(Step(ToolCall("set", {"key": f"k{i % 7}", "value": str(i)}), Observation("ok"), i))
    out.append(Step(Answer("All 20 keys are set; k3 holds 17 and the last value is 39."), None, steps))
    return Trajectory("bench", "Set the keys.", steps=out, tools=TOOLS, initial_observation="keys: []")


def best_of(fn: Any, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return min(samples)


def heuristic_scoring(n: int = 2000) -> dict[str, Any]:
    traj, verdicts, judge = trajectory(), [Verdict("kv", True, 1.0)], HeuristicJudge()

    def judge_all() -> None:
        for _ in range(n):
            judge.score(traj, verdicts)

    def encode_all() -> None:
        for _ in range(n):
            to_json(traj)

    judged, encoded = best_of(judge_all), best_of(encode_all)
    return {"trajectory_steps": len(traj.steps), "judgements": n, "judge_us_per_trajectory": round(judged / n * 1e6, 1),
            "json_encode_us_per_trajectory": round(encoded / n * 1e6, 1), "ratio_vs_json_encode": round(judged / encoded, 1)}


class KVWorld:
    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def reset(self, seed: int) -> Observation:
        return Observation("keys: []")

    def tools(self) -> list[ToolSpec]:
        return TOOLS

    def step(self, call: ToolCall) -> Observation:
        if call.name == "set":
            self.data[call.arguments["key"]] = call.arguments["value"]
            return Observation("ok")
        return Observation(self.data.get(call.arguments["key"], ""))


class Script:
    def __init__(self) -> None:
        self.actions = [ToolCall("set", {"key": "a", "value": "1"}), ToolCall("get", {"key": "a"}), Answer("a is 1")]

    def act(self, state: Any) -> Any:
        return self.actions.pop(0)


class IsSet:
    def check(self, env: KVWorld, trajectory: Trajectory) -> Verdict:
        ok = env.data.get("a") == "1"
        return Verdict("is_set", ok, float(ok))


class BenchPlugin:
    @hookimpl
    def register_environments(self, register: Any) -> None:
        register("bench-kv", KVWorld)

    @hookimpl
    def register_policies(self, register: Any) -> None:
        register("bench-script", Script)

    @hookimpl
    def register_checkers(self, register: Any) -> None:
        register("bench-is-set", IsSet)


def engine_overhead(n: int = 300) -> dict[str, Any]:
    tasks = [Task(f"t{i}", "Set a to 1.", [ComponentSpec("bench-is-set")]) for i in range(n)]
    pack = Pack("bench", tasks, environment=ComponentSpec("bench-kv"))

    def run(judge: ComponentSpec | None) -> float:
        spec = RunSpec(policy=ComponentSpec("bench-script"), tasks=tasks, concurrency=8, judge=judge)
        started = time.perf_counter()
        report = asyncio.run(execute(spec, pack))
        assert all(r.status == "passed" for r in report.results), {r.error for r in report.results}
        if judge is not None:
            assert all("judge.reward" in r.scores for r in report.results)
        return time.perf_counter() - started

    run(None)  # warm up
    plain, judged = [], []
    for _ in range(5):  # interleaved, best of 5: the machine is shared
        plain.append(run(None))
        judged.append(run(ComponentSpec("heuristic")))
    without, with_judge = min(plain), min(judged)
    return {"episodes": n, "without_judge_s": round(without, 4), "with_heuristic_judge_s": round(with_judge, 4),
            "judge_ms_per_episode": round((with_judge - without) / n * 1000, 3),
            "ratio_with_vs_without": round(with_judge / without, 3)}


def llm_overhead(n: int = 200, concurrency: int = 16) -> dict[str, Any]:
    from agentsynth_kernel.llm import LLMClient
    from agentsynth_kernel.testing import ScriptedLLMServer, reply

    answer = json.dumps({"dimensions": {d: {"score": 8, "rationale": "fine"} for d in DEFAULT_RUBRIC.names},
                         "rationale": "good"})
    traj, verdicts = trajectory(), [Verdict("kv", True, 1.0)]
    with ScriptedLLMServer(handler=lambda body: reply(answer)) as server:
        client = LLMClient(api_base=server.base_url, cache=False, concurrency=concurrency)
        judge = LLMJudge("openai/bench", api_base=server.base_url, cache=False, client=client)
        messages = [{"role": "user", "content": "x" * 3000}]

        async def raw() -> float:
            started = time.perf_counter()
            await asyncio.gather(*(client.complete(messages, model="openai/bench", cache=False) for _ in range(n)))
            return time.perf_counter() - started

        async def judged() -> float:
            started = time.perf_counter()
            results = await asyncio.gather(*(judge.score(traj, verdicts) for _ in range(n)))
            assert all(r.score == 0.8 for r in results)
            return time.perf_counter() - started

        async def main() -> tuple[float, float]:
            await raw()
            r = min([await raw() for _ in range(3)])
            j = min([await judged() for _ in range(3)])
            await client.aclose()
            return r, j

        raw_s, judge_s = asyncio.run(main())
    return {"requests": n, "concurrency": concurrency, "raw_client_s": round(raw_s, 4), "llm_judge_s": round(judge_s, 4),
            "judge_overhead_ms_per_call": round((judge_s - raw_s) / n * 1000, 3),
            "ratio_judge_vs_raw_client": round(judge_s / raw_s, 3)}


def main() -> None:
    load_before = os.getloadavg()  # the machine is shared: its load goes next to the numbers
    host = get_host()
    host.add_plugin(BenchPlugin(), "bench-judge")
    try:
        results = {"heuristic_scoring": heuristic_scoring(), "engine_overhead": engine_overhead(),
                   "llm_judge_overhead": llm_overhead()}
    finally:
        host.remove_plugin("bench-judge")
    results["machine"] = {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in load_before],
                          "load_after": [round(x, 2) for x in os.getloadavg()]}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "judge.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
