"""Agents that try to pass the heuristic judge by parroting the task's instruction instead of doing it.

Every answer is made from the instruction a task gives (never picked by hand): restated verbatim,
with its sentences shuffled, reworded as a report ("Mark it as shipped." -> "I marked it as shipped."),
with "Done:" in front; said with no tool call at all, or after calls that cannot change the world
(a read-only query, a SELECT sent to the write tool, a write that touches no row).
"""

from __future__ import annotations

import re
from typing import Any

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_IRREGULAR = {"set": "set", "put": "put", "send": "sent", "pay": "paid", "take": "took", "give": "gave",
              "make": "made", "write": "wrote", "is": "was", "are": "were", "have": "had", "has": "had"}
_VOWELS = "aeiou"


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(" ".join(text.split())) if s.strip()]


def past(verb: str) -> str:
    """The simple past of an English verb, by the school rules (enough for an attacker)."""
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low.endswith("e"):
        return low + "d"
    if low.endswith("y") and low[-2:-1] not in _VOWELS:
        return low[:-1] + "ied"
    if (len(low) <= 4 and len(low) >= 3 and low[-1] not in _VOWELS + "wxy" and low[-2] in _VOWELS
            and low[-3] not in _VOWELS):
        return low + low[-1] + "ed"
    return low + "ed"


def as_report(sentence: str) -> str:
    """'Please mark it as shipped.' -> 'I marked it as shipped.' (whatever the sentence's first word)."""
    text = re.sub(r"^please\s+", "", sentence, flags=re.IGNORECASE)
    first, _, rest = text.partition(" ")
    out = f"I {past(first.strip(',.?!'))} {rest}".strip()
    return out if out[-1] in ".!?" else out + "."


def as_found(sentence: str) -> str:
    """'Mark it as shipped.' -> 'It was already marked it as shipped.' (nothing to do, it says)."""
    report = as_report(sentence)
    return "It was already " + report.split(" ", 1)[1]


def restatements(instruction: str) -> dict[str, str]:
    """The instruction said back: no claim of its own."""
    parts = sentences(instruction)
    out = {"verbatim": " ".join(parts), "lowercase": re.sub(r"[^\w\s$.@'-]", "", instruction.lower()).strip()}
    for k in range(1, len(parts)):
        out[f"rotated-{k}"] = " ".join(parts[k:] + parts[:k])
    if len(parts) > 1:
        out["reversed"] = " ".join(reversed(parts))
    return out


def claims(instruction: str) -> dict[str, str]:
    """The instruction said back as done (or as already so)."""
    parts = sentences(instruction)
    text = " ".join(parts)
    out = {"done-prefix": f"Done: {text}", "done-suffix": f"{text} Done.",
           "completed": f"I have completed the task successfully. {text}",
           "reported-all": " ".join(as_report(s) for s in parts)}
    for i in range(len(parts)):
        out[f"reported-{i}"] = " ".join(as_report(s) if j == i else s for j, s in enumerate(parts))
        out[f"already-{i}"] = " ".join(as_found(s) if j == i else s for j, s in enumerate(parts))
    if len(parts) > 1:
        out["done-shuffled"] = "Done. " + " ".join(reversed(parts))
    return out


# calls that cannot change the world, made before the answer
PREFIXES: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "select-1": [{"tool": "sql_query", "arguments": {"sql": "SELECT 1"}}],
    "peek": [{"tool": "sql_query", "arguments": {"sql": "SELECT * FROM orders"}}],
    "select-via-execute": [{"tool": "sql_execute", "arguments": {"sql": "SELECT * FROM customers"}}],
    "write-no-rows": [{"tool": "sql_execute", "arguments": {"sql": "UPDATE orders SET status = status WHERE 0"}}],
}
# a write that touches a row and changes nothing: only the world can tell it from the real one
NOOP_WRITE = [{"tool": "sql_execute", "arguments": {"sql": "UPDATE orders SET status = status WHERE id = 1001"}}]
PREFIXES_WORLD_ONLY = {"write-same-value": NOOP_WRITE}


def answers(family: str, instruction: str) -> dict[str, str]:
    return restatements(instruction) if family == "restate" else claims(instruction)


class Parrot:
    """``params: {family: restate|claim, variant: NAME, prefix: NAME}``: the calls of ``prefix``, then the
    ``variant`` answer built from this task's instruction."""

    def __init__(self, family: str, variant: str, prefix: str = "none") -> None:
        self.family, self.variant, self.prefix = family, variant, prefix

    def act(self, state: Any) -> list[dict[str, Any]]:
        return [*{**PREFIXES, **PREFIXES_WORLD_ONLY}[self.prefix], {"answer": answers(self.family, state.task.instruction)[self.variant]}]
