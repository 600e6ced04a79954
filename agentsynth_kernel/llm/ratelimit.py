"""Requests per minute, per event loop."""

from __future__ import annotations

import asyncio
import time


class RateLimiter:
    """Spaces request starts ``60/rpm`` seconds apart."""

    def __init__(self, rpm: float) -> None:
        self.interval = 60.0 / rpm
        self.next = 0.0

    async def acquire(self) -> None:
        now = time.monotonic()
        at = max(now, self.next)
        self.next = at + self.interval
        if at > now:
            await asyncio.sleep(at - now)

