"""Requests per minute, per event loop."""

from __future__ import annotations

import asyncio
import math
import time


class RateLimiter:
    """Lets requests go at least ``60/rpm`` seconds apart, measured from when the previous one
    really went. Slots are not booked ahead: booked slots that a stalled event loop (a busy
    machine) or a slow first request made late all came due at once, a burst of requests within
    a millisecond."""

    def __init__(self, rpm: float) -> None:
        self.interval = 60.0 / rpm
        self.last = -math.inf
        self._turn: asyncio.Lock | None = None  # first come, first served (one per event loop)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        if self._turn is None or self._loop is not loop:  # a client reused by a later asyncio.run
            self._turn, self._loop = asyncio.Lock(), loop
        async with self._turn:
            while (wait := self.last + self.interval - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            self.last = time.monotonic()
