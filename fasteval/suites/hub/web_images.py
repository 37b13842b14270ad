"""Images a dataset names by http(s) URL: fetched once, kept in the data cache, bounded.

A resumed run reloads its suite; without the cache every image URL would be fetched again. The
cache is keyed by the URL (``urls/ab/<sha256 of the URL>``); a URL whose content changes keeps
its first bytes until the cache is cleared. A response is read up to ``max_bytes`` and no
further, follows at most five redirects, and sends no token: the URL is the dataset's, not ours.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import TracebackType

import aiohttp

from fasteval.suites.hub.loop_thread import LoopThread

MAX_IMAGE_BYTES = 64 << 20
TIMEOUT_S = 60.0


class UrlImages:
    """``get(url)`` -> bytes, through the cache; ValueError says why a URL gave no image."""

    def __init__(self, loop: LoopThread, cache_root: Path, *, max_bytes: int = MAX_IMAGE_BYTES,
                 timeout_s: float = TIMEOUT_S) -> None:
        self.loop = loop
        self.folder = cache_root / "urls"
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    def _cached(self, url: str) -> Path:
        key = hashlib.sha256(url.encode()).hexdigest()
        return self.folder / key[:2] / key

    def get(self, url: str) -> bytes:
        path = self._cached(url)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            pass
        data = self.loop.run(self._fetch(url))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return data

    async def _fetch(self, url: str) -> bytes:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        try:
            async with self._session.get(url, max_redirects=5) as r:
                if r.status != 200:
                    raise ValueError(f"HTTP {r.status}")
                data = await r.content.read(self.max_bytes + 1)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise ValueError(f"{type(e).__name__}: {' '.join(str(e).split())[:160]}") from None
        if len(data) > self.max_bytes:
            raise ValueError(f"larger than {self.max_bytes:,} bytes")
        if not data:
            raise ValueError("empty response")
        return data

    async def _close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def __enter__(self) -> UrlImages:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._session is not None:
            self.loop.run(self._close())
