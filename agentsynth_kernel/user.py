"""A simulated user for multi-turn tasks (τ²-bench style).

A task with ``user:`` is a conversation, not a one-shot instruction: the task's ``instruction`` is
the user's opening message, every Answer of the agent goes to the user, and the user's reply comes
back as that step's observation, until the user ends the talk (its ``stop`` word, the end of its
script, or ``max_turns``). The whole exchange happens in one world, and the checkers grade its end
state after the last turn.

The user is any policy (an ``llm`` with its own model, a ``callable``) or a ``script`` of turns. Its
``instructions`` (what it knows and wants) are never shown to the agent: the agent's policy and
state see the task without them. In dual control (``tools:``) some of the world's tools belong to
the user alone: the agent cannot call them, and must talk the user through using them.

A user that breaks its own rules (``checks:``, checkers run on the user's side of the talk), fails,
or spends more than its ``budget`` ends the episode as an error of kind ``user``: it is the
simulator's failure, not the agent's, and reports give pass rates with and without those. A rule
broken in a talk the agent cut short (``max_steps`` before the user ended it) fails the agent
instead: going quiet must not turn a failure into the simulator's, out of pass rates and rewards.
"""

from __future__ import annotations

import inspect
import random
from typing import TYPE_CHECKING, Any

import attrs

from .components import EpisodeState, normalize_actions
from .records import Answer, Observation, Step, ToolSpec, Trajectory, Usage

if TYPE_CHECKING:
    from .spec import Task, UserSpec

USER_SYSTEM_PROMPT = (
    "You play a user who talks to an assistant, following the instructions in the first message. Write "
    "only what the user says next, briefly, in the user's voice. Give a piece of information only when the "
    "assistant asks for it, and never make up information the instructions do not give. When your goal "
    "is reached, or cannot be reached, end the conversation by writing {stop}."
)

MAX_USER_CALLS_PER_REPLY = 10  # dual control: tool calls a user may make before it must say something


class UserFailed(Exception):
    """The simulated user broke its instructions, failed or overspent: the episode is the simulator's
    failure (``error_kind: user``), not the agent's."""

    agentsynth_error_kind = "user"


def agent_view(task: Task) -> Task:
    """The task as the agent may see it: without the user's instructions."""
    return attrs.evolve(task, user=None) if task.user is not None else task


def user_instruction(spec: UserSpec, opening: str) -> str:
    """The first thing the user's policy reads (before the agent's first message)."""
    parts = [spec.instructions.strip()] if spec.instructions.strip() else []
    if opening:
        parts.append(f"You opened the conversation with: {opening}")
    parts.append("The assistant's reply follows.")
    return "\n\n".join(parts)


