"""Async, cached image encoding for provider requests.

The same image is sent many times (every round of a trajectory, every seed, every model), so
encodings are cached by (ref, profile, budget). Encoding is CPU work and libvips releases the
GIL, so it runs in a thread pool and never blocks the event loop. The cache is bounded by the
total bytes it holds, so memory stays flat however many tasks run.

The finished image URL (a base64 data URL, or a ``file://`` URL into the blob store for servers
that read local media) is made once per key and shared, as ASCII bytes, by every request that
sends the image: providers write those very bytes to the socket, without another copy.
"""

from __future__ import annotations

import asyncio
import base64
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fasteval.core.types import ImageRef
from fasteval.images.decode import DEFAULT_LIMITS, ImageLimits
from fasteval.images.processor import ProcessorResize
from fasteval.images.render import EncodedImage, encode
from fasteval.runfolder.blobs import BlobStore

CacheKey = tuple[ImageRef, str, int | None, int | None, ProcessorResize | None]
UrlKey = tuple[ImageRef, str, int | None, int | None, ProcessorResize | None, bool]
K = TypeVar("K")
V = TypeVar("V")

# Base64 of a small image is quicker inline than a hop to a thread.
_INLINE_B64_BYTES = 64 * 1024


@dataclass(slots=True)
class EncoderStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0


