"""The generation run: items (scenario x sample x mode) one after another, each made, verified stage by
stage, and written as soon as it is decided (so a stop or a kill keeps everything already done).

A failing LLM request or world fails that item (``incomplete``), not the run; a budget stop ends the run
cleanly with what was accepted so far. Items run in a fixed order with per-item seeds, so identical
inputs and seed give byte-identical output with a deterministic model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import attrs
import msgspec

from agentsynth_kernel import AgentsynthError, BudgetExceeded, SpecError, ToolSpec, located

from .backends import SimulatedTools, WorldTools
from .catalog import Scenario
from .llm import Caller
from .metrics import dataset_metrics
from .modes import MODES, RUNNERS
from .records import per_role, render_messages
from .verify import (
    STAGES,
    Rejection,
    check_content,
    check_execution,
    check_format,
    semantic_by_judge,
    semantic_by_llm,
    to_trajectory,
)

PLUGIN_VERSION = "0.1.0"
QUESTION_PROMPT = (
    "You write questions for a training set. Write one specific question a user could ask whose answer is in the passage "
    'below (do not quote it). Reply with only a JSON object: {"question": "..."}.'
)


@attrs.define
class GenerateConfig:
    """What to generate and how (the CLI options and the run spec's ``generate:`` parameters)."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    n: int = 1
    seed: int = 0
    modes: list[str] = attrs.field(factory=lambda: ["single_agent"])
    vary_modes: bool = False
    temperature: float | None = 0.7
    max_tokens: int | None = None
    max_turns: int = 6
    semantic: bool = True
    judge: dict[str, Any] | None = None  # {type: NAME, ...params}: a registered judge
    judge_threshold: float = 0.5
    per_role: bool = False
    python_env: dict[str, Any] = attrs.field(factory=dict)  # environment params of the code_execution world
    cache: bool | str = True
    budget_usd: float | None = None
    budget_tokens: int | None = None
    timeout: float = 120.0
    max_retries: int = 4
    concurrency: int = 1  # items in flight; output order and content do not depend on it
    dedup: bool = False  # reject a record that repeats an earlier accepted one (request, calls, answer)
    item_timeout: float = 900.0  # seconds for one item's making (world and model calls); then it fails


@attrs.define
class Item:
    index: int
    scenario: Scenario
    sample: int
    mode: str
    seed: int

    @property
    def id(self) -> str:
        return f"{self.scenario.id}-{self.sample}-{self.mode}"


def item_seed(seed: int, scenario_id: str, sample: int, mode: str) -> int:
    digest = hashlib.sha256(f"{seed}:{scenario_id}:{sample}:{mode}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def plan_items(scenarios: list[Scenario], config: GenerateConfig) -> list[Item]:
    """Every (scenario, sample, mode): each listed mode, or with ``vary_modes`` one mode per item,
    cycling through the list; a scenario's own ``mode`` wins."""
    items: list[Item] = []
    cycle = 0
    for scenario in scenarios:
        for k in range(config.n):
            if scenario.mode:
                modes = [scenario.mode]
            elif config.vary_modes:
                modes = [config.modes[cycle % len(config.modes)]]
                cycle += 1
            else:
                modes = list(config.modes)
            for mode in modes:
                items.append(Item(len(items), scenario, k, mode, item_seed(config.seed, scenario.id, k, mode)))
    return items


@attrs.define
class StageCount:
    entered: int = 0
    passed: int = 0
    rejected: dict[str, int] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"entered": self.entered, "passed": self.passed, "rejected": dict(sorted(self.rejected.items())),
                "pass_rate": round(self.passed / self.entered, 4) if self.entered else None}


@attrs.define
class Report:
    planned: int = 0
    accepted: int = 0
    rejected: int = 0
    incomplete: int = 0
    written: int = 0
    stopped: str = ""
    llm_requests: int = 0
    requests_by_purpose: dict[str, int] = attrs.field(factory=dict)
    stages: dict[str, StageCount] = attrs.field(factory=lambda: {s: StageCount() for s in STAGES})
    errors: list[str] = attrs.field(factory=list)
    records: list[dict[str, Any]] = attrs.field(factory=list, repr=False)  # accepted, for metrics (small dicts)
    output: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "planned": self.planned, "accepted": self.accepted, "rejected": self.rejected, "incomplete": self.incomplete,
            "records_written": self.written, "stopped": self.stopped or None,
            "stages": {k: v.to_dict() for k, v in self.stages.items()},
            "llm_requests": self.llm_requests,
            "llm_requests_per_accepted": round(self.llm_requests / self.accepted, 3) if self.accepted else None,
            "requests_by_purpose": dict(sorted(self.requests_by_purpose.items())),
            "metrics": dataset_metrics(self.records),
            "errors": self.errors[:20], "output": self.output,
        }


