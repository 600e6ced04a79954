"""Built-in generic checkers. They read the trajectory; world-state checkers come from plugins.

They never block, so the engine runs them on the event loop (``runs_inline``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..components import runs_inline
from ..records import Trajectory, Verdict


class CalledTool:
    """Passes when the agent called ``tool`` (at least ``min_times``; at most ``max_times``),
    optionally with ``arguments`` that include the given key/values."""

    def __init__(self, tool: str, arguments: dict[str, Any] | None = None, min_times: int = 1,
                 max_times: int | None = None) -> None:
        self.tool, self.arguments, self.min_times, self.max_times = tool, arguments or {}, min_times, max_times

    @runs_inline
    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        calls = [
            c for c in trajectory.tool_calls
            if c.name == self.tool and all(c.arguments.get(k) == v for k, v in self.arguments.items())
        ]
        n = len(calls)
        ok = n >= self.min_times and (self.max_times is None or n <= self.max_times)
        bounds = f">= {self.min_times}" + (f" and <= {self.max_times}" if self.max_times is not None else "")
        what = f"{self.tool}({self.arguments})" if self.arguments else self.tool
        return Verdict("called_tool", ok, float(ok), f"{what} called {n} time(s), expected {bounds}")


class AnswerContains:
    """Passes when the final answer contains every string of ``text`` (case-insensitive by
    default) and matches ``regex`` if given. Use next to a world-state checker, not instead of one.

    Against stuffed answers (every candidate listed at once): ``reject`` is text or regexes that
    must not appear (e.g. ``'\\b(done|cancelled)\\b'`` on a task that must be refused), and
    ``max_chars`` caps the answer's length."""

    def __init__(self, text: str | list[str] | tuple[str, ...] = (), regex: str | None = None,
                 case_sensitive: bool = False, reject: str | list[str] | tuple[str, ...] = (),
                 max_chars: int | None = None) -> None:
        self.texts = [text] if isinstance(text, str) else list(text)
        flags = 0 if case_sensitive else re.IGNORECASE
        self.regex = re.compile(regex, flags) if regex else None
        self.rejects = [re.compile(r, flags) for r in ([reject] if isinstance(reject, str) else list(reject))]
        self.case_sensitive = case_sensitive
        if max_chars is not None and max_chars < 1:
            raise ValueError("answer_contains: max_chars must be at least 1")
        self.max_chars = max_chars
        if not self.texts and self.regex is None:
            raise ValueError("answer_contains needs 'text' or 'regex'")

    @runs_inline
    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        answer = trajectory.final_answer or ""
        if self.max_chars is not None and len(answer) > self.max_chars:
            return Verdict("answer_contains", False, 0.0,
                           f"answer is {len(answer)} characters long, more than max_chars={self.max_chars}")
        rejected = next((r.pattern for r in self.rejects if r.search(answer)), None)
        if rejected is not None:
            return Verdict("answer_contains", False, 0.0, f"answer matches the rejected pattern /{rejected}/")
        hay = answer if self.case_sensitive else answer.lower()
        missing = [t for t in self.texts if (t if self.case_sensitive else t.lower()) not in hay]
        regex_ok = self.regex is None or bool(self.regex.search(answer))
        ok = not missing and regex_ok
        detail = "answer matches" if ok else (
            f"answer lacks {missing!r}" if missing else f"answer does not match /{self.regex.pattern}/"  # type: ignore[union-attr]
        )
        return Verdict("answer_contains", ok, float(ok), detail)


