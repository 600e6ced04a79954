"""The ``llm`` policy: any model as an agent, through OpenAI tool calling and the one LLM client.

::

    policy:
      type: llm
      model: openai/gpt-4o-mini        # or anthropic/..., hosted_vllm/... with api_base, ollama/...
      temperature: 0.0
      max_turns: 20
      # system_prompt: ..., api_base: http://localhost:8000/v1, api_key_env: MY_KEY, max_tokens: 1024,
      # parallel_tool_calls, tool_choice, params: {top_p: ...}, max_observation_chars: 20000,
      # cache: false, transport: litellm, timeout, max_retries, rpm, prices: {model: [in, out]}
      # small_model: true, context_chars: 6000     (on by default for model: local; max_turns is then 8)
      # batch: {provider: openai, poll_s: 60}   (provider batch APIs, half price: docs/llm-batch.md)

Each turn sends the conversation and the environment's tools, executes the tool calls the model
returns (parallel calls in one turn), feeds the results back, and stops on an answer without tool
calls or after ``max_turns``. A call with arguments that are not JSON or do not fit the tool's
schema is not executed: the model gets an error result it can recover from, and the step is
recorded with ``invalid=True`` (unknown tool names are handled the same way by the kernel).
Requests go through ``client_for(run)``: the run's cache, retries, rate limit and budget.
Keys come from the environment only (``OPENAI_API_KEY``, or the variable named by ``api_key_env``).

**Small-model mode** (``small_model: true``; the default for ``local`` models) makes weak tool
callers act: every request carries a ``final_answer`` tool and ``tool_choice: "required"``, so the
model always calls a tool (servers that constrain decoding to the tools' schemas, like the embedded
one, then always produce a well-formed call), and calling ``final_answer`` ends the episode with its
answer. Assistant tool-call messages carry ``content: ""`` (llama.cpp's chat templates break on
null), observations are cut to fit, and the oldest turns are dropped (with a visible marker) so
the conversation sent stays under ``context_chars`` characters; the trajectory keeps everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from ..adapters import InvalidToolCall, observation_text, parse_arguments, validate_arguments
from ..components import EpisodeState, Turn
from ..errors import AgentsynthError
from ..records import Answer, Observation, ToolCall
from ..spec import Bounds

if TYPE_CHECKING:
    from ..llm import LLMClient
    from ..spec import Pack, Task

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent that completes tasks by calling the tools you are given. The result is checked "
    "on the state of the environment, not on what you say. Call tools (several at once when they are "
    "independent), read their results, fix mistakes, and when the task is done reply with a short final "
    "answer without calling a tool."
)

# client options a policy may set; they apply when it is the first to create the run's client
_CLIENT_OPTIONS = ("timeout", "max_retries", "rpm", "concurrency", "prices")

FINAL_ANSWER = "final_answer"
LOCAL_TIMEOUT = 600.0  # seconds per request to a local model (the embedded server answers one at a time)
SMALL_CONTEXT_CHARS = 6_000  # ~2k tokens of conversation: fits a 4k-token context with tools and answer
SMALL_MAX_TOKENS = 256
SMALL_MAX_TURNS = 8
SMALL_SYSTEM_PROMPT = (
    "You complete tasks by calling tools. Call one tool at a time and read its result. When the task is "
    f"done, call {FINAL_ANSWER} with a short answer."
)


def _final_answer_tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": "Finish: call this once the task is done, with a short final answer.",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    }}


def _size(message: dict[str, Any]) -> int:
    return len(str(message.get("content") or "")) + len(str(message.get("tool_calls") or ""))


def fit_messages(messages: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The conversation to send: the system and task messages, then the latest turns that fit in
    ``limit`` characters. A turn (an assistant message and the tool results after it) is kept or
    dropped whole, so every tool result still follows its call; a marker says how much was cut.

    The cut is stable across turns, so a server's prompt cache (llama.cpp: 1.5 s for a cached
    1,300-token prompt, 32 s uncached) keeps hitting: when the history overflows, the oldest turns
    are dropped in one chunk, until what is left fits in half the room; then new turns are only
    appended, and the prompt sent next turn starts with the one sent this turn, until the room
    overflows again. The cut is replayed from the start of the history, so it is a function of the
    history alone (the policy keeps no state for it)."""
    head = 0
    while head < len(messages) and messages[head].get("role") in ("system", "user") and head < 2:
        head += 1
    if sum(_size(m) for m in messages) <= limit or len(messages) <= head + 1:
        return messages
    turns: list[list[dict[str, Any]]] = []
    for message in messages[head:]:
        if message.get("role") == "tool" and turns:
            turns[-1].append(message)
        else:
            turns.append([message])
    room = limit - sum(len(str(m.get("content") or "")) for m in messages[:head])
    costs = [sum(_size(m) for m in turn) for turn in turns]
    start, window = 0, 0  # the first kept turn, and the size of turns[start:i+1]
    for i, cost in enumerate(costs):
        window += cost
        if window > room:  # overflow: drop the oldest turns in one chunk, down to half the room
            while start < i and window > room // 2:
                window -= costs[start]
                start += 1
    if not start:
        return messages
    marker = {"role": "user", "content": f"[... {start} earlier turns cut to fit the model's context]"}
    return [*messages[:head], marker, *(m for turn in turns[start:] for m in turn)]


