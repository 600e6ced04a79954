"""What every exporter shares: rewards, record selection, canary strings, text for dedup."""

from __future__ import annotations

import re
import uuid
from functools import lru_cache
from typing import Any

from agentsynth_kernel import AgentsynthError, Answer, EpisodeResult, ToolCall, Trajectory, to_json

CANARY_PREFIX = "AGENTSYNTH CANARY GUID "
CANARY_NAMESPACE = uuid.UUID("6f1c1f0e-1b7a-4a53-9d0e-6167656e7473")
CANARY_MODES = ("auto", "always", "never")
FILTERS = ("passed", "all")

_WORD = re.compile(r"\w+")


def reward(result: EpisodeResult) -> float:
    """A record's reward: a judge's ``reward`` dimension, a ``reward`` score, else the outcome (1/0)."""
    scores = result.scores
    for key in ("judge.reward", "reward"):
        value = scores.get(key)
        if value is not None:
            return float(value)
    return 1.0 if result.status == "passed" else 0.0


def canary_string(result: EpisodeResult) -> str:
    """The canary of the pack a record came from: stable across runs of the same pack version.

    ``CANARY_PREFIX`` + a UUID5 of the pack content hash (or pack id), in the spirit of the
    BIG-bench canary: if this string ever shows up in a model's training data or output,
    the export leaked into a training set.
    """
    prov = result.provenance or {}
    return _canary(str(prov.get("pack_hash") or prov.get("pack") or "agentsynth"))


def pack_canary(pack: Any) -> str:
    """The canary that exports put in the records of a loaded pack's test-split tasks (the same
    string :func:`canary_string` derives from a record's provenance)."""
    return _canary(str(pack.content_hash or pack.id or "agentsynth"))


@lru_cache(maxsize=256)
def _canary(basis: str) -> str:
    return CANARY_PREFIX + str(uuid.uuid5(CANARY_NAMESPACE, basis))


def wants_canary(mode: str, result: EpisodeResult) -> bool:
    """``auto``: records of test-split (benchmark) tasks; ``always``; ``never``."""
    if mode == "always":
        return True
    if mode == "never":
        return False
    return result.split == "test"


def check_choice(owner: str, key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise AgentsynthError(f"{owner}: {key}: expected one of {', '.join(choices)}, got {value!r}")


def normalize(text: str) -> str:
    """Lowercase words joined by single spaces (punctuation and whitespace differences vanish)."""
    return " ".join(_WORD.findall(text.lower()))


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def trajectory_text(traj: Trajectory, *, scope: str = "trajectory") -> str:
    """The text dedup and decontamination look at.

    ``instruction``: the task text only. ``trajectory``: the task text, every tool call (name
    and arguments), every observation and the answer.
    """
    if scope == "instruction":
        return traj.instruction
    parts = [traj.instruction]
    if traj.initial_observation and traj.initial_observation != traj.instruction:
        parts.append(traj.initial_observation)
    for step in traj.steps:
        action = step.action
        if isinstance(action, ToolCall):
            parts.append(action.name)
            parts.append(to_json(action.arguments).decode())
        elif isinstance(action, Answer):
            parts.append(action.content)
        if step.observation is not None and step.observation.content:
            parts.append(step.observation.content)
    return "\n".join(parts)


def result_text(result: EpisodeResult, *, scope: str = "trajectory") -> str:
    if result.trajectory is None:
        return result.task_id if scope == "instruction" else f"{result.task_id}\n{result.error}"
    return trajectory_text(result.trajectory, scope=scope)
