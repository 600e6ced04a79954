"""The ``llm`` judge: a chat model scores the trajectory on the rubric, as validated structured output.

::

    judge:
      type: llm
      model: openai/gpt-4o-mini          # any model the kernel's LLM client reaches
      # api_base: http://localhost:8000/v1, api_key_env: MY_KEY, temperature: 0, max_reasks: 2
      # rubric: rubric.yaml, reward: {outcome: .6, verification: .2, judge: .2}
      # max_tokens: 1024 (always sent), context_chars: 6000 (default for model: local)
      # veto: true (default): a failed checker fails the episode, whatever the model scored

Every request goes through the kernel's LLM client (``client_for(run)``: the run's cache,
retries, rate limit and hard budget). The model is asked for a JSON object with a 0-10
score and a one-sentence rationale per rubric dimension plus an overall rationale; the
request carries that JSON Schema as ``response_format`` (``json_schema``; ``json_object`` or
``none`` for servers without structured output). The reply is parsed (code fences and
surrounding prose are tolerated) and validated against the schema; an invalid reply is
sent back with the exact problems and the model is re-asked, at most ``max_reasks``
times, after which the judge raises :class:`JudgeOutputError`. Rationales are kept in the
JudgeResult (and the run store). As with the heuristic judge, a failed checker vetoes a pass
(``veto: false`` turns that off): the world's end state has the last word over what a model
read in the trajectory.

Bias controls: the prompt tells the model not to reward length or confident tone; every
observation and the final answer are cut to fixed character budgets (so a verbose agent
cannot flood the judge); long trajectories show their first and last steps. In pairwise
mode (:meth:`LLMJudge.compare_once`, used by :func:`agentsynth_judge.pairwise.compare`)
both trajectories get the same budgets and are presented in both orders (or a seeded
random order) to cancel position bias.

Small contexts: every request carries ``max_tokens`` (default 1024; 512 for ``local`` models), and
with ``context_chars`` set (the default for ``local`` models: 6000, about 2k tokens) the prompt is
compact (a short system prompt) and the trajectory is re-rendered with smaller per-step budgets
until the whole prompt fits; what still does not fit is cut with a visible marker. The reply is
bounded too (integer scores 0-10, rationales of at most 80 characters), and a ``local`` judge waits
up to 600 s for a reply (a small model on a busy CPU is slow; a timeout would only ask again).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentsynth_kernel import (
    AgentsynthError,
    Answer,
    InvalidValue,
    JudgeResult,
    ToolCall,
    Trajectory,
    Usage,
    Verdict,
    did_you_mean,
    validate_arguments,
)

from .base import RubricJudge, annotate, rubric_param
from .pairwise import Preference
from .reward import DEFAULT_WEIGHTS, RewardWeights
from .rubric import Rubric

RESPONSE_FORMATS = ("json_schema", "json_object", "none")
SCALE = 10

SYSTEM_PROMPT = (
    "You are a strict, fair evaluator of AI agent trajectories. An agent was given a task and tools; you see "
    "every tool call it made, what each call returned, and its final answer. Score the trajectory on each "
    "rubric dimension from 0 (worst) to 10 (best), each with a one-sentence rationale that cites the evidence "
    "(step numbers). Judge what the agent actually did and what the observations show, not what it claims. "
    "Do not reward length, verbosity or a confident tone: a short correct answer beats a long one. "
    "Reply with a single JSON object and nothing else."
)
PAIRWISE_PROMPT = (
    "You are a strict, fair evaluator comparing two AI agent trajectories for the same task. Decide which one "
    "did the task better according to the rubric, judging actions and evidence, not claims. The order in which "
    "they are shown is random and means nothing; do not reward length or verbosity. Answer 'tie' only when "
    "they are equally good. Reply with a single JSON object and nothing else."
)


COMPACT_SYSTEM_PROMPT = (
    "Score an AI agent's trajectory on each rubric dimension from 0 to 10 with a one-sentence rationale. "
    "Judge what it did, not what it claims; do not reward length. Reply with one JSON object only."
)
DEFAULT_MAX_TOKENS = 1024
SMALL_MAX_TOKENS = 512
SMALL_CONTEXT_CHARS = 6_000
LOCAL_TIMEOUT = 600.0


def _is_local(model: str) -> bool:
    return model == "local" or model.startswith("local/")


class JudgeOutputError(AgentsynthError):
    """The judge model did not produce valid structured output, even after re-asking."""

    agentsynth_error_kind = "judge"


COMPACT_RATIONALE_CHARS = 80
COMPACT_SUMMARY_CHARS = 160


def score_schema(rubric: Rubric, compact: bool = False) -> dict[str, Any]:
    """The JSON Schema of a pointwise verdict for ``rubric``. ``compact`` (small contexts) bounds the
    reply: integer scores 0-10 and short rationales, so a grammar-constrained small model cannot
    run on until ``max_tokens`` (an unbounded string is where a 135M model loops)."""
    score: dict[str, Any] = ({"type": "integer", "enum": list(range(SCALE + 1))} if compact
                             else {"type": "number", "minimum": 0, "maximum": SCALE})
    text: dict[str, Any] = {"type": "string", **({"maxLength": COMPACT_RATIONALE_CHARS} if compact else {})}
    dim = {
        "type": "object",
        "properties": {
            "score": score,
            "rationale": text,
        },
        "required": ["score", "rationale"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "dimensions": {
                "type": "object",
                "properties": {name: dim for name in rubric.names},
                "required": rubric.names,
                "additionalProperties": False,
            },
            "rationale": {"type": "string", **({"maxLength": COMPACT_SUMMARY_CHARS} if compact else {})},
        },
        "required": ["dimensions", "rationale"],
        "additionalProperties": False,
    }


PAIRWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "winner": {"type": "string", "enum": ["first", "second", "tie"]},
        "rationale": {"type": "string"},
    },
    "required": ["winner", "rationale"],
    "additionalProperties": False,
}

_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def parse_reply(content: str, schema: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """Decode a model's JSON reply and validate it; returns (value, problems)."""
    text = (content or "").strip()
    if not text:
        return None, ["the reply was empty"]
    fenced = _FENCE_RE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        value = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        try:
            value = json.loads(text[start:end + 1]) if 0 <= start < end else None
        except ValueError:
            value = None
        if value is None:
            return None, ["the reply is not valid JSON (send only a JSON object, no prose)"]
    return value, validate_arguments(schema, value, "reply")


