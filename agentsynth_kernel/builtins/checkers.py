"""Built-in generic checkers. They read the trajectory; world-state checkers come from plugins.

They never block, so the engine runs them on the event loop (``runs_inline``).
"""

from __future__ import annotations

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
    default) and matches ``regex`` if given. Use next to a world-state checker, not instead of one."""

    def __init__(self, text: str | list[str] = (), regex: str | None = None, case_sensitive: bool = False) -> None:
        self.texts = [text] if isinstance(text, str) else list(text)
        self.regex = re.compile(regex, 0 if case_sensitive else re.IGNORECASE) if regex else None
        self.case_sensitive = case_sensitive
        if not self.texts and self.regex is None:
            raise ValueError("answer_contains needs 'text' or 'regex'")

    @runs_inline
    def check(self, env: Any, trajectory: Trajectory) -> Verdict:
        answer = trajectory.final_answer or ""
        hay = answer if self.case_sensitive else answer.lower()
        missing = [t for t in self.texts if (t if self.case_sensitive else t.lower()) not in hay]
        regex_ok = self.regex is None or bool(self.regex.search(answer))
        ok = not missing and regex_ok
        detail = "answer matches" if ok else (
            f"answer lacks {missing!r}" if missing else f"answer does not match /{self.regex.pattern}/"  # type: ignore[union-attr]
        )
        return Verdict("answer_contains", ok, float(ok), detail)
