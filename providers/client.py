"""The layer around every provider: retries by category, limits, timeouts, accounting, cache.

Retry taxonomy (ANCHORS §0.2): rate limits honour Retry-After and shrink the endpoint's
window; transient errors (5xx, timeouts, resets, malformed bodies) back off; fatal and auth
errors fail the job at once; a context overflow is returned as a normal ending. Attempts are
bounded by count and by a total time budget, separate from the per-attempt timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fasteval.core.job import current_job
from providers.base import ChatRequest, ChatResponse, Provider, ProviderError
from providers.breaker import CircuitBreaker, is_outage
from providers.limits import AdaptiveLimit, RateLimiter
from providers.retry import MODEL_RETRYABLE, RetryPolicy, retry_call

__all__ = ["RETRYABLE", "BatchRoute", "EndpointStats", "ModelClient", "RequestGate", "RetryPolicy"]

RETRYABLE = MODEL_RETRYABLE


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
    batch_prompt_tokens: int = 0
    """The part of the four counts above that a provider's batch API served (billed at its batch factor)."""
    batch_completion_tokens: int = 0
    batch_cache_read_tokens: int = 0
    batch_cache_write_tokens: int = 0
    batch_fallbacks: int = 0
    """Requests of a batched model answered interactively after their batch failed (full price)."""
    cache_hits: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class BatchRoute(Protocol):
    """Where a batched model's requests go instead of one request each (a batch lane)."""

    async def chat(self, request: ChatRequest) -> ChatResponse: ...


class RequestGate(Protocol):
    """What may hold a request before it is sent (a paused sweep: ``fasteval ctl pause --now``)."""

    held: bool
    """False while nothing is held: the client then sends without asking (one attribute read)."""

    async def wait(self, endpoint: str) -> None:
        """Return once a request to ``endpoint`` may be sent."""
        ...


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
        cache: Callable[[ModelClient], ResponseCache] | None = None,
        breaker: CircuitBreaker | None = None,
        batch: Callable[[ModelClient], BatchRoute] | None = None,
        gate: RequestGate | None = None,
    ) -> None:
        """``cache`` and ``batch`` wrap this client's requests and are given the client they wrap
        (its provider, stats, retry policy and interactive path), once, as it is built; ``gate``
        is asked before each request is sent."""
        self.name = name
        self.provider = provider
        self.limit = limit or AdaptiveLimit(concurrency)
        self.rate = RateLimiter(rpm, tpm)
        self.retry = retry or RetryPolicy()
        self.params = dict(params or {})
        self.stats = EndpointStats()
        self.breaker = breaker
        self.attempt_timeout_s: float | None = None
        """A cap on each attempt set while running (``fasteval ctl set attempt_timeout_s=N``), on top
        of the wire's own connect/read/attempt timeouts from the config."""
        self.gate = gate
        """Asked before each request is sent (each attempt; a cache hit is not held): a paused sweep
        (``fasteval ctl pause --now``) holds trajectories here, before their next model request,
        instead of ending them."""
        self.cache = cache(self) if cache is not None else None
        self.lane = batch(self) if batch is not None else None
        """A model in batch mode (fasteval.engine.batch.batching): its requests go into provider batches."""
        self.batch = self.lane.chat if self.lane is not None else None

    def _count_retry(self, delay: float, exc: BaseException | None = None) -> None:
        """Called only when a retry will really happen (never after the last attempt)."""
        self.stats.retries += 1
        self.stats.backoff_s += delay
        # Charged to the job whose request it is (fasteval.core.job), not read off shared counters:
        # concurrent jobs of one endpoint would otherwise be charged each other's retries.
        job = current_job()
        if job is not None:
            job.retries += 1

    async def chat(self, request: ChatRequest) -> ChatResponse:
        """Send with retries; raises ProviderError when the request finally fails."""
        if self.params:
            request = ChatRequest(request.messages, request.tools, {**self.params, **request.params}, request.seed,
                                  request.image_profile)
        if self.cache is not None:
            return await self.cache(request, lambda: self._chat_uncached(request))
        return await self._chat_uncached(request)

    async def _chat_uncached(self, request: ChatRequest) -> ChatResponse:
        if self.batch is not None:
            if self.gate is not None and self.gate.held:
                await self.gate.wait(self.name)
            return await self.batch(request)
        return await self.chat_interactive(request)

    async def chat_interactive(self, request: ChatRequest) -> ChatResponse:
        """The interactive path (retries, breaker), also a batched model's fallback after a batch failure."""
        if self.breaker is None:
            return await self._chat_retrying(request)
        while True:
            try:
                return await self._chat_retrying(request)
            except ProviderError as e:
                # Retries exhausted while the endpoint is down: wait for it (or for the breaker to give
                # up, which raises EndpointDown) instead of turning an outage into an error record.
                if not (is_outage(e) and self.breaker.is_open):
                    raise
                self.stats.errors -= 1  # not a final error after all
                await self.breaker.admit()

    async def _chat_retrying(self, request: ChatRequest) -> ChatResponse:
        # The window already shrank in _attempt on a 429: the loop gets no window of its own.
        try:
            return await retry_call(self.retry, lambda: self._attempt(request), error_type=ProviderError,
                                    retryable=RETRYABLE, on_retry=self._count_retry)
        except ProviderError:
            self.stats.errors += 1
            raise

    async def _attempt(self, request: ChatRequest) -> ChatResponse:
        if self.gate is not None and self.gate.held:  # each attempt: a retry is not sent while paused either
            await self.gate.wait(self.name)
        if self.breaker is not None:
            await self.breaker.admit()
        # The window first, then the rate budget: a request is charged to the minute only when it is
        # about to be sent, so a budget lowered mid-run (``fasteval ctl set``) also binds the requests
        # already queued for a slot, not only those that arrive after the change.
        await self.limit.acquire()
        try:
            self.stats.backoff_s += await self.rate.acquire()
            self.stats.requests += 1
            resp = await self._send(request)
        except ProviderError as e:
            if self.breaker is not None:
                self.breaker.on_failure(e)
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
        if self.breaker is not None:
            self.breaker.on_success()
        self.stats.prompt_tokens += resp.usage.prompt_tokens
        self.stats.completion_tokens += resp.usage.completion_tokens
        self.stats.cache_read_tokens += resp.usage.cache_read_tokens
        self.stats.cache_write_tokens += resp.usage.cache_write_tokens
        self.rate.record_tokens(resp.usage.prompt_tokens + resp.usage.completion_tokens)
        return resp

    async def _send(self, request: ChatRequest) -> ChatResponse:
        cap = self.attempt_timeout_s
        if cap is None:
            return await self.provider.chat(request)
        try:
            async with asyncio.timeout(cap):
                return await self.provider.chat(request)
        except TimeoutError:
            raise ProviderError("timeout", f"no complete answer within {cap:g} s (attempt_timeout_s, set while "
                                           "running)") from None

    async def close(self) -> None:
        if self.breaker is not None:
            await self.breaker.close()
        await self.provider.close()
