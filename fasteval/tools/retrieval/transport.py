"""What every retrieval tool shares: API keys, bounded retries, the HTTP session and the cache.

Retries follow the one policy every model endpoint also uses (providers.retry): a 429 waits as
long as its Retry-After says (capped) and shrinks the tool's limiter window, 5xx and timeouts
back off exponentially, any other 4xx fails at once, and attempts are bounded. Errors carry only redacted text, so an API key that an upstream echoes
back (SerpAPI puts it in the URL) never reaches the model, the record or the log.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import orjson

from cache import Cache, CacheValue
from fasteval.services.limiters import current_limit
from fasteval.tools.base import ToolContext
from providers import UPSTREAM_RETRYABLE, RetryPolicy, retry_call
from providers import classify_status as http_kind

if TYPE_CHECKING:  # imported where used: the suites import this module, and a report needs no HTTP
    import aiohttp

UpstreamKind = Literal["rate_limit", "transient", "timeout", "rejected", "auth", "bad_response"]
RETRYABLE: frozenset[str] = UPSTREAM_RETRYABLE
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

    def policy(self) -> RetryPolicy:
        """These settings as the shared retry policy."""
        return RetryPolicy(max_attempts=self.attempts, total_budget_s=float("inf"), base_delay_s=self.base_delay_s,
                           max_delay_s=self.max_delay_s, max_retry_after_s=self.max_retry_after_s)

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
    """Map an HTTP failure onto the shared taxonomy (providers.retry; a plain 4xx is "rejected")."""
    text = body[:300].decode("utf-8", "replace").strip()
    detail = f"HTTP {status}" + (f": {text}" if text else "")
    kind = http_kind(status)
    return UpstreamError("rejected" if kind == "fatal" else kind, detail, status=status,  # type: ignore[arg-type]
                         retry_after=_seconds(retry_after) if kind in ("rate_limit", "transient") else None)


async def with_retries(settings: RetrySettings, attempt: Callable[[], Awaitable[T]]) -> T:
    """Run ``attempt`` under the shared retry policy (providers.retry); the last error is raised.

    A 429 also shrinks the AIMD window of the tool's named limiter (the slot the agent loop holds
    for this call), as it shrinks a model endpoint's window.
    """
    return await retry_call(settings.policy(), attempt, error_type=UpstreamError, retryable=UPSTREAM_RETRYABLE,
                            window=current_limit(), sleep=settings.sleep)


async def request_json(session: aiohttp.ClientSession, method: str, url: str, *, timeout_s: float,
                       retry: RetrySettings, params: dict[str, Any] | None = None,
                       json_body: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                       max_bytes: int = 8 * 1024 * 1024) -> Any:
    """One JSON API call with retries; raises UpstreamError (messages not yet redacted)."""
    import aiohttp

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
    import aiohttp

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