class _SharedLru(Generic[K, V]):
    """A byte-bounded LRU whose concurrent misses for one key share one computation.

    Both caches of the encoder (encoded images and the URLs made from them) are one of these,
    so hits, misses and evictions are counted the same way for both.
    """

    def __init__(self, max_bytes: int, size: Callable[[V], int], stats: EncoderStats, *,
                 count_misses: bool = True) -> None:
        self.max_bytes = max_bytes
        self._count_misses = count_misses
        self.bytes = 0
        self._size = size
        self._stats = stats
        self._items: OrderedDict[K, V] = OrderedDict()
        self._inflight: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        """The cached value (counted as a hit), or None; never computes."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
            self._stats.hits += 1
        return value

    async def get_or_make(self, key: K, make: Callable[[], Awaitable[V]]) -> V:
        hit = self.get(key)
        if hit is not None:
            return hit
        pending = self._inflight.get(key)
        if pending is not None:
            self._stats.hits += 1
            return await asyncio.shield(pending)
        if self._count_misses:
            self._stats.misses += 1
        fut = asyncio.ensure_future(make())
        # Shielded: if every waiter is cancelled, nobody reads its error; mark it read so asyncio
        # does not print "exception was never retrieved" on the terminal.
        fut.add_done_callback(_retrieve)
        self._inflight[key] = fut
        try:
            value = await asyncio.shield(fut)
        finally:
            self._inflight.pop(key, None)
        self._store(key, value)
        return value

    def _store(self, key: K, value: V) -> None:
        size = self._size(value)
        if size > self.max_bytes or key in self._items:
            return
        self._items[key] = value
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, old = self._items.popitem(last=False)
            self.bytes -= self._size(old)
            self._stats.evictions += 1


class ImageEncoder:
    """Encode blob-store images per profile, off the event loop, with a byte-bounded LRU cache.

    Concurrent requests for the same key share one encoding. Errors (ImageError, KeyError for
    a missing blob) propagate to the caller and are not cached.
    """

    def __init__(
        self,
        blobs: BlobStore,
        *,
        max_cache_bytes: int = 256 * 1024 * 1024,
        executor: Executor | None = None,
        max_workers: int = 4,
        limits: ImageLimits = DEFAULT_LIMITS,
    ) -> None:
        self.blobs = blobs
        self.max_cache_bytes = max_cache_bytes
        self.limits = limits
        self.stats = EncoderStats()
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="img-encode"
        )
        self._cache: _SharedLru[CacheKey, EncodedImage] = _SharedLru(
            max_cache_bytes, lambda e: len(e.data), self.stats)
        # a URL miss is counted once, by the encoding it is made from
        self._urls: _SharedLru[UrlKey, bytes] = _SharedLru(max_cache_bytes, len, self.stats, count_misses=False)

    @property
    def cache_bytes(self) -> int:
        return self._cache.bytes

    def __len__(self) -> int:
        return len(self._cache)

    def _work(
        self, ref: ImageRef, profile: str, max_bytes: int | None, max_pixels: int | None,
        processor: ProcessorResize | None,
    ) -> EncodedImage:
        # Runs in a worker thread: the blob read is file I/O and the encode is CPU work.
        return encode(self.blobs.get(ref), profile, max_bytes, max_pixels, limits=self.limits, processor=processor)

    async def encode(
        self, ref: ImageRef, profile: str, *, max_bytes: int | None = None, max_pixels: int | None = None,
        processor: ProcessorResize | None = None,
    ) -> EncodedImage:
        """The encoded image for ``ref`` under ``profile`` and budget, from cache when possible."""
        key: CacheKey = (ref, profile, max_bytes, max_pixels, processor)
        loop = asyncio.get_running_loop()
        return await self._cache.get_or_make(key, lambda: loop.run_in_executor(
            self._executor, self._work, ref, profile, max_bytes, max_pixels, processor))

    async def data_url(
        self, ref: ImageRef, profile: str, *, max_bytes: int | None = None, max_pixels: int | None = None
    ) -> str:
        """``data:<mime>;base64,...`` for a provider request (``image_url`` as text)."""
        url = await self.image_url(ref, profile, max_bytes=max_bytes, max_pixels=max_pixels)
        return url.decode("ascii")

    def cached_image_url(self, ref: ImageRef, profile: str, *, max_bytes: int | None = None,
                         max_pixels: int | None = None, processor: ProcessorResize | None = None,
                         local: bool = False) -> bytes | None:
        """The URL ``image_url`` would return, if it is cached; None otherwise (nothing is computed).

        Every round re-sends every image of the history: a hit answered without a coroutine is
        most of what an image costs a request once it has been encoded.
        """
        return self._urls.get((ref, profile, max_bytes, max_pixels, processor, local))

    async def image_url(
        self,
        ref: ImageRef,
        profile: str,
        *,
        max_bytes: int | None = None,
        max_pixels: int | None = None,
        processor: ProcessorResize | None = None,
        local: bool = False,
    ) -> bytes:
        """The URL a request sends for this image, as ASCII bytes that need no JSON escaping.

        ``local=False``: a base64 data URL. ``local=True``: a ``file://`` URL of the encoded
        image in the blob store (the blob itself when the profile keeps the bytes as they are),
        for servers that read local media; no base64 at all. Made once per key: concurrent
        first requests (a whole concurrency window starting on the same image) share one
        computation, and every later request shares the cached bytes.
        """
        make = self._file_url if local else self._data_url
        return await self._urls.get_or_make((ref, profile, max_bytes, max_pixels, processor, local),
                                            lambda: make(ref, profile, max_bytes, max_pixels, processor))

    async def _data_url(self, ref: ImageRef, profile: str, max_bytes: int | None, max_pixels: int | None,
                        processor: ProcessorResize | None) -> bytes:
        enc = await self.encode(ref, profile, max_bytes=max_bytes, max_pixels=max_pixels, processor=processor)
        prefix = f"data:{enc.mime};base64,".encode("ascii")
        if len(enc.data) <= _INLINE_B64_BYTES:
            return prefix + base64.b64encode(enc.data)
        return await self._off_loop(lambda: prefix + base64.b64encode(enc.data))

    async def _file_url(self, ref: ImageRef, profile: str, max_bytes: int | None, max_pixels: int | None,
                        processor: ProcessorResize | None) -> bytes:
        enc = await self.encode(ref, profile, max_bytes=max_bytes, max_pixels=max_pixels, processor=processor)
        # put() is content-addressed: the unchanged original maps to its own blob, a re-encoding
        # to a new one, so the URL always names exactly the bytes the profile sends.
        return await self._off_loop(lambda: self.blobs.path(self.blobs.put(enc.data)).resolve().as_uri().encode())

    def _off_loop(self, fn: Callable[[], bytes]) -> Awaitable[bytes]:
        return asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def close(self) -> None:
        """Stop the worker threads this encoder started (not a caller-supplied executor)."""
        if self._own_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
