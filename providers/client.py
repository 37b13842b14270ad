"""The layer around every provider: retries by category, limits, timeouts, accounting, cache.

Retry taxonomy (ANCHORS §0.2): rate limits honour Retry-After and shrink the endpoint's
window; transient errors (5xx, timeouts, resets, malformed bodies) back off; fatal and auth
errors fail the job at once; a context overflow is returned as a normal ending. Attempts are
bounded by count and by a total time budget, separate from the per-attempt timeout.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, stop_after_delay

from providers.base import ChatRequest, ChatResponse, Provider, ProviderError
from providers.limits import AdaptiveLimit, RateLimiter

RETRYABLE = frozenset({"rate_limit", "transient", "timeout", "bad_response"})


@dataclass(slots=True)
class RetryPolicy:
    max_attempts: int = 6
    total_budget_s: float = 900.0
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0


@dataclass(slots=True)
class EndpointStats:
    """Counters the progress display and the report read."""

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    errors: int = 0
    backoff_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_hits: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


ResponseCache = Callable[[ChatRequest, Callable[[], Awaitable[ChatResponse]]], Awaitable[ChatResponse]]
"""Wraps a request's computation with a cache lookup (keyed by endpoint, model, request, seed)."""


class ModelClient:
    """A model role (the evaluated model, a judge, an extractor) bound to one endpoint's limits."""

    def __init__(
        self,
        name: str,
        provider: Provider,
        *,
        concurrency: int = 64,
        rpm: float | None = None,
        tpm: float | None = None,
        retry: RetryPolicy | None = None,
        params: dict[str, Any] | None = None,
        limit: AdaptiveLimit | None = None,
        cache: ResponseCache | None = None,
    ) -> None:
        self.name = name
        self.provider = provider
        self.limit = limit or AdaptiveLimit(concurrency)
        self.rate = RateLimiter(rpm, tpm)
        self.retry = retry or RetryPolicy()
        self.params = dict(params or {})
        self.stats = EndpointStats()
        self.cache = cache

    def _delay(self, exc: BaseException | None, attempt_number: int) -> float:
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            # The server said when; honour it even above our own backoff cap.
            delay = min(exc.retry_after, self.retry.total_budget_s)
        else:
            delay = self.retry.base_delay_s * (2 ** (attempt_number - 1))
            delay = min(random.uniform(delay / 2, delay), self.retry.max_delay_s)
        self.stats.retries += 1
        self.stats.backoff_s += delay
        return delay

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        return self._delay(exc, state.attempt_number + 1)  # the first attempt ran before tenacity

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """Send with retries; raises ProviderError when the request finally fails."""
        if self.params:
            request = ChatRequest(request.messages, request.tools, {**self.params, **request.params}, request.seed,
                                  request.image_profile)
        if self.cache is not None:
            return await self.cache(request, lambda: self._chat_uncached(request))
        return await self._chat_uncached(request)

    async def _chat_uncached(self, request: ChatRequest) -> ChatResponse:
        # Most requests succeed first time: only a failure pays for building a tenacity loop.
        try:
            return await self._attempt(request)
        except ProviderError as e:
            if e.kind not in RETRYABLE or self.retry.max_attempts <= 1:
                self.stats.errors += 1
                raise
            await asyncio.sleep(self._delay(e, 1))
        retrying = AsyncRetrying(
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.kind in RETRYABLE),
            stop=stop_after_attempt(self.retry.max_attempts - 1) | stop_after_delay(self.retry.total_budget_s),
            wait=self._wait,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._attempt(request)
        except ProviderError as e:
            self.stats.errors += 1
            raise e
        raise AssertionError("unreachable: tenacity either returns or raises")

    async def _attempt(self, request: ChatRequest) -> ChatResponse:
        self.stats.backoff_s += await self.rate.acquire()
        await self.limit.acquire()
        try:
            self.stats.requests += 1
            resp = await self.provider.chat(request)
        except ProviderError as e:
            self.stats.by_kind[e.kind] = self.stats.by_kind.get(e.kind, 0) + 1
            if e.kind == "rate_limit":
                self.stats.rate_limited += 1
                self.limit.on_rate_limit()
            raise
        except asyncio.CancelledError:
            raise
        finally:
            self.limit.release()
        self.limit.on_success()
        self.stats.prompt_tokens += resp.usage.prompt_tokens
        self.stats.completion_tokens += resp.usage.completion_tokens
        self.stats.cache_read_tokens += resp.usage.cache_read_tokens
        self.stats.cache_write_tokens += resp.usage.cache_write_tokens
        self.rate.record_tokens(resp.usage.prompt_tokens + resp.usage.completion_tokens)
        return resp

    async def close(self) -> None:
        await self.provider.close()