class LLMPolicy:
    """Drives an episode with a chat model's tool calls (``type: llm``)."""

    def __init__(
        self,
        model: str,
        temperature: Annotated[float, Bounds(low=0)] | None = 0.0,
        max_turns: Annotated[int, Bounds(low=1, high=10_000)] | None = None,
        system_prompt: str | None = None,
        api_base: str | None = None,
        api_key_env: str | None = None,
        max_tokens: Annotated[int, Bounds(low=1)] | None = None,
        parallel_tool_calls: bool | None = None,
        tool_choice: str | None = None,
        transport: str = "auto",
        cache: bool = True,
        params: dict[str, Any] | None = None,
        timeout: Annotated[float, Bounds(above=0)] | None = None,
        max_retries: Annotated[int, Bounds(low=0, high=100)] | None = None,
        rpm: Annotated[float, Bounds(above=0)] | None = None,
        prices: dict[str, Any] | None = None,
        max_observation_chars: Annotated[int, Bounds(low=1)] | None = 20_000,
        small_model: bool | None = None,
        context_chars: Annotated[int, Bounds(low=200)] | None = None,
        batch: bool | str | dict[str, Any] | None = None,
        run: Any = None,
        task: Task | None = None,
        pack: Pack | None = None,
        client: LLMClient | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise AgentsynthError("llm policy: 'model' must be a model name such as 'openai/gpt-4o-mini'")
        if max_turns is not None and max_turns < 1:
            raise AgentsynthError(f"llm policy: max_turns must be at least 1, got {max_turns}")
        from ..llm import BatchSettings, client_for, resolve_route

        resolve_route(model, api_base, transport)  # bad transport / missing api_base: fail at build time
        self.model, self.temperature = model, temperature
        is_local = model == "local" or model.startswith("local/")
        self.small_model = is_local if small_model is None else bool(small_model)
        if max_turns is None:  # a small model that never finishes should not loop for long
            max_turns = SMALL_MAX_TURNS if self.small_model else 20
        self.max_turns: int = max_turns
        default_prompt = SMALL_SYSTEM_PROMPT if self.small_model else DEFAULT_SYSTEM_PROMPT
        self.system_prompt = system_prompt if system_prompt is not None else (
            (pack.system_prompt if pack is not None and pack.system_prompt else None) or default_prompt
        )
        if self.small_model and max_tokens is None:
            max_tokens = SMALL_MAX_TOKENS
        self.api_base, self.api_key_env, self.max_tokens = api_base, api_key_env, max_tokens
        self.transport, self.cache = transport, cache
        self.context_chars = context_chars if context_chars is not None else (
            SMALL_CONTEXT_CHARS if self.small_model else None)
        if self.small_model and self.context_chars is not None:  # one result may use a third of the context
            cap = max(100, self.context_chars // 3)
            max_observation_chars = cap if max_observation_chars is None else min(max_observation_chars, cap)
        self.max_observation_chars = max_observation_chars
        # None: the client's setting (its own, or $AGENTSYNTH_LLM_BATCH); checked now, so a bad value
        # fails when the run is built, naming the key
        self.batch = BatchSettings.parse(batch, "llm policy: batch") if batch is not None else None
        self.extra: dict[str, Any] = dict(params or {})
        if parallel_tool_calls is not None:
            self.extra["parallel_tool_calls"] = parallel_tool_calls
        if tool_choice is not None:
            self.extra["tool_choice"] = tool_choice
        elif self.small_model:
            self.extra["tool_choice"] = "required"
        if is_local and timeout is None:  # a small model on a busy CPU: a timeout would only ask again
            timeout = LOCAL_TIMEOUT
        local = {"timeout": timeout, "max_retries": max_retries, "rpm": rpm, "prices": prices}
        options = {k: v for k, v in local.items() if v is not None}
        self.client = client if client is not None else client_for(run, **options)
        if prices:  # a policy's prices apply to the shared client too
            self.client.prices.update(prices)
        if is_local:  # an embedded model costs nothing (a USD budget still works with it)
            self.client.prices.setdefault(model, (0.0, 0.0))
        self.final_answer = FINAL_ANSWER
        self.messages: list[dict[str, Any]] | None = None
        self.turns = 0  # model calls made
        self.acts = 0  # act() calls (the kernel's turn index)
        self.pending: list[tuple[str, Observation | None]] = []  # last turn's calls: (id, own error or None)
        self.invalid_calls = 0
        self.cache_hits = 0
        self.retries = 0
        self.last_content = ""

    # --- conversation ---------------------------------------------------------------------------

    def _start(self, state: EpisodeState) -> list[dict[str, Any]]:
        traj = state.trajectory
        traj.system_prompt = self.system_prompt
        user = state.instruction
        first = traj.initial_observation
        if first and first != user:
            user = f"{user}\n\n{first}" if user else first
        messages = [{"role": "user", "content": user}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    def _tool_results(self, state: EpisodeState, turn: int) -> list[dict[str, Any]]:
        """Results of the calls made in ``turn``, in the order the model made them."""
        observed: dict[str, Observation] = {}
        for step in reversed(state.trajectory.steps):
            if step.turn != turn:
                if step.turn < turn:
                    break
                continue
            if isinstance(step.action, ToolCall) and step.observation is not None:
                observed.setdefault(step.action.id, step.observation)
        out = []
        for call_id, own in self.pending:
            obs = own or observed.get(call_id)
            text = observation_text(obs) if obs is not None else "error: this call was not executed"
            limit = self.max_observation_chars
            if limit is not None and len(text) > limit:
                text = f"{text[:limit]}\n[... {len(text) - limit} more characters cut]"
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        return out

    def _record(self, state: EpisodeState, rejected_now: int = 0) -> None:
        state.trajectory.metadata["llm"] = {
            "model": self.model, "turns": self.turns,
            # steps recorded so far, plus this turn's rejected calls (the kernel records them next)
            "invalid_tool_calls": sum(1 for s in state.trajectory.steps if s.invalid) + rejected_now,
            "cache_hits": self.cache_hits, "retries": self.retries,
        }

    # --- the policy -----------------------------------------------------------------------------

    async def act(self, state: EpisodeState) -> Turn:
        turn_index = self.acts
        self.acts += 1
        if self.messages is None:
            self.messages = self._start(state)
        else:
            self.messages.extend(self._tool_results(state, turn_index - 1))
            last = state.trajectory.steps[-1] if state.trajectory.steps else None
            if last is not None and isinstance(last.action, Answer) and last.observation is not None:
                # a multi-turn task: the simulated user answered the model's message
                self.messages.append({"role": "user", "content": last.observation.content})
        self.pending = []
        if self.turns >= self.max_turns:
            state.trajectory.metadata["stopped"] = "max_turns"
            self._record(state)
            return Turn([Answer(self.last_content)])
        self.turns += 1
        tools: list[Any] = list(state.tools or [])
        if self.small_model:
            names = {t.name for t in state.tools}
            while self.final_answer in names:  # the world has a tool of that name: ours steps aside
                self.final_answer = f"_{self.final_answer}"
            tools.append(_final_answer_tool(self.final_answer))
        messages = self.messages
        if self.context_chars is not None:
            messages = fit_messages(self.messages, self.context_chars)
        response = await self.client.complete(
            messages, model=self.model, tools=tools or None, temperature=self.temperature,
            max_tokens=self.max_tokens, api_base=self.api_base, api_key_env=self.api_key_env,
            transport=self.transport, cache=self.cache, cache_salt=f"{state.task.id}:{state.seed}",
            batch=self.batch, **self.extra,  # None: the client's own batch setting
        )
        if response.cached:
            self.cache_hits += 1
        self.retries += max(0, response.attempts - 1) if not response.cached else 0
        self.last_content = response.content
        if not response.tool_calls:
            self.messages.append(response.message())
            self._record(state)
            return Turn([Answer(response.content)], usage=response.usage)

        if self.small_model and response.tool_calls[0].name == self.final_answer:
            return self._final(state, response)
        specs = {t.name: t for t in state.tools}
        actions: list[ToolCall] = []
        rejected: dict[int, Observation] = {}
        wire_calls = []
        seen: set[str] = set()
        for i, call in enumerate(response.tool_calls):
            if self.small_model and call.name == self.final_answer:
                break  # an answer after other calls in one turn: the calls run, the model answers next turn
            call_id = call.id if call.id and call.id not in seen else f"call_{turn_index}_{i}"
            seen.add(call_id)
            wire_calls.append({"id": call_id, "type": "function",
                               "function": {"name": call.name, "arguments": call.arguments}})
            arguments: Any = {}
            try:
                arguments = parse_arguments(call.arguments, call_id=call_id, name=call.name)
                spec = specs.get(call.name)
                if spec is not None:  # unknown names go to the kernel, which answers with an error
                    problems = validate_arguments(spec.parameters, arguments)
                    if problems:
                        raise InvalidToolCall(f"invalid arguments for {call.name!r}: " + "; ".join(problems),
                                              call_id=call_id, name=call.name, raw_arguments=call.arguments,
                                              reason="schema")
            except InvalidToolCall as exc:
                # Not executed: the kernel records it (in order, invalid=True) and it counts in max_steps.
                self.invalid_calls += 1
                obs = Observation(f"error: {exc}", error=True,
                                  data={"reason": exc.reason, "raw_arguments": call.arguments})
                rejected[len(actions)] = obs
                actions.append(ToolCall(call.name, arguments if exc.reason == "schema" else {}, id=call_id))
                self.pending.append((call_id, obs))
                continue
            actions.append(ToolCall(call.name, arguments, id=call_id))
            self.pending.append((call_id, None))
        # llama.cpp's chat templates need a string here; OpenAI accepts both
        content = response.content or ("" if self.small_model else None)
        assistant: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": wire_calls}
        self.messages.append(assistant)
        self._record(state, len(rejected))
        return Turn(list(actions), usage=response.usage, thought=response.content or "", rejected=rejected)

    def _final(self, state: EpisodeState, response: Any) -> Turn:
        """The model called ``final_answer``: the episode ends with its answer (not a world step)."""
        call = response.tool_calls[0]
        try:
            answer = parse_arguments(call.arguments, call_id=call.id, name=call.name).get("answer", "")
        except InvalidToolCall:
            answer = call.arguments
        answer = answer if isinstance(answer, str) else str(answer)
        self.messages.append({"role": "assistant", "content": answer})  # type: ignore[union-attr]
        self.last_content = answer
        self._record(state)
        return Turn([Answer(answer)], usage=response.usage, thought=response.content or "")
