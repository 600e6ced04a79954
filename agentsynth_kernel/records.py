"""Hot records: what an episode produces, encoded fast with msgspec.

These are the stable on-disk schema of agentsynth (run stores, JSONL exports,
importers). Evolve them only by adding fields *with defaults*, and bump
``SCHEMA_VERSION`` when the meaning of a field changes.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

import msgspec

SCHEMA_VERSION = 1

T = TypeVar("T")


class ToolSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """A tool an environment offers; ``parameters`` is a JSON Schema object (OpenAI-compatible)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    # Whether calling the tool can change the world: True = it only reads (MCP's readOnlyHint, an HTTP
    # GET, the sql world's sql_query), False = it may write, None = unknown. Judges use it to tell
    # whether a call could back a claimed change; it is never sent to a model.
    read_only: bool | None = None

    def to_openai(self) -> dict[str, Any]:
        """The ``tools=[...]`` entry of an OpenAI chat-completions request."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def to_anthropic(self) -> dict[str, Any]:
        """The ``tools=[...]`` entry of an Anthropic messages request."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}


class ToolCall(msgspec.Struct, frozen=True, tag="tool_call", omit_defaults=True):
    """The agent calls a tool. ``id`` pairs the call with its result in chat transcripts."""

    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str = ""


class Answer(msgspec.Struct, frozen=True, tag="answer", omit_defaults=True):
    """The agent's message to the user. It ends the episode, except in a task with a simulated user
    (``user:`` in the pack), where the user's reply is the step's observation and the talk goes on."""

    content: str = ""


Action = ToolCall | Answer


class Observation(msgspec.Struct, omit_defaults=True):
    """What the agent sees after reset or after a tool call.

    ``error`` marks a failed tool call (the agent may recover); ``data`` keeps the
    structured result for checkers and exporters; ``done`` lets an environment end
    the episode on its own.
    """

    content: str = ""
    error: bool = False
    data: Any = None
    done: bool = False


class Usage(msgspec.Struct, omit_defaults=True):
    """Tokens and money spent by one policy turn (or summed over an episode)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            cost,
            self.requests + other.requests,
        )


class Message(msgspec.Struct, omit_defaults=True):
    """One chat message in OpenAI's shape (``role`` is system/user/assistant/tool)."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    tool_call_id: str = ""
    name: str = ""


class Step(msgspec.Struct, omit_defaults=True):
    """One action and the observation it produced (for an Answer: ``None``, or the simulated user's reply)."""

    action: Action
    observation: Observation | None = None
    turn: int = 0  # steps with the same turn were returned together (parallel tool calls)
    duration_s: float = 0.0
    thought: str = ""
    usage: Usage | None = None
    invalid: bool = False  # the call named an unknown tool or had bad arguments


class Trajectory(msgspec.Struct, omit_defaults=True):
    """Everything the agent did in one episode, in order."""

    task_id: str
    instruction: str
    steps: list[Step] = msgspec.field(default_factory=list)
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    initial_observation: str = ""
    system_prompt: str = ""
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    # the simulated user's side of a multi-turn task (their instructions as ``instruction``, their
    # messages as Answers, their own tool calls); attached after the talk, never shown to the agent
    user: Trajectory | None = None

    @property
    def messages(self) -> list[str]:
        """Every message this side sent to the other (the Answers, in order)."""
        return [s.action.content for s in self.steps if isinstance(s.action, Answer)]

    @property
    def final_answer(self) -> str | None:
        for step in reversed(self.steps):
            if isinstance(step.action, Answer):
                return step.action.content
        return None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [s.action for s in self.steps if isinstance(s.action, ToolCall)]


class Verdict(msgspec.Struct, omit_defaults=True):
    """A checker's decision, read from the world's end state."""

    # The checker's name (its `type:`, or the `name:` it was given).
    checker: str
    # The decision; a task passes when every one of its checkers' verdicts passed.
    passed: bool
    # Partial credit in [0, 1] (exported as a reward); `passed` decides pass/fail.
    score: float = 0.0
    # Why, for a person: what was found versus what was expected.
    detail: str = ""
    # Structured evidence (JSON-serialisable) for reports and exporters.
    data: Any = None


# what checkers decided (passed / failed), that the episode could not be completed (error), or
# that nothing checked it (unverified: a trace imported from elsewhere); decoding validates it
Status = Literal["passed", "failed", "error", "unverified"]

# Who failed, when an episode ended in an error ("" when none did; "agent" for a failed episode).
# The kernel's stages (environment, checker, policy, judge, user), a declared kind of an exception
# (``agentsynth_error_kind``: provider from the LLM client, verifier from a learned judge ...),
# timeout and budget. Decoding validates it, so a plugin that declares a kind of its own must add it
# here (an exception declaring another kind is attributed to the stage that raised it).
ErrorKind = Literal["", "agent", "environment", "checker", "policy", "judge", "user", "provider", "verifier",
                    "timeout", "budget"]
ERROR_KINDS: frozenset[str] = frozenset(typing.get_args(ErrorKind))


def is_error_kind(value: object) -> typing.TypeGuard[ErrorKind]:
    """Whether ``value`` (e.g. an exception's ``agentsynth_error_kind``) is one of the ErrorKind values."""
    return isinstance(value, str) and value in ERROR_KINDS


