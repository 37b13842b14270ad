"""One pooled aiohttp session per endpoint, kept on its origin, and the transport faults every provider maps alike.

Native providers (Anthropic, Gemini) differ in URLs, headers and error bodies, not in how a
reset, a refused connection or a timeout is classified; that lives here once. Headers and
timeouts sit on the session because building them per request costs measurable CPU at
thousands of requests per second (benchmarks/throughput.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import aiohttp
from aiohttp import ClientHandlerType, ClientRequest, ClientResponse
from aiohttp.client_middlewares import ClientMiddlewareType
from multidict import CIMultiDictProxy
from yarl import URL

from providers.base import ProviderError
from providers.breaker import connection_error


def origin_guard(base_url: str) -> ClientMiddlewareType:
    """A session middleware that refuses every request off ``base_url``'s origin.

    aiohttp follows a 302/307 to any host and drops only ``Authorization`` there: ``x-api-key``
    (Anthropic), ``x-goog-api-key`` (Gemini) and the request body (a prompt, an image, a batch's
    input) went along, and a ``results_url`` a batch API hands us is just as much a server's word.
    Middlewares see every hop of a redirect, so one check here keeps keys and bodies on the
    configured origin; a redirect within it is still followed. We refuse rather than strip: a
    request that cannot reach its endpoint is a config problem the user should see (``fatal``).
    """
    origin = URL(base_url).origin()

    async def guard(req: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        if req.url.origin() != origin:
            raise ProviderError("fatal", f"refused to send {req.method} to {req.url.origin()}: it is not the "
                                         f"configured origin {origin} (a redirect or a URL from the server); "
                                         "keys and request bodies never leave it")
        return await handler(req)

    return guard


@dataclass(slots=True)
class Timeouts:
    """Separate limits: connecting, waiting for bytes, and one whole attempt."""

    connect_s: float = 10.0
    read_s: float = 120.0
    attempt_s: float = 300.0


def env_key(var: str | None, provider: str) -> str | None:
    """The API key from the named variable; an unset variable is an auth error, not a crash."""
    if not var:
        return None
    key = os.environ.get(var)
    if not key:
        raise ProviderError("auth", f"environment variable {var} is not set ({provider} key)")
    return key


class JsonEndpoint:
    """POSTs JSON bodies to one host and returns ``(status, headers, body)``; maps transport faults."""

    def __init__(self, headers: Callable[[], dict[str, str]], timeouts: Timeouts, base_url: str,
                 max_connections: int = 1024) -> None:
        self._headers = headers
        self._guard = origin_guard(base_url)
        self._timeout = aiohttp.ClientTimeout(total=timeouts.attempt_s, sock_connect=timeouts.connect_s,
                                              sock_read=timeouts.read_s)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout,
                                                  headers=self._headers(), middlewares=(self._guard,))
        return self._session

    async def post(self, url: str, body: bytes) -> tuple[int, CIMultiDictProxy[str], bytes]:
        session = self._get_session()
        try:
            async with session.post(url, data=body) as resp:
                return resp.status, resp.headers, await resp.read()
        except TimeoutError:
            raise ProviderError("timeout", "no complete answer within the timeouts") from None
        except aiohttp.ClientConnectionError as e:
            raise connection_error(e, url) from None  # one readable line; the breaker counts it
        except aiohttp.ClientPayloadError as e:
            raise ProviderError("transient", f"connection failed: {type(e).__name__}: {e}") from None

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


def retry_after_header(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds form); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def reset_duration(value: str | None) -> float | None:
    """Seconds of an ``x-ratelimit-reset-*`` value (``1s``, ``6m0s``, ``20ms``, ``1h2m3.5s``)."""
    if not value:
        return None
    pieces = _DURATION.findall(value.strip())
    if not pieces or "".join(n + u for n, u in pieces) != value.strip():
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in pieces)


def openai_retry_after(headers: Mapping[str, str]) -> float | None:
    """When OpenAI says to try again: ``retry-after-ms``/``retry-after``, else the reset of the
    limit that ran out (``x-ratelimit-remaining-*`` at 0), else the later of the two resets."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    seconds = retry_after_header(headers.get("retry-after"))
    if seconds is not None:
        return seconds
    resets: list[float] = []
    for limit in ("requests", "tokens"):
        reset = reset_duration(headers.get(f"x-ratelimit-reset-{limit}"))
        if reset is None:
            continue
        if headers.get(f"x-ratelimit-remaining-{limit}") == "0":
            return reset
        resets.append(reset)
    return max(resets) if resets else None
