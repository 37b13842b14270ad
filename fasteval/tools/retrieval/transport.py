"""What every retrieval tool shares: API keys, bounded retries, the HTTP session and the cache.

Retries follow the provider layer's rules (providers.client): a 429 waits as long as its
Retry-After says (capped), 5xx and timeouts back off exponentially, any other 4xx fails at once,
and attempts are bounded. Errors carry only redacted text, so an API key that an upstream echoes
back (SerpAPI puts it in the URL) never reaches the model, the record or the log.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import aiohttp
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from cache import Cache, CacheValue
from fasteval.tools.base import ToolContext

UpstreamKind = Literal["rate_limit", "transient", "timeout", "rejected", "auth", "bad_response"]
RETRYABLE: frozenset[str] = frozenset({"rate_limit", "transient", "timeout"})
Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")


class UpstreamError(Exception):
    """A failed call to a search, page or weather server, classified for the retry loop."""

    def __init__(self, kind: UpstreamKind, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind: UpstreamKind = kind
        self.status = status
        self.retry_after = retry_after


class MissingKey(Exception):
    """The environment variable that should hold an API key is unset or empty."""


@dataclass(slots=True)
class RetrySettings:
    """Bounded attempts; ``sleep`` is injectable so tests can see the waits without taking them."""

    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 30.0
    """A Retry-After above this is capped: one tool call must not stall a job for minutes."""
    sleep: Sleep = field(default=asyncio.sleep)

    @classmethod
    def from_options(cls, options: dict[str, Any], *, default_attempts: int = 3) -> RetrySettings:
        settings = cls(attempts=max(1, int(options.get("attempts", default_attempts))),
                       max_retry_after_s=float(options.get("max_retry_after_s", 30.0)))
        sleep = options.get("sleep")
        if sleep is not None:
            settings.sleep = sleep
        return settings


def api_key(options: dict[str, Any], default_env: str) -> str:
    """The key named by option ``api_key_env``; keys never live in configs or records."""
    env = str(options.get("api_key_env") or default_env)
    value = os.environ.get(env, "").strip()
    if not value:
        raise MissingKey(f"no API key: set the environment variable {env} (tool option api_key_env)")
    return value


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret in ``text`` by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP-date: fall back to our own backoff


def classify_status(status: int, body: bytes, retry_after: str | None) -> UpstreamError:
    """Map an HTTP failure onto the retry taxonomy (429 and 5xx retry; other 4xx do not)."""
    text = body[:300].decode("utf-8", "replace").strip()
    detail = f"HTTP {status}" + (f": {text}" if text else "")
    if status == 429:
        return UpstreamError("rate_limit", detail, status=status, retry_after=_seconds(retry_after))
    if status in (401, 403):
        return UpstreamError("auth", detail, status=status)
    if status in (408, 425) or status >= 500:
        return UpstreamError("transient", detail, status=status, retry_after=_seconds(retry_after))
    return UpstreamError("rejected", detail, status=status)


def _wait(settings: RetrySettings) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, UpstreamError) and exc.retry_after is not None:
            return min(exc.retry_after, settings.max_retry_after_s)
        delay = settings.base_delay_s * (2 ** (state.attempt_number - 1))
        return min(random.uniform(delay / 2, delay), settings.max_delay_s)
    return wait


async def with_retries(settings: RetrySettings, attempt: Callable[[], Awaitable[T]]) -> T:
    """Run ``attempt`` until it succeeds, fails for good, or the attempts run out (last error raised)."""
    retrying = AsyncRetrying(
        retry=retry_if_exception(lambda e: isinstance(e, UpstreamError) and e.kind in RETRYABLE),
        stop=stop_after_attempt(settings.attempts), wait=_wait(settings), sleep=settings.sleep, reraise=True)
    async for state in retrying:
        with state:
            return await attempt()
    raise AssertionError("unreachable: tenacity either returns or raises")


async def request_json(session: aiohttp.ClientSession, method: str, url: str, *, timeout_s: float,
                       retry: RetrySettings, params: dict[str, Any] | None = None,
                       json_body: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                       max_bytes: int = 8 * 1024 * 1024) -> Any:
    """One JSON API call with retries; raises UpstreamError (messages not yet redacted)."""
    async def attempt() -> Any:
        try:
            async with session.request(method, url, params=params, json=json_body, headers=headers,
                                       timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
                body = await resp.content.read(max_bytes + 1)
                if resp.status >= 400:
                    raise classify_status(resp.status, body, resp.headers.get("Retry-After"))
        except TimeoutError:
            raise UpstreamError("timeout", f"no answer within {timeout_s:g} s") from None
        except aiohttp.ClientError as e:
            raise UpstreamError("transient", f"connection failed: {type(e).__name__}: {e}") from None
        if len(body) > max_bytes:
            raise UpstreamError("bad_response", f"response larger than {max_bytes} bytes")
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise UpstreamError("transient", "response was not JSON") from None
    return await with_retries(retry, attempt)


@asynccontextmanager
async def http_session(ctx: ToolContext) -> AsyncIterator[aiohttp.ClientSession]:
    """The sweep's shared session, or a short-lived one when a tool runs outside a sweep."""
    shared = ctx.services.get("http")
    if isinstance(shared, aiohttp.ClientSession) and not shared.closed:
        yield shared
        return
    async with aiohttp.ClientSession() as own:
        yield own


async def cached(ctx: ToolContext, namespace: str, key: str, compute: Callable[[], Awaitable[CacheValue]],
                 cacheable: Callable[[CacheValue], bool] | None = None) -> tuple[CacheValue, bool]:
    """``(value, hit)`` through the sweep's cache when there is one; CacheMiss propagates (replay)."""
    cache = ctx.services.get("cache")
    if not isinstance(cache, Cache):
        return await compute(), False
    computed = False

    async def run() -> CacheValue:
        nonlocal computed
        computed = True
        return await compute()

    value = await cache.get_or_compute(namespace, key, run, cacheable=cacheable)
    return value, not computed