_NUMBER = re.compile(r"(?<![\w.\-])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text`` (``1,299.50`` is one number; ``HAT-01`` or ``v2`` are none)."""
    return [float(m.group().replace(",", "")) for m in _NUMBER.finditer(text)]


class AnswerNumber:
    """Passes when the final answer states exactly one number besides those in the instruction,
    and it equals ``value`` (within ``tolerance``). An answer listing several candidates fails,
    so a policy cannot farm a numeric question by answering every number at once."""

    def __init__(self, value: float, tolerance: float = 0.0) -> None:
        if not math.isfinite(value) or not math.isfinite(tolerance) or tolerance < 0:
            raise ValueError("answer_number: value and tolerance must be finite numbers, tolerance >= 0")
        self.value, self.tolerance = float(value), float(tolerance)

    @runs_inline
    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        given = set(numbers_in(trajectory.instruction or ""))
        stated = sorted({n for n in numbers_in(trajectory.final_answer or "") if n not in given})
        if not stated:
            return Verdict("answer_number", False, 0.0, f"the answer states no number (expected {self.value:g})")
        if len(stated) > 1:
            shown = ", ".join(f"{n:g}" for n in stated[:8]) + (" ..." if len(stated) > 8 else "")
            return Verdict("answer_number", False, 0.0, f"the answer states {len(stated)} numbers ({shown}); "
                           f"expected exactly one: {self.value:g}")
        ok = abs(stated[0] - self.value) <= self.tolerance
        return Verdict("answer_number", ok, float(ok),
                       f"the answer states {stated[0]:g}" + ("" if ok else f", expected {self.value:g}"))


class Said:
    """Checks what was said over a whole conversation, not just the last answer: every message of
    the trajectory (the agent's messages to the user; on a simulated user's side, the user's).

    Passes when the messages together contain every string of ``text`` and one matches ``regex``,
    and none matches a ``reject`` pattern or is longer than ``max_chars`` (against a dump of
    everything the agent could read). With ``before: TOOL`` only the messages sent before the first
    call of that tool count: "the agent asked for confirmation before it refunded"; add
    ``confirmed: REGEX`` and the last message before that call must match ``regex`` and the user's
    reply to it must match ``confirmed`` ("... and the user said yes to exactly that, before it acted")."""

    def __init__(self, text: str | list[str] | tuple[str, ...] = (), regex: str | None = None,
                 reject: str | list[str] | tuple[str, ...] = (), before: str | None = None,
                 case_sensitive: bool = False, max_chars: int | None = None, confirmed: str | None = None) -> None:
        self.texts = [text] if isinstance(text, str) else list(text)
        flags = 0 if case_sensitive else re.IGNORECASE
        self.regex = re.compile(regex, flags) if regex else None
        self.rejects = [re.compile(r, flags) for r in ([reject] if isinstance(reject, str) else list(reject))]
        self.before, self.case_sensitive = before, case_sensitive
        if max_chars is not None and max_chars < 1:
            raise ValueError("said: max_chars must be at least 1")
        self.max_chars = max_chars
        self.confirmed = re.compile(confirmed, flags) if confirmed else None
        if self.confirmed is not None and before is None:
            raise ValueError("said: 'confirmed' needs 'before' (the tool call the user must have agreed to)")
        if not self.texts and self.regex is None and not self.rejects:
            raise ValueError("said needs 'text', 'regex' or 'reject'")

    @runs_inline
    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        messages: list[str] = []
        last_reply: str | None = None
        for step in trajectory.steps:
            if self.before is not None and getattr(step.action, "name", None) == self.before:
                break
            content = getattr(step.action, "content", None)
            if isinstance(content, str) and not hasattr(step.action, "name"):
                messages.append(content)
                last_reply = step.observation.content if step.observation is not None else None
        where = f" before the first {self.before} call" if self.before else ""
        long = next((m for m in messages if self.max_chars is not None and len(m) > self.max_chars), None)
        if long is not None:
            return Verdict("said", False, 0.0, f"a message{where} is {len(long)} characters long, more than "
                           f"max_chars={self.max_chars}")
        for pattern in self.rejects:
            hit = next((m for m in messages if pattern.search(m)), None)
            if hit is not None:
                return Verdict("said", False, 0.0, f"a message{where} matches the rejected pattern /{pattern.pattern}/")
        hay = "\n".join(messages)
        hay = hay if self.case_sensitive else hay.lower()
        missing = [t for t in self.texts if (t if self.case_sensitive else t.lower()) not in hay]
        if missing:
            return Verdict("said", False, 0.0, f"no message{where} says {missing!r}")
        if self.regex is not None and not any(self.regex.search(m) for m in messages):
            return Verdict("said", False, 0.0, f"no message{where} matches /{self.regex.pattern}/")
        if self.confirmed is not None:
            if not messages:
                return Verdict("said", False, 0.0, f"no message{where}: nobody agreed to it")
            if self.regex is not None and not self.regex.search(messages[-1]):
                return Verdict("said", False, 0.0, f"the last message{where} does not ask (/{self.regex.pattern}/)")
            if last_reply is None or not self.confirmed.search(last_reply):
                return Verdict("said", False, 0.0, f"the reply to the last message{where} does not agree "
                               f"(/{self.confirmed.pattern}/): {last_reply!r}")
        return Verdict("said", True, 1.0, f"{len(messages)} message(s){where} checked")
