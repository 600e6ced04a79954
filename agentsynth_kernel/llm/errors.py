"""The LLM client's errors: what callers catch (LLMError, BudgetUnenforceable) and what a transport
raises to the retry loop (Retryable, Fatal)."""

from __future__ import annotations

from ..errors import AgentsynthError, BudgetExceeded


class LLMError(AgentsynthError):
    """A request failed for good (after retries, or a non-retryable 4xx).

    ``agentsynth_error_kind = "provider"`` tells the engine who failed; ``status`` is the last HTTP
    status (None for timeouts and connection errors), ``attempts`` how many times it was sent.
    ``billed_unknown``: the request may have been processed (and billed) although no answer came
    back (a batch cancelled after ``max_wait_s``): its whole reservation is charged.
    """

    agentsynth_error_kind = "provider"

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 0, reason: str = "",
                 model: str = "", billed_unknown: bool = False) -> None:
        super().__init__(message)
        self.status, self.attempts, self.reason, self.model = status, attempts, reason, model
        self.billed_unknown = billed_unknown


class BudgetUnenforceable(BudgetExceeded):
    """A USD budget is set but the model's price is unknown, so the cap could not be kept."""


class Retryable(Exception):
    def __init__(self, reason: str, detail: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(detail)
        self.reason, self.detail, self.status, self.retry_after = reason, detail, status, retry_after


class Fatal(Exception):
    def __init__(self, detail: str, status: int | None = None):
        super().__init__(detail)
        self.detail, self.status = detail, status