class SimulatedUser:
    """The user's side of one conversation: its policy, its own trajectory and its turn count.

    The loop that owns the world (the episode, an RL env) hands :meth:`reply` the ways to call the
    policy and to step the world, so a hanging or failing simulator times out or fails there like
    any other component.
    """

    def __init__(self, spec: UserSpec, task: Task, policy: Any, tools: list[ToolSpec], seed: int) -> None:
        self.spec, self.policy, self.tools = spec, policy, tools
        self._names = {t.name for t in tools}
        self.trajectory = Trajectory(task.id, user_instruction(spec, task.instruction), tools=list(tools))
        self.trajectory.system_prompt = USER_SYSTEM_PROMPT.format(stop=spec.stop)
        self.usage = Usage()  # what the user spent in this episode
        self._unreported = Usage()
        self.turns = 0
        self.done = False
        self._task = attrs.evolve(task, instruction=self.trajectory.instruction, user=None)
        self._rng = random.Random(seed ^ 0x5EED)
        self._seed = seed

    def _state(self, observation: Observation) -> EpisodeState:
        return EpisodeState(self._task, self.tools, self.trajectory, observation, self._seed, self._rng,
                            MAX_USER_CALLS_PER_REPLY)

    async def reply(self, message: str, call: Any, step_world: Any) -> Observation:
        """The user's answer to the agent's ``message``: an observation whose ``done`` ends the talk.

        ``call(fn, *args)`` runs a policy method as the episode does; ``step_world(action)`` runs
        one of the user's own tool calls in the world and returns its observation.
        """
        if self.done:
            return Observation("", data={"from": "user"}, done=True)
        if self.turns >= self.spec.max_turns:
            self.done = True
            self.trajectory.metadata["stopped"] = "max_turns"
            return Observation("", data={"from": "user", "stopped": "max_turns"}, done=True)
        heard = Observation(message, data={"from": "assistant"})
        if not self.trajectory.steps:
            self.trajectory.initial_observation = message
        else:
            self.trajectory.steps[-1].observation = heard  # the agent's answer to the user's last message
        self.turns += 1
        calls = 0
        while True:
            turn = normalize_actions(await call(self.policy.act, self._state(heard)))
            if turn.usage is not None:
                self.usage, self._unreported = self.usage + turn.usage, self._unreported + turn.usage
                self._check_budget()
            for action in turn.actions:
                if isinstance(action, Answer):
                    return self._said(action.content, turn.usage)
                calls += 1
                if calls > MAX_USER_CALLS_PER_REPLY:
                    raise UserFailed(f"the simulated user made more than {MAX_USER_CALLS_PER_REPLY} tool calls "
                                     "without saying anything")
                unknown = action.name not in self._names
                if unknown:
                    obs = Observation(f"error: unknown tool {action.name!r}; the user's tools: "
                                      f"{', '.join(sorted(self._names)) or 'none'}", error=True)
                else:
                    obs = await step_world(action)
                self.trajectory.steps.append(Step(action, obs, self.turns, invalid=unknown))
                heard = obs

    def _said(self, content: str, usage: Usage | None) -> Observation:
        stop = self.spec.stop
        ended = bool(stop) and stop in content
        text = content.replace(stop, "").strip() if ended else content
        self.trajectory.steps.append(Step(Answer(content), None, self.turns, usage=usage))
        if not ended and not text.strip():
            raise UserFailed("the simulated user sent an empty message")
        if ended:
            self.done = True
            self.trajectory.metadata["stopped"] = "user"
        return Observation(text, data={"from": "user"}, done=ended)

    def take_usage(self) -> Usage:
        """What the user spent since the last call: the episode adds it to its own usage once."""
        spent, self._unreported = self._unreported, Usage()
        return spent

    def _check_budget(self) -> None:
        budget = self.spec.budget
        over = []
        if budget.usd is not None and (self.usage.cost_usd or 0.0) > budget.usd:
            over.append(f"${self.usage.cost_usd:.4f} of its ${budget.usd:g}")
        if budget.tokens is not None and self.usage.prompt_tokens + self.usage.completion_tokens > budget.tokens:
            over.append(f"{self.usage.prompt_tokens + self.usage.completion_tokens} tokens of its {budget.tokens}")
        if over:
            raise UserFailed("the simulated user spent more than its budget: " + ", ".join(over))


def user_policy_spec(spec: UserSpec, host: Any) -> Any:
    """The policy that plays the user: its ``script`` as a scripted policy (that stops after the last
    turn), or its ``policy`` with the simulator's system prompt unless it sets its own."""
    from .spec import ComponentSpec

    if spec.script is not None:
        return ComponentSpec("scripted", {"actions": [{"answer": t} for t in spec.script] + [{"answer": spec.stop}]})
    assert spec.policy is not None  # the loader requires one of the two
    params = dict(spec.policy.params)
    if "system_prompt" not in params and accepts_parameter(host, "policy", spec.policy, "system_prompt"):
        params["system_prompt"] = USER_SYSTEM_PROMPT.format(stop=spec.stop)
    return ComponentSpec(spec.policy.type, params)


def split_tools(spec: UserSpec, tools: list[ToolSpec]) -> tuple[list[ToolSpec], list[ToolSpec]]:
    """(the user's own tools, the agent's): dual control keeps the user's tools from the agent."""
    mine = set(spec.tools)
    missing = sorted(mine - {t.name for t in tools})
    if missing:
        raise UserFailed(f"user.tools names {missing}, which the world does not offer")
    return [t for t in tools if t.name in mine], [t for t in tools if t.name not in mine]


def accepts_parameter(host: Any, kind: str, cspec: Any, name: str) -> bool:
    """Whether the registered component ``cspec.type`` of ``kind`` takes a parameter ``name``
    (a field of its spec class, a parameter of its factory, or through ``**kwargs``)."""
    reg = host.get(kind, cspec.type)
    if reg.spec_cls is not None:
        return name in attrs.fields_dict(reg.spec_cls)
    try:
        params = inspect.signature(reg.factory).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
