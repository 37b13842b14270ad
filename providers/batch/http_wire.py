"""The HTTP plumbing the three batch wires share: one lazy session, classified calls, JSON answers."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from datetime import datetime
from typing import Any

import aiohttp
import orjson

from providers.base import ProviderError
from providers.batch.base import BatchWire, http
from providers.batch.result_lines import MAX_RESULT_LINE, LongLine, http_lines
from providers.http_json import origin_guard


def iso_ts(text: Any) -> float:
    """An ISO-8601 time (``Z`` or an offset) as a Unix timestamp; 0.0 for one that does not parse."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class HttpBatchWire(BatchWire):
    """A wire over one aiohttp session, opened on first use (and again after a close) so a wire
    can be built outside a running loop; its errors are classified by the interactive provider's
    own taxonomy. ``prefix`` goes before every ``url`` a call gets (error messages show the url
    as given). Every call stays on ``base_url``'s origin (``origin_guard``): a redirect, a
    ``results_url`` or an upload URL elsewhere is refused, key and body unsent."""

    def __init__(self, headers: Callable[[], dict[str, str]], timeout: aiohttp.ClientTimeout, base_url: str,
                 prefix: str = "") -> None:
        self._session_headers = headers
        self._guard = origin_guard(base_url)
        self._timeout = timeout
        self._prefix = prefix
        self._session: aiohttp.ClientSession | None = None

    @abstractmethod
    def classify(self, status: int, body: bytes) -> ProviderError:
        """An HTTP error answer as the interactive provider would classify it."""

    max_result_line = MAX_RESULT_LINE
    """A results line longer than this is not read; its request fails (``result_lines``)."""

    def _s(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._session_headers(),
                                                  middlewares=(self._guard,))
        return self._session

    async def _call(self, method: str, url: str, **kwargs: Any) -> bytes:
        return await http(self._s(), method, f"{self._prefix}{url}", self.classify, **kwargs)

    async def _lines(self, url: str, **kwargs: Any) -> list[bytes | LongLine]:
        """A results file's lines, streamed, each bounded (never one read of the whole file)."""
        return await http_lines(self._s(), f"{self._prefix}{url}", self.classify, self.max_result_line, **kwargs)

    async def _json(self, method: str, url: str, **kwargs: Any) -> Any:
        raw = await self._call(method, url, **kwargs)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ProviderError("bad_response", f"{method} {url}: not JSON: {raw[:120]!r}") from None

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
