"""Redaction of personal data and secrets in trajectories, with counts per kind.

Kinds (placeholders): ``email`` ([EMAIL]), ``api_key`` ([API_KEY]: ``sk-...``, ``AKIA...``,
``ghp_/gho_/ghs_/ghu_/ghr_...``, ``xox[bp]-`` Slack tokens), ``bearer`` (``Bearer [TOKEN]``),
``phone`` ([PHONE]) and ``ip`` ([IP], IPv4 and IPv6, validated with :mod:`ipaddress`).

Every string of a trajectory is redacted: instruction, system prompt, initial observation,
tool-call arguments (recursively), observations, answers, thoughts and metadata.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from typing import Any

from agentsynth_kernel import Answer, Observation, Step, ToolCall, Trajectory

KINDS = ("email", "api_key", "bearer", "phone", "ip")

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_API_KEY = re.compile(
    r"\b(?:sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{16,}"  # OpenAI / Anthropic (sk-proj-..., sk-ant-...)
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{40,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,})"  # Slack
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*")
# Phone numbers: an international "+CC ..." form, or a separated/parenthesised NANP-like form.
# Bare digit runs are not phone numbers (ids, timestamps, amounts).
_PHONE = re.compile(
    r"(?<![\w+.-])(?:"
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,4}(?:[\s.-]\d{2,4}){1,4}"
    r"|\(\d{3}\)\s?\d{3}[\s.-]\d{4}"
    r"|\d{3}[.-]\d{3}[.-]\d{4}"
    r"|\d{3}\s\d{3}\s\d{4}"
    r")(?![\w.-]?\d)"
)
_IPV4 = re.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.]?\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")

PLACEHOLDERS = {"email": "[EMAIL]", "api_key": "[API_KEY]", "phone": "[PHONE]", "ip": "[IP]"}


def _ipv6_ok(text: str) -> bool:
    if text.count(":") < 2 or sum(c.isdigit() for c in text) == 0 and len(text) < 6:
        return False
    groups = [g for g in text.split(":") if g]
    if len(groups) < 3 and text not in ("::1",):
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


class Redactor:
    """Redacts strings and counts what it removed (``counts`` by kind, cumulative)."""

    def __init__(self, kinds: tuple[str, ...] | list[str] = KINDS) -> None:
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown redaction kinds: {', '.join(sorted(unknown))} (known: {', '.join(KINDS)})")
        self.kinds = tuple(kinds)
        self.counts: Counter[str] = Counter()

    def text(self, value: str) -> str:
        if not value:
            return value
        counts = self.counts
        kinds = self.kinds

        def sub(kind: str, pattern: re.Pattern[str], text: str) -> str:
            new, n = pattern.subn(PLACEHOLDERS[kind], text)
            if n:
                counts[kind] += n
            return new

        if "api_key" in kinds:
            value = sub("api_key", _API_KEY, value)
        if "bearer" in kinds:
            value, n = _BEARER.subn(lambda m: f"{m.group(1)} [TOKEN]", value)
            if n:
                counts["bearer"] += n
        if "email" in kinds and "@" in value:
            value = sub("email", _EMAIL, value)
        if "ip" in kinds:
            if "." in value:
                value = sub("ip", _IPV4, value)
            if "::" in value or value.count(":") >= 2:

                def v6(m: re.Match[str]) -> str:
                    if _ipv6_ok(m.group(0)):
                        counts["ip"] += 1
                        return "[IP]"
                    return m.group(0)

                value = _IPV6.sub(v6, value)
        if "phone" in kinds:
            value = sub("phone", _PHONE, value)
        return value

    def value(self, value: Any) -> Any:
        """Redact every string inside JSON-like data (dict keys are kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def trajectory(self, traj: Trajectory) -> Trajectory:
        """A redacted copy of a trajectory."""
        steps = []
        for step in traj.steps:
            action = step.action
            if isinstance(action, ToolCall):
                action = ToolCall(action.name, self.value(action.arguments), action.id)
            elif isinstance(action, Answer):
                action = Answer(self.text(action.content))
            obs = step.observation
            if obs is not None:
                obs = Observation(self.text(obs.content), obs.error, self.value(obs.data), obs.done)
            steps.append(
                Step(action, obs, step.turn, step.duration_s, self.text(step.thought), step.usage, step.invalid)
            )
        return Trajectory(
            task_id=traj.task_id,
            instruction=self.text(traj.instruction),
            steps=steps,
            tools=traj.tools,
            initial_observation=self.text(traj.initial_observation),
            system_prompt=self.text(traj.system_prompt),
            metadata=self.value(traj.metadata),
            schema_version=traj.schema_version,
        )

    def report(self) -> dict[str, int]:
        return {kind: self.counts.get(kind, 0) for kind in self.kinds}
