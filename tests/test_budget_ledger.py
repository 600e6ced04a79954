"""The budget ledger counts money exactly and never waits for room that cannot come.

A USD cap with float sums once left 1.9e-17 "reserved" after every request had settled: the next
request waited forever for a change, every episode ran into its timeout and the run "succeeded".
"""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentsynth_kernel.errors import BudgetExceeded
from agentsynth_kernel.llm import BudgetLedger

PRICE = (1.5e-7, 6e-7)  # USD per prompt / completion token, gpt-4o-mini-like: not exact in binary


async def _spend_until_stopped(ledger: BudgetLedger, prompt: int, max_completion: int, rng: random.Random,
                               concurrency: int) -> int:
    """Requests in parallel until the ledger stops them; returns how many were served."""
    served = 0
    stopped = False

    async def worker() -> None:
        nonlocal served, stopped
        while not stopped:
            try:
                # a wait that can never end would hang here: bounded, so a deadlock fails the test
                res = await asyncio.wait_for(ledger.reserve(prompt, max_completion, PRICE), timeout=10)
            except BudgetExceeded:
                stopped = True
                return
            await asyncio.sleep(0)
            used = rng.randint(0, res.completion_allowance or 0)
            ledger.settle(res, prompt + used, prompt * PRICE[0] + used * PRICE[1])
            served += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return served


def test_a_usd_budget_with_the_default_max_tokens_stops_instead_of_waiting():
    ledger = BudgetLedger(usd=0.01)
    served = asyncio.run(_spend_until_stopped(ledger, 1000, 4096, random.Random(1), 1))
    assert served > 0
    assert ledger.spent_usd <= 0.01 and ledger.reserved_pico == 0 and ledger.in_flight == 0
    assert ledger.overruns == 0


@settings(max_examples=25, deadline=None)
@given(cap=st.floats(min_value=1e-4, max_value=0.05), prompt=st.integers(1, 3000),
       max_completion=st.integers(1, 8192), seed=st.integers(0, 2**32), concurrency=st.sampled_from([1, 8, 64]))
def test_spent_never_exceeds_the_cap_and_the_ledger_always_ends(cap, prompt, max_completion, seed, concurrency):
    ledger = BudgetLedger(usd=cap)
    asyncio.run(_spend_until_stopped(ledger, prompt, max_completion, random.Random(seed), concurrency))
    assert ledger.spent_pico <= ledger.cap_pico
    assert ledger.reserved_pico == 0 and ledger.reserved_tokens == 0 and ledger.in_flight == 0


def test_a_request_that_cannot_fit_while_nothing_is_in_flight_is_refused_at_once():
    ledger = BudgetLedger(usd=1.0)
    ledger.charge(usd=1.0 - 1000 * PRICE[0] - 10 * PRICE[1])  # room for the prompt and 10 tokens only
    with pytest.raises(BudgetExceeded, match="budget reached"):
        asyncio.run(ledger.reserve(1000, 4096, PRICE, min_completion=32))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_a_budget_must_be_a_finite_non_negative_amount(bad):
    with pytest.raises(ValueError, match="finite, non-negative"):
        BudgetLedger(usd=bad)


def test_a_local_model_is_free_so_a_usd_budget_can_be_enforced():
    from agentsynth_kernel.llm import price_for

    assert price_for("local") == (0.0, 0.0) and price_for("local/smollm2") == (0.0, 0.0)
    assert price_for("local/x", {"local/x": (1e-6, 2e-6)}) == (1e-6, 2e-6)
    assert price_for("hosted_vllm/unknown-model-xyz") is None
