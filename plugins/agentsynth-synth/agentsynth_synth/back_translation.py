"""``back_translation``: execute a tool-call chain first, then write the request it fulfils.

Per item:

1. an *explorer* policy (by default the ``llm`` policy with this generator's model and an
   exploration prompt) acts in a fresh world: it reads the world's real data and makes a
   plausible change, so the chain's arguments come from the data (``chain_failed`` when it
   makes no successful call, ``chain_errors`` when a call failed);
2. a writer LLM sees the executed chain (calls and results) and writes the user request it
   fulfils, plus read-only *probe* calls that show the outcome (unless ``probes:`` are fixed);
3. the chain is executed again in a fresh world and the probes' results on its end state
   become the new task's ``state_probe`` checker (plus a ``state_digest`` of the whole end state
   when the environment can digest it and ``exact_state`` is on, so changes the probes do not
   see count too): the task is verifiable by construction;
4. the task is accepted only if its checker **passes** when the chain is replayed in another
   fresh world (``not_reproducible`` otherwise) and **fails** under the ``noop`` policy
   (``noop_passes``: e.g. a read-only chain, which changes nothing checkable).

The chain (plus a short answer) is the new task's oracle.

Small models (``model: local``, or ``context_chars:`` set): the writer's prompt fits
``context_chars`` (default 6000 characters, about 2k tokens: tools as one-line signatures, each
result cut with a visible marker) and its reply is constrained to the answer's JSON Schema
(``structured``, default on for local models: instruction, answer and probe calls to real tools),
so even a 135M model writes something that parses. With ``explorer: {type: scripted, ...}`` and
fixed ``probes:`` this is a path on which such a model's tasks get accepted.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from agentsynth_kernel import ComponentSpec, InvalidValue, Task, ToolCall, validate_arguments

from .core import (
    Accepted,
    Item,
    LLMSettings,
    Meter,
    Outcome,
    SynthContext,
    action_dicts,
    derive_seed,
    parse_json_object,
    why_failed,
)

EXPLORE_PROMPT = (
    "You are exploring a software environment to create training data. Use the tools to look at the real "
    "data first, then carry out ONE realistic, self-contained change that a user of this system could ask "
    "for (2-{max_calls} tool calls in total, using only values you have seen). Do not explain; when the "
    "change is done, reply with one short sentence saying what you did.{focus}"
)

WRITER_PROMPT = """Below is a sequence of tool calls that was executed in an environment, with their results.
Write the request a user would have made for which exactly this sequence is the right work. The request must
name the concrete values needed (ids, names, amounts) and must not mention tools, SQL or the steps.
{probe_rule}
Answer with one JSON object only:
{{"instruction": "...", "answer": "a one-sentence reply to the user"{probe_key}}}

Tools: {tools}