def _clip(text: str, limit: int) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} more characters cut]"


def render_trajectory(
    trajectory: Trajectory,
    verdicts: Sequence[Verdict] = (),
    *,
    max_observation_chars: int = 2000,
    max_answer_chars: int = 4000,
    max_steps_shown: int = 60,
) -> str:
    """A trajectory as plain text for a judge prompt (with fixed length budgets)."""
    lines = [f"TASK: {trajectory.instruction}"]
    if trajectory.initial_observation and trajectory.initial_observation != trajectory.instruction:
        lines.append(f"INITIAL OBSERVATION: {_clip(trajectory.initial_observation, max_observation_chars)}")
    if trajectory.tools:
        lines.append("TOOLS: " + "; ".join(
            f"{t.name}({', '.join((t.parameters or {}).get('properties', {}))})" for t in trajectory.tools))
    steps: list[tuple[int, Any]] = list(enumerate(trajectory.steps, 1))
    if len(steps) > max_steps_shown:
        head, tail = steps[: max_steps_shown // 2], steps[-(max_steps_shown - max_steps_shown // 2):]
        steps = [*head, (0, None), *tail]
    lines.append("STEPS:")
    if not trajectory.steps:
        lines.append("(none)")
    for number, step in steps:
        if step is None:
            lines.append(f"... {len(trajectory.steps) - max_steps_shown} steps omitted ...")
            continue
        if step.thought:
            lines.append(f"[{number}] thought: {_clip(step.thought, max_observation_chars)}")
        action = step.action
        if isinstance(action, ToolCall):
            args = json.dumps(action.arguments, ensure_ascii=False, default=str)
            obs = step.observation
            result = "(no result)" if obs is None else ("ERROR: " if obs.error else "") + _clip(obs.content, max_observation_chars)
            flag = " [invalid call]" if step.invalid else ""
            lines.append(f"[{number}] call {action.name}({_clip(args, max_observation_chars)}){flag} -> {result}")
        elif isinstance(action, Answer) and step.observation is not None:
            # a multi-turn task: a message to the simulated user, and the user's reply
            reply = step.observation
            heard = "(the user ended the conversation)" if reply.done and not reply.content else \
                _clip(reply.content, max_observation_chars)
            lines.append(f"[{number}] said: {_clip(action.content, max_answer_chars)} -> reply: {heard}")
        elif isinstance(action, Answer):
            lines.append(f"[{number}] final answer given")
    answer = trajectory.final_answer
    lines.append("FINAL ANSWER: " + ("(none)" if answer is None else _clip(answer, max_answer_chars) or "(empty)"))
    if trajectory.metadata.get("stopped"):
        lines.append(f"NOTE: the episode was stopped ({trajectory.metadata['stopped']}).")
    if verdicts:
        lines.append("CHECKS OF THE WORLD'S END STATE (ground truth):")
        lines += [f"- {v.checker}: {'PASSED' if v.passed else 'FAILED'}" + (f" ({v.detail})" if v.detail else "")
                  for v in verdicts]
    return "\n".join(lines)


class LLMJudge(RubricJudge):
    """Scores trajectories with a chat model through the kernel's LLM client (``score`` is async)."""

    kind = "llm"

    def __init__(
        self,
        model: str,
        rubric: Rubric | Mapping[str, Any] | str | Path | None = None,
        reward: RewardWeights | None = DEFAULT_WEIGHTS,
        *,
        temperature: float | None = 0.0,
        max_reasks: int = 2,
        api_base: str | None = None,
        api_key_env: str | None = None,
        transport: str = "auto",
        max_tokens: int | None = None,
        cache: bool = True,
        response_format: str = "json_schema",
        include_verdicts: bool = True,
        max_observation_chars: int = 2000,
        max_answer_chars: int = 4000,
        system_prompt: str | None = None,
        params: Mapping[str, Any] | None = None,
        context_chars: int | None = None,
        veto: bool = True,
        client: Any = None,
        run: Any = None,
        base_dir: Path | None = None,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(rubric, reward, base_dir)
        if not isinstance(model, str) or not model:
            raise AgentsynthError("llm judge: 'model' must be a model name such as 'openai/gpt-4o-mini'")
        if response_format not in RESPONSE_FORMATS:
            raise AgentsynthError(f"llm judge: response_format must be one of {', '.join(RESPONSE_FORMATS)}")
        from agentsynth_kernel import client_for, resolve_route

        resolve_route(model, api_base, transport)  # a missing api_base fails now, not in every episode
        self.model, self.temperature, self.max_reasks = model, temperature, max(0, int(max_reasks))
        self.api_base, self.api_key_env, self.transport = api_base, api_key_env, transport
        local = _is_local(model)
        self.context_chars = context_chars if context_chars is not None else (SMALL_CONTEXT_CHARS if local else None)
        if max_tokens is None:
            max_tokens = SMALL_MAX_TOKENS if self.context_chars is not None else DEFAULT_MAX_TOKENS
        self.max_tokens, self.cache, self.response_format = max_tokens, cache, response_format
        self.include_verdicts = include_verdicts
        self.veto = veto
        self.max_observation_chars, self.max_answer_chars = max_observation_chars, max_answer_chars
        self.system_prompt = system_prompt or (COMPACT_SYSTEM_PROMPT if self.context_chars is not None
                                               else SYSTEM_PROMPT)
        self.params = dict(params or {})
        options = dict(client_options or {})
        if local:  # a small model on a busy CPU can take minutes for one reply: do not time out and redo it
            options.setdefault("timeout", LOCAL_TIMEOUT)
        self.client = client if client is not None else client_for(run, **options)
        if local:  # an embedded model costs nothing (a USD budget still works with it)
            self.client.prices.setdefault(model, (0.0, 0.0))
        self.schema = score_schema(self.rubric, compact=self.context_chars is not None)

    # --- plumbing -------------------------------------------------------------------------------

    def _format(self, name: str, schema: Mapping[str, Any]) -> dict[str, Any] | None:
        if self.response_format == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
        if self.response_format == "json_object":
            return {"type": "json_object"}
        return None

    async def ask(self, messages: list[dict[str, Any]], schema: Mapping[str, Any], name: str) -> tuple[Any, Usage, int]:
        """Send, validate, re-ask with the problems until valid; returns (value, usage, attempts)."""
        usage = Usage()
        problems: list[str] = []
        for attempt in range(1, self.max_reasks + 2):
            response = await self.client.complete(
                messages, model=self.model, temperature=self.temperature, max_tokens=self.max_tokens,
                api_base=self.api_base, api_key_env=self.api_key_env, transport=self.transport, cache=self.cache,
                response_format=self._format(name, schema), **self.params,
            )
            usage = usage + response.usage
            value, problems = parse_reply(response.content, schema)
            if not problems:
                return value, usage, attempt
            messages = [
                *messages,
                {"role": "assistant", "content": response.content or ""},
                {"role": "user", "content": "Your reply is invalid:\n" + "\n".join(f"- {p}" for p in problems[:10])
                 + "\nReply again with only a JSON object that matches this JSON Schema:\n" + json.dumps(schema)},
            ]
        raise JudgeOutputError(
            f"llm judge ({self.model}): no valid reply after {self.max_reasks + 1} attempts; last problems: "
            + "; ".join(problems[:5])
        )

    def _render(self, trajectory: Trajectory, verdicts: Sequence[Verdict], room: int | None = None) -> str:
        """The trajectory as text; with ``room`` (characters), shrunk until it fits, then cut with a marker."""
        verdicts = verdicts if self.include_verdicts else ()
        obs, answer, steps = self.max_observation_chars, self.max_answer_chars, 60
        text = render_trajectory(trajectory, verdicts, max_observation_chars=obs, max_answer_chars=answer,
                                 max_steps_shown=steps)
        if room is None:
            return text
        while len(text) > room and (obs > 80 or steps > 6):
            obs, answer, steps = max(80, obs // 2), max(160, answer // 2), max(6, steps // 2)
            text = render_trajectory(trajectory, verdicts, max_observation_chars=obs, max_answer_chars=answer,
                                     max_steps_shown=steps)
        if len(text) > room:
            keep = max(0, room - 80)
            text = text[:keep] + f"\n[... {len(text) - keep} characters of the trajectory cut to fit the judge's context]"
        return text

    def _room(self, *fixed: str, system: str | None = None) -> int | None:
        """Characters left for trajectories once the fixed parts of the prompt are counted."""
        if self.context_chars is None:
            return None
        system = self.system_prompt if system is None else system
        return max(200, self.context_chars - len(system) - sum(len(f) for f in fixed))

    def _rubric_text(self) -> str:
        return "\n".join(f"- {d.name} (weight {w:.2f}): {d.description or d.name.replace('_', ' ')}"
                         for d, w in zip(self.rubric.dimensions, self.rubric.weights().values(), strict=True))

    # --- pointwise ------------------------------------------------------------------------------

    async def score(self, trajectory: Trajectory, verdicts: list[Verdict]) -> JudgeResult:
        head = f"RUBRIC (score every dimension 0-{SCALE}):\n{self._rubric_text()}\n\nTRAJECTORY:\n"
        tail = ("\n\nReply with a JSON object: {\"dimensions\": {<dimension>: {\"score\": <0-10>, \"rationale\": "
                "<text>}, ...}, \"rationale\": <overall assessment>}")
        if self.context_chars is not None:
            tail += f" (integer scores; each rationale at most {COMPACT_RATIONALE_CHARS} characters)"
        prompt = head + self._render(trajectory, verdicts, self._room(head, tail)) + tail
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": prompt}]
        value, usage, attempts = await self.ask(messages, self.schema, "rubric_scores")
        dims = value["dimensions"]
        scores = {name: float(dims[name]["score"]) / SCALE for name in self.rubric.names}
        notes = {name: str(dims[name]["rationale"]).strip() for name in self.rubric.names}
        summary = f"llm judge ({self.model}): {str(value['rationale']).strip()}"
        if attempts > 1:
            summary += f" [valid after {attempts} attempts]"
        failed = [v.checker for v in verdicts if not v.passed] if self.veto else []
        veto = f"checker(s) {', '.join(failed)} failed on the world's end state" if failed else ""
        return annotate(trajectory, self, self.finish(scores, notes, verdicts, summary=summary, usage=usage, veto=veto))

    # --- pairwise -------------------------------------------------------------------------------

    async def compare_once(self, first: Trajectory, second: Trajectory) -> Preference:
        """Which of two trajectories, as shown, is better (use :func:`pairwise.compare` for swapping)."""
        head = f"RUBRIC:\n{self._rubric_text()}\n\n"
        tail = "\n\nReply with a JSON object: {\"winner\": \"first\" | \"second\" | \"tie\", \"rationale\": <text>}"
        room = self._room(head, tail, system=PAIRWISE_PROMPT)
        each = None if room is None else room // 2 - 40
        prompt = (f"{head}TRAJECTORY FIRST:\n{self._render(first, (), each)}\n\n"
                  f"TRAJECTORY SECOND:\n{self._render(second, (), each)}{tail}")
        messages = [{"role": "system", "content": PAIRWISE_PROMPT}, {"role": "user", "content": prompt}]
        value, usage, _ = await self.ask(messages, PAIRWISE_SCHEMA, "pairwise_preference")
        return Preference(value["winner"], str(value["rationale"]).strip(), usage=usage)


# --- spec ------------------------------------------------------------------------------------------


def _model_validator(instance: Any, attribute: Any, value: str) -> None:
    if not value:
        raise InvalidValue("model: a model name is required, e.g. openai/gpt-4o-mini")


def _format_validator(instance: Any, attribute: Any, value: str) -> None:
    if value not in RESPONSE_FORMATS:
        raise InvalidValue(
            f"response_format: expected one of {', '.join(RESPONSE_FORMATS)}, got {value!r}"
            f"{did_you_mean(value, RESPONSE_FORMATS)}"
        )


def _non_negative(instance: Any, attribute: Any, value: int) -> None:
    if value < 0:
        raise InvalidValue(f"{attribute.name}: must be >= 0, got {value}")


def _positive(instance: Any, attribute: Any, value: int) -> None:
    if value < 1:
        raise InvalidValue(f"{attribute.name}: must be at least 1, got {value}")


_OWN_PARAMS = ("model", "messages", "temperature", "max_tokens", "api_base", "api_key", "api_key_env", "transport",
               "cache", "cache_salt", "response_format", "tools")


def _params_validator(value: Mapping[str, Any]) -> None:
    for key in value:
        if key in _OWN_PARAMS:
            hint = "set it on the judge itself" if key in attrs.fields_dict(LLMJudgeSpec) else "the judge sets it"
            raise InvalidValue(f"params.{key}: not allowed here ({hint})")


@attrs.frozen
class LLMJudgeSpec:
    """``judge: {type: llm, model: ...}`` parameters."""

    model: str = attrs.field(validator=_model_validator)
    rubric: Any = attrs.field(default=None, validator=lambda i, a, v: rubric_param(v))
    reward: RewardWeights | None = attrs.field(factory=RewardWeights)
    temperature: float | None = 0.0
    max_reasks: int = attrs.field(default=2, validator=_non_negative)
    api_base: str | None = None
    api_key_env: str | None = None
    transport: str = "auto"
    max_tokens: int | None = None
    cache: bool = True
    response_format: str = attrs.field(default="json_schema", validator=_format_validator)
    include_verdicts: bool = True
    max_observation_chars: int = attrs.field(default=2000, validator=_positive)
    max_answer_chars: int = attrs.field(default=4000, validator=_positive)
    system_prompt: str | None = None
    params: dict[str, Any] = attrs.field(factory=dict, validator=lambda i, a, v: _params_validator(v))
    context_chars: int | None = attrs.field(default=None, validator=lambda i, a, v: None if v is None else _positive(i, a, v))
    veto: bool = True
    timeout: float | None = None
    max_retries: int | None = None
    rpm: float | None = None

    def __attrs_post_init__(self) -> None:
        from agentsynth_kernel import resolve_route

        try:
            resolve_route(self.model, self.api_base, self.transport)
        except (AgentsynthError, ValueError) as exc:
            raise InvalidValue(str(exc)) from None


def make_llm(spec: LLMJudgeSpec, base_dir: Path | None = None, run: Any = None) -> LLMJudge:
    options = {k: v for k, v in (("timeout", spec.timeout), ("max_retries", spec.max_retries), ("rpm", spec.rpm))
               if v is not None}
    return LLMJudge(
        spec.model, spec.rubric, spec.reward, temperature=spec.temperature, max_reasks=spec.max_reasks,
        api_base=spec.api_base, api_key_env=spec.api_key_env, transport=spec.transport, max_tokens=spec.max_tokens,
        cache=spec.cache, response_format=spec.response_format, include_verdicts=spec.include_verdicts,
        max_observation_chars=spec.max_observation_chars, max_answer_chars=spec.max_answer_chars,
        system_prompt=spec.system_prompt, params=spec.params, context_chars=spec.context_chars, veto=spec.veto, run=run,
        base_dir=base_dir, client_options=options,
    )
