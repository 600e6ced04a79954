"""Typed errors. The CLI prints these as clean messages; anything else is a bug."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AgentsynthError(Exception):
    """Base class: an error the user can act on, printed without a traceback."""


class SpecError(AgentsynthError):
    """Bad input in a spec or pack file. One message per problem, each with its path.

    ``str()`` is one line per problem, e.g.
    ``spec.yaml: policy.type: unknown policy 'orcale' (did you mean 'oracle'?)``.
    """

    def __init__(self, source: str, messages: Iterable[str]):
        self.source = source
        self.messages = list(messages)
        super().__init__("\n".join(f"{source}: {m}" for m in self.messages))


class PluginError(AgentsynthError):
    """A plugin could not be loaded or misbehaved; names the plugin and its distribution."""


class BudgetExceeded(AgentsynthError):
    """The run's hard budget (USD or tokens) is reached; the run stops cleanly."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or a list of choices when none is close."""
    choices = sorted(set(choices))
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if choices and len(choices) <= 12:
        return f" (known: {', '.join(choices)})"
    return ""