Executed calls:
{chain}
"""

PROBE_RULE = ("Also give 1-3 read-only probe calls (tools from the list, read-only!) whose results on the "
              "final state prove the request was fulfilled (e.g. a query of the changed rows).")


@attrs.frozen
class BackTranslationSpec:
    """Parameters of ``back_translation``."""

    model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float | None = 0.0
    n: int = 10
    explorer: dict[str, Any] | None = None
    explorer_temperature: float | None = 0.7
    max_calls: int = 6
    probes: list[dict[str, Any]] = attrs.field(factory=list)
    focus: list[str] = attrs.field(factory=list)
    exact_state: bool = True
    context_chars: int | None = None
    structured: bool | None = None
    split: str = "train"
    tier: str = "synth-bt"
    id_prefix: str = "bt"

    def __attrs_post_init__(self) -> None:
        if self.n < 1:
            raise InvalidValue(f"n: must be at least 1, got {self.n}")
        if self.explorer is None and not self.model:
            raise InvalidValue("model: needed for the writer and the default explorer (or give 'explorer:')")
        if self.split not in ("train", "test"):
            raise InvalidValue(f"split: expected train or test, got {self.split!r}")
        if self.context_chars is not None and self.context_chars < 1000:
            raise InvalidValue(f"context_chars: must be at least 1000, got {self.context_chars}")


SMALL_CONTEXT_CHARS = 6_000


def _is_local(model: str | None) -> bool:
    return bool(model) and (model == "local" or str(model).startswith("local/"))


def chain_text(trajectory: Any, limit: int = 1500) -> str:
    lines = []
    for i, step in enumerate(trajectory.steps):
        if isinstance(step.action, ToolCall) and not step.invalid:
            obs = step.observation.content if step.observation else ""
            if limit < 1500 and len(obs) > limit:
                obs = obs[:limit] + f" [... {len(obs) - limit} characters cut]"
            obs = obs if len(obs) <= 1500 else obs[:1500] + " …"
            lines.append(f"{i + 1}. {step.action.name}({json.dumps(step.action.arguments)})\n   -> {obs}")
    return "\n".join(lines)


def tool_lines(tools: list[Any]) -> str:
    """Tools as one-line signatures (a small context has no room for their JSON Schemas)."""
    out = []
    for t in tools:
        props = (t.parameters or {}).get("properties") or {}
        args = ", ".join(f"{k}: {v.get('type', 'any')}" if isinstance(v, dict) else k for k, v in props.items())
        out.append(f"- {t.name}({args}): {t.description}")
    return "\n".join(out)


def writer_schema(tools: list[Any], with_probes: bool) -> dict[str, Any]:
    """The writer's reply as a JSON Schema (bounded strings; probes are calls to the real tools)."""
    props: dict[str, Any] = {"instruction": {"type": "string", "minLength": 8, "maxLength": 400},
                             "answer": {"type": "string", "maxLength": 200}}
    if with_probes:
        calls = [{"type": "object", "properties": {"tool": {"const": t.name},
                                                   "arguments": t.parameters or {"type": "object"}},
                  "required": ["tool", "arguments"], "additionalProperties": False} for t in tools]
        props["probes"] = {"type": "array", "items": calls[0] if len(calls) == 1 else {"anyOf": calls},
                           "minItems": 1, "maxItems": 3}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def check_probes(probes: Any, tools: list[Any]) -> list[dict[str, Any]]:
    if not isinstance(probes, list) or not probes:
        raise ValueError("'probes' must be a non-empty list of {tool, arguments}")
    specs = {t.name: t for t in tools}
    out = []
    for i, p in enumerate(probes[:5]):
        if not isinstance(p, dict) or p.get("tool") not in specs:
            raise ValueError(f"probes[{i}]: unknown tool {p.get('tool') if isinstance(p, dict) else p!r}")
        args = p.get("arguments") or {}
        problems = validate_arguments(specs[p["tool"]].parameters, args)
        if problems:
            raise ValueError(f"probes[{i}]: " + "; ".join(problems))
        out.append({"tool": p["tool"], "arguments": args})
    return out


