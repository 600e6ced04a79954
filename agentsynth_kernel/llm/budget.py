"""The hard budget: reserve the worst case before a request leaves, settle the real cost after."""

from __future__ import annotations

import asyncio
import math
import threading
import weakref
from typing import Protocol

import attrs

from ..errors import BudgetExceeded
from .errors import BudgetUnenforceable

PICO = 10**12  # the ledger counts money in integer pico-dollars: sums of floats drift (1.9e-17 left
# "reserved" once deadlocked a run), integers do not


def to_pico(usd: float) -> int:
    return round(usd * PICO)


@attrs.define
class Reservation:
    tokens: int = 0
    pico: int = 0  # the worst-case cost reserved, in pico-dollars
    completion_allowance: int | None = None
    journal_entry: int | None = None  # its row in the run's spend journal


class SpendJournal(Protocol):
    """Where a ledger writes each reservation before the request leaves (the run store)."""

    def reserve_spend(self, tokens: int, pico: int) -> int: ...

    def settle_spend(self, entry: int, tokens: int, pico: int) -> None: ...


class BudgetLedger:
    """A hard cap in USD and/or tokens, safe with many requests in flight.

    ``reserve`` waits while the worst case of a request does not fit next to what is spent and
    reserved *and* something is in flight that may free room; it raises BudgetExceeded when the
    request could never fit, or when nothing in flight could make it fit (never waits forever).
    ``settle`` replaces the reservation with what the request really cost. Money is kept in
    integer pico-dollars, so ``spent + reserved <= cap`` holds exactly, and as long as a request
    costs no more than its reservation the cap is never exceeded.
    """

    def __init__(self, usd: float | None = None, tokens: int | None = None) -> None:
        if usd is not None and not (usd >= 0 and math.isfinite(usd)) or tokens is not None and tokens < 0:
            raise ValueError("budget must be a finite, non-negative amount")
        self.usd_cap, self.token_cap = usd, tokens
        self.cap_pico = to_pico(usd) if usd is not None else None
        self.spent_pico, self.spent_tokens = 0, 0
        self.reserved_pico, self.reserved_tokens = 0, 0
        self.in_flight = 0
        self.overruns = 0  # settlements that cost more than reserved (should stay 0)
        self._lock = threading.Lock()  # a client may serve several event loops (threads)
        self._changed: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = weakref.WeakKeyDictionary()
        self.journal: SpendJournal | None = None  # set by the run: reservations survive a kill -9

    @property
    def spent_usd(self) -> float:
        return self.spent_pico / PICO

    @property
    def reserved_usd(self) -> float:
        return self.reserved_pico / PICO

    @property
    def limited(self) -> bool:
        return self.usd_cap is not None or self.token_cap is not None

    def _fit(self, prompt: int, price: tuple[int, int] | None, spent_pico: int, spent_tokens: int) -> int | None:
        """The most completion tokens that fit after what is spent; None when uncapped, < 0 when
        not even the prompt fits. ``price`` is pico-dollars per (prompt, completion) token."""
        best: int | None = None
        if self.token_cap is not None:
            best = self.token_cap - spent_tokens - prompt
        if self.cap_pico is not None and price is not None:
            pin, pout = price
            left = self.cap_pico - spent_pico - prompt * pin
            by_money = (left // pout if pout > 0 else (10**18 if left >= 0 else -1))
            best = by_money if best is None else min(best, by_money)
        return best

    def describe(self) -> str:
        parts = []
        if self.usd_cap is not None:
            parts.append(f"${self.spent_usd:.4f} of ${self.usd_cap:g} spent")
        if self.token_cap is not None:
            parts.append(f"{self.spent_tokens} of {self.token_cap} tokens spent")
        return ", ".join(parts) or "no budget"

    async def reserve(self, prompt_tokens: int, max_completion: int, price: tuple[float, float] | None,
                      min_completion: int = 32, model: str = "") -> Reservation:
        """Reserve the worst case of one request; returns how many completion tokens it may use."""
        if not self.limited:
            self.in_flight += 1
            return Reservation(completion_allowance=None)
        if self.usd_cap is not None and price is None:
            raise BudgetUnenforceable(
                f"budget.usd is set but the price of model {model!r} is unknown; give prices= (USD per token) "
                "or use a token budget"
            )
        exact = (to_pico(price[0]), to_pico(price[1])) if price is not None else None
        need = min(max_completion, min_completion)
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                alone = self._fit(prompt_tokens, exact, self.spent_pico, self.spent_tokens)
                assert alone is not None  # limited
                now = self._fit(prompt_tokens, exact, self.spent_pico + self.reserved_pico,
                                self.spent_tokens + self.reserved_tokens)
                assert now is not None
                if alone < need or (now < need and self.in_flight == 0):
                    raise BudgetExceeded(
                        f"budget reached: {self.describe()}; a request to {model or 'the model'} needs up to "
                        f"{prompt_tokens} prompt + {need} completion tokens"
                    )
                want = min(max_completion, alone)
                if now >= want or (now >= need and self.in_flight == 0):
                    allowance = min(want, now)
                    pico = prompt_tokens * exact[0] + allowance * exact[1] if exact is not None else 0
                    res = Reservation(prompt_tokens + allowance, pico, allowance)
                    self.reserved_tokens += res.tokens
                    self.reserved_pico += res.pico
                    self.in_flight += 1
                    if self.journal is not None:
                        res.journal_entry = self.journal.reserve_spend(res.tokens, res.pico)
                    return res
                changed = self._changed.get(loop)
                if changed is None:
                    changed = self._changed[loop] = asyncio.Event()
                changed.clear()
            await changed.wait()

    def settle(self, res: Reservation, tokens: int, usd: float | None) -> None:
        """Replace a reservation by the real spend (``usd=None``: unknown, charge the reservation)."""
        with self._lock:
            self.in_flight -= 1
            self.reserved_tokens -= res.tokens
            self.reserved_pico -= res.pico
            cost = res.pico if usd is None else to_pico(usd)
            self.spent_tokens += tokens
            self.spent_pico += cost
            if self.journal is not None and res.journal_entry is not None:
                self.journal.settle_spend(res.journal_entry, tokens, cost)
            if self.limited and res.completion_allowance is not None and (tokens > res.tokens or cost > res.pico):
                self.overruns += 1
        self._wake()

    def _wake(self) -> None:
        with self._lock:
            if not self._changed:  # nobody ever waited (no budget, or room enough): nothing to wake
                return
            waiting = list(self._changed.items())
        if not waiting:
            return
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, event in waiting:
            if loop is current:
                event.set()
            elif not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    def charge(self, tokens: int = 0, usd: float = 0.0) -> None:
        """Count spend made elsewhere (e.g. by an earlier, resumed part of the run)."""
        with self._lock:
            self.spent_tokens += tokens
            self.spent_pico += to_pico(usd)

    def refund(self, tokens: int = 0, pico: int = 0) -> None:
        """Take back part of a charge: an earlier session's request was counted at its worst case
        and has now been settled at what it really cost (a resumed provider batch)."""
        with self._lock:
            self.spent_tokens = max(0, self.spent_tokens - max(0, tokens))
            self.spent_pico = max(0, self.spent_pico - max(0, pico))
        self._wake()

