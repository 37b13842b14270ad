"""Per-endpoint limiters: an AIMD concurrency window and RPM/TPM token buckets.

The window shrinks multiplicatively on 429 (never on 5xx) and grows back additively after
successes, as inspect-ai does; every change is counted so the progress display can show it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque


class AdaptiveLimit:
    """A semaphore whose size moves between ``floor`` and ``ceiling`` (AIMD)."""

    def __init__(self, ceiling: int, *, floor: int = 1, shrink: float = 0.8, grow_every: int = 10) -> None:
        self.ceiling = max(1, ceiling)
        self.floor = max(1, min(floor, self.ceiling))
        self.limit = self.ceiling
        self.in_flight = 0
        self.shrink_factor = shrink
        self.grow_every = grow_every
        self.changes = 0
        self._successes = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # we were granted a slot we will not use
            elif fut in self._waiters:  # a cancelled waiter _wake already dropped is gone
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self.in_flight += 1
                fut.set_result(None)

    def on_rate_limit(self) -> None:
        new = max(self.floor, int(self.limit * self.shrink_factor))
        if new != self.limit:
            self.limit = new
            self.changes += 1
        self._successes = 0

    def on_success(self) -> None:
        self._successes += 1
        if self._successes >= self.grow_every and self.limit < self.ceiling:
            self._successes = 0
            self.limit += 1
            self.changes += 1
            self._wake()

    def resize(self, size: int) -> None:
        """A new ceiling set by hand (``fasteval ctl set``): the window moves to it at once, and
        waiters are woken if it grew; a smaller one lets in-flight requests finish, admits no more."""
        self.ceiling = max(1, size)
        self.floor = min(self.floor, self.ceiling)
        self.limit = self.ceiling
        self.changes += 1
        self._wake()

    @property
    def waiting(self) -> int:
        return len(self._waiters)


class RateLimiter:
    """Sliding one-minute budget of requests (RPM) and tokens (TPM); None disables either."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None) -> None:
        self.rpm = rpm
        self.tpm = tpm
        self._requests: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._token_sum = 0
        self._lock = asyncio.Lock()
        self._changed: asyncio.Event | None = None

    def set_rates(self, rpm: float | None, tpm: float | None) -> None:
        """New budgets (``fasteval ctl set``); a request already waiting recomputes its wait at once."""
        self.rpm, self.tpm = rpm, tpm
        if self._changed is not None:
            self._changed.set()

    def _trim(self, now: float) -> None:
        while self._requests and now - self._requests[0] >= 60.0:
            self._requests.popleft()
        while self._tokens and now - self._tokens[0][0] >= 60.0:
            self._token_sum -= self._tokens.popleft()[1]

    async def acquire(self) -> float:
        """Wait until one more request fits; returns the seconds spent waiting."""
        if self.rpm is None and self.tpm is None:
            return 0.0
        waited = 0.0
        async with self._lock:
            while True:
                now = time.monotonic()
                self._trim(now)
                delay = 0.0
                if self.rpm is not None and len(self._requests) >= self.rpm:
                    delay = 60.0 - (now - self._requests[0])
                if self.tpm is not None and self._token_sum >= self.tpm and self._tokens:
                    delay = max(delay, 60.0 - (now - self._tokens[0][0]))
                if self.rpm is None and self.tpm is None or delay <= 0:
                    self._requests.append(now)
                    return waited
                waited += await self._pause(delay)

    async def _pause(self, delay: float) -> float:
        """Sleep ``delay`` s, or less when set_rates changes the budgets; the seconds slept."""
        self._changed = changed = asyncio.Event()
        t0 = time.monotonic()
        sleeper = asyncio.ensure_future(asyncio.sleep(delay))
        woken = asyncio.ensure_future(changed.wait())
        try:
            await asyncio.wait({sleeper, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            woken.cancel()
        return time.monotonic() - t0

    def record_tokens(self, n: int) -> None:
        if self.tpm is not None and n > 0:
            self._tokens.append((time.monotonic(), n))
            self._token_sum += n