class BackTranslation:
    name = "back_translation"
    makes_tasks = True

    def __init__(self, spec: BackTranslationSpec) -> None:
        self.spec = spec
        self.settings = LLMSettings(spec.model, spec.api_base, spec.api_key_env, spec.temperature)

    def plan(self, ctx: SynthContext) -> list[Item]:
        return [Item(f"{self.spec.id_prefix}-{i:04d}", derive_seed(ctx.seed, "back_translation", i))
                for i in range(self.spec.n)]

    def _explorer(self, item: Item) -> ComponentSpec:
        s = self.spec
        if s.explorer is not None:
            return ComponentSpec(s.explorer["type"], {k: v for k, v in s.explorer.items() if k != "type"})
        params: dict[str, Any] = {"model": s.model, "temperature": s.explorer_temperature,
                                  "max_turns": s.max_calls + 1}
        if s.api_base:
            params["api_base"] = s.api_base
        if s.api_key_env:
            params["api_key_env"] = s.api_key_env
        return ComponentSpec("llm", params)

    def _writer_prompt(self, traj: Any, tools: list[Any]) -> str:
        """The writer's prompt; with a context budget (small models) shrunk to fit it."""
        s = self.spec
        fill = {"probe_rule": "" if s.probes else PROBE_RULE,
                "probe_key": "" if s.probes else ', "probes": [{"tool": "...", "arguments": {...}}]'}
        budget = s.context_chars if s.context_chars is not None else (
            SMALL_CONTEXT_CHARS if _is_local(s.model) else None)
        if budget is None:
            return WRITER_PROMPT.format(**fill, tools=json.dumps([t.to_openai()["function"] for t in tools]),
                                        chain=chain_text(traj))
        signatures = tool_lines(tools)
        fixed = len(WRITER_PROMPT.format(**fill, tools=signatures, chain=""))
        limit = 1500
        chain = chain_text(traj, limit)
        while fixed + len(chain) > budget and limit > 60:
            limit //= 2
            chain = chain_text(traj, limit)
        if fixed + len(chain) > budget:  # still too long (many calls, long arguments): keep the tail
            keep = max(0, budget - fixed - 60)
            chain = f"[... {len(chain) - keep} characters of earlier calls cut]\n" + chain[len(chain) - keep:]
        return WRITER_PROMPT.format(**fill, tools=signatures, chain=chain)

    async def make(self, ctx: SynthContext, item: Item, meter: Meter) -> Outcome:
        s = self.spec
        out = Outcome()
        focus = f" Focus: {s.focus[int(item.id.rsplit('-', 1)[-1]) % len(s.focus)]}." if s.focus else ""
        explore = Task(f"{item.id}-explore", EXPLORE_PROMPT.format(max_calls=s.max_calls, focus=focus),
                       checkers=[ComponentSpec("synth_fingerprint")], max_steps=s.max_calls + 2)
        run = await ctx.episode(explore, self._explorer(item), seed=item.seed, meter=meter)
        if run.status == "error" or run.trajectory is None:
            return out.reject("chain_failed", why_failed(run))
        traj = run.trajectory
        calls = [st for st in traj.steps if isinstance(st.action, ToolCall)]
        if not calls or all(st.invalid for st in calls):
            return out.reject("chain_failed", "the explorer made no valid tool call")
        bad = [st for st in calls if st.invalid or (st.observation is not None and st.observation.error)]
        if bad:
            first = bad[0].observation.content if bad[0].observation else ""
            return out.reject("chain_errors", f"{len(bad)} call(s) failed, e.g. {first[:200]}")
        tools = list(traj.tools)
        chain = action_dicts(traj, answer="")[:-1]
        prompt = self._writer_prompt(traj, tools)
        structured = s.structured if s.structured is not None else _is_local(s.model)
        extra: dict[str, Any] = {}
        if structured:
            extra["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "back_translation", "schema": writer_schema(tools, not s.probes)}}
        text = await ctx.ask([{"role": "user", "content": prompt}], meter, salt=f"bt:{item.id}:{item.seed}",
                             settings=self.settings, **extra)
        try:
            data = parse_json_object(text)
            instruction = data.get("instruction")
            if not isinstance(instruction, str) or len(instruction.strip()) < 8:
                raise ValueError("'instruction' must be the user's request")
            probes = list(s.probes) if s.probes else check_probes(data.get("probes"), tools)
        except ValueError as exc:
            return out.reject("unparseable", f"{exc}: {text[:200]}")
        answer = str(data.get("answer") or "Done.")
        # the chain's end state, read by the probes in a fresh world
        record = Task(f"{item.id}-record", instruction,
                      checkers=[ComponentSpec("synth_record_probes", {"probes": probes}),
                                ComponentSpec("synth_fingerprint")])
        rec = await ctx.episode(record, ComponentSpec("synth_replay", {"actions": chain}), seed=item.seed, meter=meter)
        observed = next((v.data for v in rec.verdicts if v.checker == "synth_record_probes"), None)
        digest = next((v.data for v in rec.verdicts if v.checker == "synth_fingerprint"), None)
        if rec.status == "error" or observed is None:
            return out.reject("not_reproducible", f"replaying the chain failed: {why_failed(rec)}")
        checkers = [ComponentSpec("state_probe", {"probes": [{**p, "expect": o} for p, o in zip(probes, observed,
                                                                                              strict=True)]})]
        if s.exact_state and digest is not None:  # the whole end state, when the environment can digest it
            checkers.append(ComponentSpec("state_digest", {"expect": digest}))
        task = Task(item.id, instruction.strip(), checkers=checkers, split=s.split, tier=s.tier,
                    metadata={"synth": "back_translation"})
        oracle = [*chain, {"answer": answer}]
        verified = await ctx.episode(task, ComponentSpec("synth_replay", {"actions": oracle}), seed=item.seed,
                                     meter=meter)
        if not verified.passed:
            return out.reject("not_reproducible", f"the chain does not pass its own checker: {why_failed(verified)}")
        noop = await ctx.episode(task, ComponentSpec("noop"), seed=derive_seed(item.seed, "noop"), meter=meter)
        if noop.passed:
            return out.reject("noop_passes", "the checker passes without any work (a read-only chain?)")
        assert verified.trajectory is not None
        out.accepted.append(Accepted(task, verified.trajectory, verified.verdicts, oracle=oracle, seed=item.seed,
                                     info={"explorer_steps": len(traj.steps), "probes": len(probes),
                                           "noop": why_failed(noop, 200)}))
        return out