@attrs.define
class Inputs:
    """Resolved inputs: scenarios, and either a catalog (simulated tools) or a world (a pack)."""

    scenarios: list[Scenario]
    tools: list[ToolSpec] | None = None
    pack: Any = None  # a kernel Pack whose environment executes the calls
    domain_tools: dict[str, list[ToolSpec]] = attrs.field(factory=dict)  # taxonomy scenarios without --tools
    corpus: Any = None  # --docs: the documents world


_encoder = msgspec.json.Encoder(order="sorted")


class Generation:
    """One run of the generator (see the module docstring)."""

    def __init__(self, config: GenerateConfig, inputs: Inputs, *, host: Any = None, client: Any = None,
                 out: IO[bytes] | None = None, rejected_out: IO[bytes] | None = None,
                 on_progress: Callable[[str], None] | None = None, sink: Callable[[dict[str, Any]], None] | None = None) -> None:
        from agentsynth_kernel import get_host

        self.config, self.inputs = config, inputs
        self.host = host or get_host()
        self.own_client = client is None
        if client is None:
            from agentsynth_kernel import LLMClient

            client = LLMClient(model=config.model, api_base=config.api_base, api_key_env=config.api_key_env,
                               cache=config.cache, budget_usd=config.budget_usd, budget_tokens=config.budget_tokens,
                               timeout=config.timeout, max_retries=config.max_retries)
        self.client = client
        self.base = Caller(client, config.model, api_base=config.api_base, api_key_env=config.api_key_env,
                           temperature=config.temperature, max_tokens=config.max_tokens)
        self.out, self.rejected_out, self.on_progress, self.sink = out, rejected_out, on_progress, sink
        self.judge = None
        self.seen: set[str] = set()
        self.report = Report()
        self.problems = self._check()

    def _check(self) -> list[str]:
        problems = []
        for mode in self.config.modes:
            if mode not in MODES:
                problems.append(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
        uses_code = "code_execution" in self.config.modes or any(s.mode == "code_execution" for s in self.inputs.scenarios)
        if uses_code and "python" not in self.host.registry["environment"]:
            problems.append("mode code_execution: needs the Python sandbox world (environment 'python'): "
                            "pip install agentsynth-python")
        if self.inputs.pack is None and not self.inputs.tools and not self.inputs.domain_tools \
                and self.inputs.corpus is None and not (
                set(self.config.modes) == {"code_execution"}):
            problems.append("tools: no tools to generate with: give --tools FILE, --pack PACK or --sample (taxonomy)")
        if self.config.judge is not None:
            from agentsynth_kernel import ComponentSpec, build, check_component

            spec = ComponentSpec(self.config.judge["type"], {k: v for k, v in self.config.judge.items() if k != "type"})
            found = check_component("judge", spec, "judge", self.host)
            if found:
                problems += found
            else:
                self.judge = build("judge", spec, host=self.host)
        return problems

    # --- one item ---------------------------------------------------------------------------------

    def _backend(self, item: Item, llm: Caller) -> tuple[Any, Any]:
        """(tool backend, task for the world check or None)."""
        from agentsynth_kernel import ComponentSpec, Pack, Task

        scenario = item.scenario
        pack = self.inputs.pack
        if item.mode == "code_execution" and (pack is None or pack.environment is None
                                              or pack.environment.type != "python"):
            task = Task(id=scenario.id, instruction=scenario.query)
            pyp = located(Pack(id="generate-python", tasks=[task],
                                    environment=ComponentSpec("python", dict(self.config.python_env))),
                          base_dir=Path.cwd(), source="", content_hash="")
            return WorldTools(self.host, pyp, task), None
        if self.inputs.corpus is not None:
            from .documents import DocumentTools

            return DocumentTools(self.inputs.corpus), None
        if pack is not None:
            task = scenario.task if scenario.task is not None else Task(id=scenario.id, instruction=scenario.query)
            # a back-translated request is written after the calls: the task's checkers do not state it
            return WorldTools(self.host, pack, task), scenario.task if item.mode != "back" else None
        tools = self.inputs.tools or self.inputs.domain_tools.get(scenario.domain) or []
        return SimulatedTools(tools, llm), None

    async def run_item(self, item: Item) -> tuple[str, dict[str, Any], list[tuple[str, str | None]]]:
        """('accepted' | 'rejected' | 'incomplete', record, [(stage, rejection reason or None)])."""
        from agentsynth_kernel import LLMError

        llm = self.base.for_item(item.seed)
        rng = random.Random(item.seed)
        backend, task = self._backend(item, llm)
        record: dict[str, Any] = {"id": item.id, "mode": item.mode, "domain": item.scenario.domain,
                                  "grounding": backend.grounding, "seed": item.seed, "model": self.config.model,
                                  "source": item.scenario.source}
        try:
            try:
                draft = await asyncio.wait_for(self._make(item, llm, backend, rng), timeout=self.config.item_timeout)
            except TimeoutError:
                return "incomplete", {**record, "error": f"timed out after {self.config.item_timeout:g}s "
                                                        "(a hung world or model call)", "_requests": llm.by_purpose}, []
            finally:
                await backend.close()
            stages: dict[str, Any] = {}
            events: list[tuple[str, str | None]] = []
            trajectory = to_trajectory(draft, item.id, backend.specs, backend.initial)
            rejection = self._stage("format", check_format(draft), stages, events)
            if rejection is None:
                rejection = self._stage("execution", check_execution(draft), stages, events)
            if rejection is None:
                content = check_content(draft)
                found: Rejection | None
                info: dict[str, Any]
                if content is not None:
                    found, info = content, {}
                elif self.judge is not None:
                    found, info = await semantic_by_judge(self.judge, trajectory, self.config.judge_threshold)
                elif self.config.semantic:
                    found, info = await semantic_by_llm(draft, llm)
                else:
                    found, info = None, {"skipped": True}
                rejection = self._stage("semantic", found, stages, events, info)
            if rejection is None:
                rejection = await self._world(item, task, trajectory, stages, events)
        except BudgetExceeded:
            raise
        except LLMError as exc:
            return "incomplete", {**record, "error": f"LLM request failed: {exc}", "_requests": llm.by_purpose}, []
        except AgentsynthError as exc:
            return "incomplete", {**record, "error": f"{type(exc).__name__}: {exc}", "_requests": llm.by_purpose}, []
        except Exception as exc:  # noqa: BLE001 - a world or plugin that breaks fails this item only
            return "incomplete", {**record, "error": f"{type(exc).__name__}: {exc}", "_requests": llm.by_purpose}, []
        messages, agents = render_messages(draft, backend.initial)
        record.update({"query": draft.query, "messages": messages, "tools": [t.to_openai() for t in backend.specs],
                       "verification": stages, "llm_requests": llm.requests})
        if draft.mode == "multi_agent":
            record["agents"] = agents
        if draft.metadata:
            record["metadata"] = dict(draft.metadata)
        if item.scenario.metadata:
            record.setdefault("metadata", {}).update(item.scenario.metadata)
        record["provenance"] = {"generator": "agentsynth-generate", "version": PLUGIN_VERSION,
                                "kernel": _kernel_version(), "pack": getattr(self.inputs.pack, "id", None),
                                "pack_hash": getattr(self.inputs.pack, "content_hash", None) or None}
        record["_requests"] = llm.by_purpose
        if rejection is not None:
            record["rejected"] = rejection.to_dict()
            return "rejected", record, events
        return "accepted", record, events

    async def _make(self, item: Item, llm: Caller, backend: Any, rng: random.Random) -> Any:
        await backend.open(item.seed)
        query = item.scenario.query
        passage = item.scenario.metadata.get("passage")
        if not query and passage and item.mode != "back":
            query = await self._question(str(passage), llm)
            if not query:
                from .modes import Draft

                return Draft(item.mode, "", "", format_problems=["bad_question: the model wrote no question for the passage"])
        return await RUNNERS[item.mode](query, llm, backend, max_turns=self.config.max_turns, rng=rng)

    @staticmethod
    async def _question(passage: str, llm: Caller) -> str:
        """A question a user could ask that the passage answers (documents without queries)."""
        from .backends import extract_json
        from .llm import json_schema

        response = await llm([{"role": "system", "content": QUESTION_PROMPT}, {"role": "user", "content": passage[:3000]}],
                             purpose="question", response_format=json_schema("question", {"question": {"type": "string"}}))
        value = extract_json(response.content or "")
        question = value.get("question") if isinstance(value, dict) else None
        return question.strip() if isinstance(question, str) else ""

    @staticmethod
    def _stage(stage: str, rejection: Rejection | None, stages: dict[str, Any], events: list[tuple[str, str | None]],
               info: dict[str, Any] | None = None) -> Rejection | None:
        """Note a stage's outcome on the record; the report counts it when the record is written."""
        events.append((stage, None if rejection is None else rejection.reason))
        stages[stage] = (info if info else "pass") if rejection is None else {"rejected": rejection.reason, **(info or {})}
        return rejection

    async def _world(self, item: Item, task: Any, trajectory: Any, stages: dict[str, Any],
                     events: list[tuple[str, str | None]]) -> Rejection | None:
        """A pack's task: replay the calls in a fresh world and let the task's checkers decide."""
        if task is None or self.inputs.pack is None:
            if self.inputs.pack is None or item.mode == "code_execution":
                stages["world"] = "not_checked"
            elif item.mode == "back":
                stages["world"] = "not_checked (back-translation: its calls ran for real; the request was written after them)"
            else:
                stages["world"] = "no_checkers (a free query on the world: its calls ran for real, nothing checks the end state)"
            return None
        from agentsynth_kernel import replay_episode

        replay = await replay_episode(self.host, self.inputs.pack, task, item.seed, trajectory, timeout=self.config.timeout)
        info: dict[str, Any] = {"status": replay.status, "verdicts": [{"checker": v.checker, "passed": v.passed, "detail": v.detail[:300]}
                                                      for v in replay.verdicts]}
        if replay.drift:
            info["drift"] = replay.drift
        rejection = None
        if replay.status != "passed":
            why = replay.error or "; ".join(f"{v.checker}: {v.detail}" for v in replay.verdicts if not v.passed)
            rejection = Rejection("world", "checker_failed" if not replay.error else "replay_error", why[:500])
        return self._stage("world", rejection, stages, events, info)

    def _count_requests(self, by_purpose: dict[str, int]) -> None:
        self.report.llm_requests += sum(by_purpose.values())
        for purpose, n in by_purpose.items():
            self.report.requests_by_purpose[purpose] = self.report.requests_by_purpose.get(purpose, 0) + n

    # --- the run ----------------------------------------------------------------------------------

    def _write(self, fp: IO[bytes] | None, record: dict[str, Any]) -> None:
        if fp is None:
            return
        rows = per_role(record) if self.config.per_role else [record]
        for row in rows:
            fp.write(_encoder.encode(row) + b"\n")
            if fp is self.out:
                self.report.written += 1
        fp.flush()

    async def run(self) -> Report:
        """Items run ``concurrency`` at a time; records are written in item order whatever order they finish in."""
        if self.problems:
            raise SpecError("generate", self.problems)
        self.report = Report()
        items = plan_items(self.inputs.scenarios, self.config)
        self.report.planned = len(items)
        done: dict[int, tuple[str, dict[str, Any], list[tuple[str, str | None]]]] = {}
        position = 0
        stop = asyncio.Event()
        queue = iter(items)

        def flush(everything: bool = False) -> None:
            nonlocal position
            while position in done:
                self._record(items[position], *done.pop(position))
                position += 1
            if everything:
                for index in sorted(done):
                    self._record(items[index], *done.pop(index))

        async def worker() -> None:
            for item in queue:  # one iterator shared by the workers: each item is taken once
                if stop.is_set():
                    return
                try:
                    done[item.index] = await self.run_item(item)
                except BudgetExceeded as exc:
                    self.report.stopped = self.report.stopped or f"budget: {exc}"
                    stop.set()
                    return
                flush()

        try:
            await asyncio.gather(*(worker() for _ in range(max(1, self.config.concurrency))))
        finally:
            flush(everything=True)
            if self.own_client:
                await self.client.aclose()
        return self.report

    def _record(self, item: Item, outcome: str, record: dict[str, Any], stages: list[tuple[str, str | None]]) -> None:
        if self.config.dedup and outcome == "accepted":
            key = _fingerprint(record)
            if key in self.seen:
                outcome = "rejected"
                record["verification"]["dedup"] = {"rejected": "duplicate"}
                record["rejected"] = Rejection("dedup", "duplicate", "request, calls and answer repeat an earlier "
                                                                     "accepted record").to_dict()
                stages = [*stages, ("dedup", "duplicate")]
            else:
                self.seen.add(key)
                record["verification"]["dedup"] = "pass"
                stages = [*stages, ("dedup", None)]
        for stage, reason in stages:
            count = self.report.stages[stage]
            count.entered += 1
            if reason is None:
                count.passed += 1
            else:
                count.rejected[reason] = count.rejected.get(reason, 0) + 1
        self._count_requests(record.pop("_requests", {}))
        if outcome == "accepted":
            self.report.accepted += 1
            self.report.records.append(_summary(record))
            self._write(self.out, record)
            if self.sink is not None:
                self.sink(record)
        elif outcome == "rejected":
            self.report.rejected += 1
            self._write(self.rejected_out, record)
        else:
            self.report.incomplete += 1
            self.report.errors.append(f"{item.id}: {record['error']}")
        if self.on_progress is not None:
            self.on_progress(_progress_line(item, self.report.planned, outcome, record))


def _fingerprint(record: dict[str, Any]) -> str:
    calls = [(c["function"]["name"], c["function"]["arguments"]) for m in record["messages"] for c in m.get("tool_calls", ())]
    answer = next((m["content"] for m in reversed(record["messages"]) if m["role"] == "assistant" and not m.get("tool_calls")), "")
    material = json.dumps([" ".join(record["query"].lower().split()), calls, " ".join(str(answer).lower().split())])
    return hashlib.sha256(material.encode()).hexdigest()


def _summary(record: dict[str, Any]) -> dict[str, Any]:
    """What the metrics need of an accepted record (not its whole conversation)."""
    tools = [c["function"]["name"] for m in record["messages"] for c in m.get("tool_calls", ())]
    semantic = record["verification"].get("semantic")
    return {"query": record["query"], "mode": record["mode"], "domain": record["domain"], "tools": tools,
            "grounding": record["grounding"], "judge": semantic if isinstance(semantic, dict) else None}


def _progress_line(item: Item, total: int, outcome: str, record: dict[str, Any]) -> str:
    head = f"[{item.index + 1}/{total}] {item.id}"
    if outcome == "accepted":
        tail = "accepted"
    elif outcome == "rejected":
        tail = f"rejected at {record['rejected']['stage']} ({record['rejected']['reason']})"
    else:
        tail = f"failed: {record['error'][:200]}"
    return f"{head}: {tail}, {record.get('llm_requests', 0)} LLM requests"


def _kernel_version() -> str:
    import agentsynth_kernel

    return agentsynth_kernel.__version__


async def generate(config: GenerateConfig, inputs: Inputs, *, out: Path | None = None, rejected: Path | None = None,
                   host: Any = None, client: Any = None, on_progress: Callable[[str], None] | None = None) -> Report:
    """Run a generation and write accepted records to ``out`` (JSONL), rejected ones to ``rejected``."""
    files: list[IO[bytes]] = []
    try:
        out_fp = open(out, "wb") if out is not None else None  # noqa: SIM115 - closed below
        if out_fp is not None:
            files.append(out_fp)
        rej_fp = open(rejected, "wb") if rejected is not None else None  # noqa: SIM115
        if rej_fp is not None:
            files.append(rej_fp)
        generation = Generation(config, inputs, host=host, client=client, out=out_fp, rejected_out=rej_fp,
                                on_progress=on_progress)
        report = await generation.run()
        report.output = str(out) if out is not None else None
        return report
    finally:
        for fp in files:
            fp.close()
