"""Request bodies assembled from pre-serialised pieces and streamed to the socket as they are.

Image-heavy trajectories re-send every image each round. Serialising the whole payload with
``orjson.dumps`` copies and escape-scans every base64 image once per request, and each body in
flight holds its own copy of every image. Here the payload is serialised with a short
placeholder for each large image URL (one ``orjson.dumps`` of a small document), split around
the placeholders, and the pieces go to the transport one by one with the encoder's cached URL
bytes in between (made once, shared by every request and trajectory). The bytes on the wire are exactly
what ``orjson.dumps`` of the equivalent payload gives (tests/providers/test_request_bodies.py).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque

import orjson
from aiohttp import payload
from aiohttp.abc import AbstractStreamWriter

# A placeholder no real URL contains (NUL bytes and a per-process random token): large image
# URLs are serialised as the placeholder, and the body is split around each occurrence.
SLOT = f"\x00fasteval-image-{secrets.token_hex(8)}\x00"
_SLOT_JSON = orjson.dumps(SLOT)
SHARE_ABOVE = 16 * 1024
"""Image URLs longer than this are shared bytes in the body; shorter ones are serialised inline."""
JOIN_BELOW = 256 * 1024
"""Bodies up to this size go out as one bytes object (one copy, one send, as a plain client does):
each piece written is a send on the socket, and for a small body the extra sends cost more than
the copy. Larger bodies stream their pieces, so the shared image bytes are never copied."""


def is_shareable(url: bytes) -> bool:
    """A URL the body can carry as it is: a large data URL (base64, so no JSON escaping)."""
    return len(url) > SHARE_ABOVE and url.startswith(b"data:")


def splice(body: bytes, urls: list[bytes]) -> list[bytes] | None:
    """The pieces of ``body`` with each placeholder string replaced by its URL, in order.

    The concatenation equals ``orjson.dumps`` of the payload with the URLs in place (they need
    no escaping). None when the placeholders do not match the URLs one for one.
    """
    segments = body.split(_SLOT_JSON)
    if len(segments) != len(urls) + 1:
        return None
    pieces = [segments[0] + b'"']
    last = len(urls) - 1
    for i, url in enumerate(urls):
        pieces.append(url)
        pieces.append(b'"' + segments[i + 1] + (b'"' if i < last else b""))
    return pieces


def body_data(pieces: list[bytes]) -> tuple[bytes | PiecesPayload, int]:
    """What to hand aiohttp for ``pieces``, and the body's size: one bytes object when small."""
    if len(pieces) == 1:
        return pieces[0], len(pieces[0])
    size = sum(map(len, pieces))
    if size <= JOIN_BELOW:
        return b"".join(pieces), size
    return PiecesPayload(pieces, size), size


class PiecesPayload(payload.Payload):
    """An aiohttp request body made of several bytes objects, written in order, never joined."""

    _autoclose = True

    def __init__(self, pieces: list[bytes], size: int) -> None:
        super().__init__(pieces, content_type="application/json")
        self._pieces = pieces
        self._size = size
        self._total = size

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return b"".join(self._pieces).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        for piece in self._pieces:
            await writer.write(piece)

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        if content_length is None or content_length >= self._total:
            await self.write(writer)
            return
        left = content_length
        for piece in self._pieces:
            if left <= 0:
                break
            await writer.write(piece[:left])
            left -= len(piece)


class ByteBudget:
    """Bounds the bytes of request bodies in flight, next to the endpoint's concurrency window.

    C=1024 trajectories with 5 MB histories would otherwise put 5 GB on the wire (and in the
    server's memory) at once. A body waits until it fits; one larger than the whole budget
    goes alone, so nothing is refused. Waiters are served in order, so a big body is not
    starved by a stream of small ones.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"the body byte budget must be positive, got {max_bytes}")
        self.max_bytes = max_bytes
        self.in_flight = 0
        self.peak = 0
        self.waits = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _fits(self, size: int) -> bool:
        return self.in_flight == 0 or self.in_flight + size <= self.max_bytes

    async def acquire(self, size: int) -> None:
        if not self._waiters and self._fits(size):
            self._take(size)
            return
        self.waits += 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, fut)
        self._waiters.append(entry)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release(size)  # granted, but we will not send
            else:
                self._waiters.remove(entry)
                self._wake()  # a big body at the head may have held smaller ones back
            raise

    def _take(self, size: int) -> None:
        self.in_flight += size
        self.peak = max(self.peak, self.in_flight)

    def release(self, size: int) -> None:
        self.in_flight -= size
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._fits(self._waiters[0][0]):
            size, fut = self._waiters.popleft()
            if not fut.done():
                self._take(size)
                fut.set_result(None)
