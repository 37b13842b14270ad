"""One retry policy for every model endpoint, role and upstream tool.

The taxonomy (ANCHORS §0.2): a rate limit honours Retry-After (capped) and shrinks the caller's
AIMD window; transient failures (5xx, resets, timeouts) back off exponentially with jitter and
never shrink it; fatal and auth errors are not retried. Attempts are bounded by count and by a
total time budget. Callers map their wire errors onto kinds (``classify_status`` for plain HTTP
statuses) and hand an attempt to ``retry_call``; the loop itself lives only here.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

MODEL_RETRYABLE = frozenset({"rate_limit", "transient", "timeout", "bad_response"})
"""Kinds a model request retries (a malformed completion body is usually a truncated reply)."""
UPSTREAM_RETRYABLE = frozenset({"rate_limit", "transient", "timeout"})
"""Kinds a search/page/weather call retries (a too-large or unparsable page will not change)."""


@dataclass(slots=True)
class RetryPolicy:
    max_attempts: int = 6
    total_budget_s: float = 900.0
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    max_retry_after_s: float | None = None
    """Cap on a server's Retry-After; None honours it up to the total budget (model endpoints),
    tools cap it so that one call cannot stall a job for minutes."""


class Window(Protocol):
    """An AIMD concurrency window (providers.limits.AdaptiveLimit)."""

    def on_rate_limit(self) -> None: ...


def backoff_delay(policy: RetryPolicy, attempt: int, retry_after: float | None) -> float:
    """Seconds before attempt ``attempt + 1``: the server's word when given, else jittered 2^n."""
    if retry_after is not None:
        cap = policy.total_budget_s if policy.max_retry_after_s is None else policy.max_retry_after_s
        return min(retry_after, cap)
    delay = policy.base_delay_s * (2 ** (attempt - 1))
    return min(random.uniform(delay / 2, delay), policy.max_delay_s)


def classify_status(status: int) -> str:
    """The kind of a plain HTTP failure; callers refine it from the body (e.g. context overflow)."""
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status in (408, 409, 425) or status >= 500:
        return "transient"
    return "fatal"


async def retry_call(policy: RetryPolicy, attempt: Callable[[], Awaitable[T]], *, error_type: type[BaseException],
                     retryable: frozenset[str], on_retry: Callable[[float, BaseException], None] | None = None,
                     window: Window | None = None, sleep: Sleep = asyncio.sleep) -> T:
    """Run ``attempt`` until it succeeds, fails with a kind not in ``retryable``, or the attempts
    or the time budget run out; the last error is raised. ``on_retry`` sees each real retry (never
    one after the last attempt); ``window`` shrinks on every rate limit."""
    start = time.monotonic()
    n = 0
    while True:
        n += 1
        try:
            return await attempt()
        except error_type as e:
            kind = getattr(e, "kind", None)
            if kind == "rate_limit" and window is not None:
                window.on_rate_limit()
            if kind not in retryable or n >= policy.max_attempts or time.monotonic() - start >= policy.total_budget_s:
                raise
            delay = backoff_delay(policy, n, getattr(e, "retry_after", None))
            if on_retry is not None:
                on_retry(delay, e)
            await sleep(delay)