class EpisodeResult(msgspec.Struct, omit_defaults=True):
    """The outcome of one (task, trial, seed) episode.

    ``status`` is ``passed`` or ``failed`` (checkers decided), ``error`` (the
    episode could not be completed) or ``unverified`` (an imported trace nothing
    checked); ``error_kind`` (:data:`ErrorKind`) says who failed: ``agent``,
    ``environment``, ``checker``, ``policy``, ``judge``, ``provider``, ``verifier``, ``timeout``,
    ``budget``, or ``user`` (the simulated user broke its instructions or failed).
    """

    task_id: str
    trial: int
    seed: int
    status: Status
    trajectory: Trajectory | None = None
    verdicts: list[Verdict] = msgspec.field(default_factory=list)
    error: str = ""
    error_kind: ErrorKind = ""
    duration_s: float = 0.0
    usage: Usage = msgspec.field(default_factory=Usage)
    scores: dict[str, float] = msgspec.field(default_factory=dict)
    split: str = ""
    tier: str = ""
    provenance: dict[str, Any] = msgspec.field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    judge_error: str = ""  # the judge failed; the checkers' verdict (status) still stands

    def __post_init__(self) -> None:
        # Decoding checks the Literal fields, constructing does not: a result with a kind outside the
        # set would be stored and then never read back (a lost episode), so it is refused here.
        if self.error_kind not in ERROR_KINDS:
            raise ValueError(f"error_kind {self.error_kind!r} is not one of {', '.join(sorted(ERROR_KINDS - {''}))} "
                             "(or ''): add it to agentsynth_kernel.records.ErrorKind")

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.task_id, self.trial, self.seed)

    @property
    def why(self) -> str:
        """Why it did not pass: the error, or the failing verdicts' details ("" when it passed)."""
        return self.error or "; ".join(f"{v.checker}: {v.detail}" for v in self.verdicts if not v.passed)


# --- encoding -------------------------------------------------------------------------------

_encoder = msgspec.json.Encoder()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(type_: type[T]) -> msgspec.json.Decoder[T]:
    dec = _decoders.get(type_)
    if dec is None:
        dec = _decoders[type_] = msgspec.json.Decoder(type_)
    return dec


def to_json(record: Any) -> bytes:
    """Encode a record (or any msgspec-compatible value) to compact JSON bytes.

    A lone surrogate (an agent's tool argument decoded from ``"\\ud800"``, a server's reply) is not
    UTF-8: such strings are written with U+FFFD in its place instead of failing the run's store."""
    try:
        return _encoder.encode(record)
    except UnicodeEncodeError:
        return _encoder.encode(_without_surrogates(msgspec.to_builtins(record)))


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


def from_json(data: bytes | str, type_: type[T]) -> T:
    """Decode JSON into ``type_``; raises ``msgspec.ValidationError`` with a JSON path on bad data."""
    return _decoder(type_).decode(data)


def to_builtins(record: Any) -> Any:
    """A record as plain dicts/lists, e.g. for YAML or pyarrow."""
    return msgspec.to_builtins(record)


def write_jsonl(records: Iterable[Any], fp: IO[bytes]) -> int:
    """Stream records to a binary file, one JSON object per line; returns the count."""
    buf = bytearray()
    n = 0
    for record in records:
        try:
            _encoder.encode_into(record, buf)
        except UnicodeEncodeError:  # a lone surrogate somewhere in it: see to_json
            buf.extend(to_json(record))
        buf.extend(b"\n")
        fp.write(buf)
        buf.clear()
        n += 1
    return n


def read_jsonl(path: str | Path, type_: type[T]) -> Iterator[T]:
    """Stream typed records from a JSONL file; a bad line raises ``ValueError`` naming file and line."""
    dec = _decoder(type_)
    with open(path, "rb") as fp:
        for lineno, line in enumerate(fp, 1):
            if not line.strip():
                continue
            try:
                yield dec.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise ValueError(f"{path}:{lineno}: {exc}") from None


# --- chat rendering -----------------------------------------------------------------------------


def to_openai_messages(trajectory: Trajectory, *, system_prompt: str | None = None) -> list[dict[str, Any]]:
    """Render a trajectory as OpenAI chat messages (tool calls + tool results).

    Tool calls of the same policy turn become one assistant message with
    parallel ``tool_calls``, followed by their results, as OpenAI and TRL expect.
    """
    messages: list[dict[str, Any]] = []
    system = trajectory.system_prompt if system_prompt is None else system_prompt
    if system:
        messages.append({"role": "system", "content": system})
    user = trajectory.instruction
    if trajectory.initial_observation and trajectory.initial_observation != trajectory.instruction:
        user = f"{user}\n\n{trajectory.initial_observation}" if user else trajectory.initial_observation
    messages.append({"role": "user", "content": user})
    pending_results: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for index, step in enumerate(trajectory.steps):
        action = step.action
        if isinstance(action, ToolCall):
            call_id = action.id or f"call_{index}"
            if current is None:
                current = {"role": "assistant", "content": step.thought or None, "tool_calls": []}
                messages.append(current)
            current["tool_calls"].append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": action.name, "arguments": json.dumps(action.arguments)},
                }
            )
            content = step.observation.content if step.observation else ""
            pending_results.append({"role": "tool", "tool_call_id": call_id, "content": content})
            nxt = trajectory.steps[index + 1] if index + 1 < len(trajectory.steps) else None
            if nxt is None or not isinstance(nxt.action, ToolCall) or nxt.turn != step.turn:
                messages.extend(pending_results)
                pending_results, current = [], None
        else:
            messages.extend(pending_results)
            pending_results, current = [], None
            messages.append({"role": "assistant", "content": action.content})
            reply = step.observation
            if reply is not None and not reply.done:  # a simulated user's reply: the talk goes on
                messages.append({"role": "user", "content": reply.content})
    messages.extend(pending_results)
    return messages
