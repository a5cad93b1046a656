"""A client-side token bucket, like client-go's `flowcontrol.NewTokenBucketRateLimiter`.

kubernetes-asyncio has no rate limiter; without one a burst of binds or events would hit the
API server as fast as the event loop can write them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """`qps` tokens a second, at most `burst` saved up; qps <= 0 means unlimited."""

    def __init__(self, qps: float, burst: int, *, now: Callable[[], float] = time.monotonic) -> None:
        if qps > 0 and burst < 1:
            raise ValueError("burst must be at least 1 when qps is set")
        self.qps = qps
        self.burst = max(burst, 1)
        self._now = now
        self._tokens = float(self.burst)
        self._stamp = now()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._now()
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    def try_acquire(self) -> bool:
        """Take a token if one is there now (for callers that drop instead of waiting)."""
        if self.qps <= 0:
            return True
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> None:
        """Wait for a token. Waiters are served in arrival order (the lock is FIFO)."""
        if self.qps <= 0:
            return
        async with self._lock:
            self._refill()
            if self._tokens < 1.0:
                await asyncio.sleep((1.0 - self._tokens) / self.qps)
                self._refill()
            self._tokens -= 1.0
