"""Environment-agnostic components the generators build tasks from.

- ``state_probe`` (checker): runs read-only *probe* tool calls on the world's end state and
  compares what they return with what they returned at the end of the verified chain. It reads
  the world through the environment's own tools, so it works with any environment.
- ``synth_fingerprint`` (checker, always passes): a digest of the end state, for consensus
  between rollouts. It uses ``env.state_fingerprint()`` when the environment has one, else
  ``env.changes()`` (an environment that lists its row-level changes, like ``sql``), else the
  given ``probes``; ``data`` is ``None`` when none applies.
- ``state_digest`` (checker): the end state's fingerprint must equal the verified one (strict).
- ``synth_replay`` (policy): plays a fixed list of actions (``{"tool", "arguments"}`` / ``{"answer"}``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

from agentsynth_kernel import Answer, EpisodeState, Observation, ToolCall, Trajectory, Turn, Verdict


def _probe_calls(probes: list[dict[str, Any]]) -> list[ToolCall]:
    calls = []
    for i, probe in enumerate(probes or []):
        if not isinstance(probe, dict) or not isinstance(probe.get("tool"), str):
            raise ValueError(f"probes[{i}]: expected {{tool: NAME, arguments: {{...}}}}, got {probe!r}")
        args = probe.get("arguments", {})
        if not isinstance(args, dict):
            raise ValueError(f"probes[{i}].arguments: expected a mapping")
        calls.append(ToolCall(probe["tool"], args, id=f"probe_{i}"))
    return calls


def _obs(value: Any) -> Observation:
    return value if isinstance(value, Observation) else Observation(str(value))


def _run_probes(env: Any, calls: list[ToolCall]) -> Any:
    """Observations of ``calls`` on ``env``: a list, or a coroutine for an async environment
    (the kernel awaits a checker's awaitable result on the event loop)."""
    if inspect.iscoroutinefunction(getattr(env, "step", None)):
        async def run() -> list[Observation]:
            return [_obs(await env.step(c)) for c in calls]
        return run()
    return [_obs(env.step(c)) for c in calls]


def _then(value: Any, fn: Any) -> Any:
    if inspect.isawaitable(value):
        async def chained() -> Any:
            return fn(await value)
        return chained()
    return fn(value)


class StateProbe:
    """Passes when every probe returns what it returned at the verified end state."""

    world_state = True

    def __init__(self, probes: list[dict[str, Any]]) -> None:
        if not probes:
            raise ValueError("state_probe needs at least one probe")
        self.calls = _probe_calls(probes)
        self.expect = []
        for i, probe in enumerate(probes):
            exp = probe.get("expect")
            if not isinstance(exp, dict) or not isinstance(exp.get("content"), str):
                raise ValueError(f"probes[{i}].expect: expected {{content: TEXT, error: BOOL}}")
            self.expect.append((exp["content"], bool(exp.get("error", False))))

    def check(self, env: Any, trajectory: Trajectory) -> Any:
        return _then(_run_probes(env, self.calls), self._verdict)

    def _verdict(self, observations: list[Observation]) -> Verdict:
        for i, (obs, (content, error)) in enumerate(zip(observations, self.expect, strict=True)):
            if (obs.content, obs.error) != (content, error):
                got = obs.content if len(obs.content) < 200 else obs.content[:199] + "…"
                want = content if len(content) < 200 else content[:199] + "…"
                return Verdict("state_probe", False, 0.0,
                               f"probe {i} ({self.calls[i].name} {json.dumps(self.calls[i].arguments)}): "
                               f"got {got!r}, expected {want!r}")
        return Verdict("state_probe", True, 1.0, f"{len(self.calls)} probe(s) match the verified end state")


class RecordProbes:
    """Always passes; ``data`` holds what each probe returns on the end state (to build a state_probe)."""

    world_state = True

    def __init__(self, probes: list[dict[str, Any]]) -> None:
        self.calls = _probe_calls(probes)

    def check(self, env: Any, trajectory: Trajectory) -> Any:
        return _then(_run_probes(env, self.calls), lambda obs: Verdict(
            "synth_record_probes", True, 1.0, f"{len(obs)} probe(s) recorded",
            data=[{"content": o.content, "error": o.error} for o in obs]))


def _digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


class Fingerprint:
    """Always passes; ``data`` is a digest of the end state (or None when it cannot be read)."""

    world_state = False

    def __init__(self, probes: list[dict[str, Any]] | None = None) -> None:
        self.calls = _probe_calls(probes or [])

    def check(self, env: Any, trajectory: Trajectory) -> Any:
        fp = getattr(env, "state_fingerprint", None)
        if callable(fp):
            return _then(fp(), lambda v: Verdict("synth_fingerprint", True, 1.0, "state_fingerprint()", data=_digest(v)))
        changes = getattr(env, "changes", None)
        if callable(changes):
            def from_changes(found: Any) -> Verdict:
                rows = sorted(json.dumps(c.to_dict() if hasattr(c, "to_dict") else c, sort_keys=True, default=str)
                              for c in found)
                return Verdict("synth_fingerprint", True, 1.0, f"{len(rows)} change(s)", data=_digest(rows))
            return _then(changes(), from_changes)
        if self.calls:
            return _then(_run_probes(env, self.calls), lambda obs: Verdict(
                "synth_fingerprint", True, 1.0, "probes", data=_digest([(o.content, o.error) for o in obs])))
        return Verdict("synth_fingerprint", True, 1.0, "the environment exposes no state to fingerprint", data=None)


class StateDigest(Fingerprint):
    """Passes when the end state's digest (see :class:`Fingerprint`) equals ``expect``: the whole
    end state must be the verified one (every change the chain made, and no other)."""

    world_state = True

    def __init__(self, expect: str, probes: list[dict[str, Any]] | None = None) -> None:
        super().__init__(probes)
        self.expect = expect

    def check(self, env: Any, trajectory: Trajectory) -> Any:
        def verdict(v: Verdict) -> Verdict:
            ok = v.data is not None and v.data == self.expect
            detail = "the end state is the verified one" if ok else (
                f"the end state differs from the verified one ({v.detail})" if v.data is not None
                else "the environment exposes no state to compare")
            return Verdict("state_digest", ok, float(ok), detail, data=v.data)

        return _then(super().check(env, trajectory), verdict)


class ReplayPolicy:
    """Plays ``actions`` in order, then answers (``{"tool", "arguments"}`` / ``{"answer"}`` dicts)."""

    def __init__(self, actions: list[dict[str, Any]]) -> None:
        self.actions: list[Any] = []
        for i, a in enumerate(actions or []):
            if isinstance(a, dict) and "answer" in a:
                self.actions.append(Answer(str(a["answer"])))
            elif isinstance(a, dict) and isinstance(a.get("tool"), str):
                self.actions.append(ToolCall(a["tool"], dict(a.get("arguments") or {}), id=f"call_{i}"))
            else:
                raise ValueError(f"actions[{i}]: expected {{tool, arguments}} or {{answer}}, got {a!r}")
        if not self.actions or not isinstance(self.actions[-1], Answer):
            self.actions.append(Answer(""))
        self.position = 0

    def act(self, state: EpisodeState) -> Turn:
        action = self.actions[min(self.position, len(self.actions) - 1)]
        self.position += 1
        return Turn([action])
