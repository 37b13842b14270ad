"""Request bodies assembled from pre-serialised pieces and streamed to the socket as they are.

Image-heavy trajectories re-send every image each round. Serialising the whole payload with
``orjson.dumps`` copies and escape-scans every base64 image once per request, and a joined body
is one more full copy per request in flight. Here the JSON around the images is serialised per
request (it is small), each image URL is the encoder's cached bytes (made once, shared by every
request and trajectory), and the pieces go to the transport one by one: in-flight requests
share their images instead of each holding a private copy. The bytes on the wire are exactly
what ``orjson.dumps`` of the equivalent payload gives (tests/providers/test_request_bodies.py).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from typing import Any

import orjson
from aiohttp import payload
from aiohttp.abc import AbstractStreamWriter

# A placeholder no real value contains (NUL bytes and a per-process random token): a value is
# serialised with the placeholder where a list goes, then split around it.
_SLOT = f"\x00fasteval-slot-{secrets.token_hex(8)}\x00"
_SLOT_JSON = orjson.dumps(_SLOT)
# Pieces smaller than this are joined (one write, one syscall); larger ones are sent as they are.
_JOIN_BELOW = 16 * 1024
_IMAGE_PART_HEAD = b'{"type":"image_url","image_url":{"url":"'
_IMAGE_PART_TAIL = b'"}}'


def split_around(value: dict[str, Any], key: str) -> tuple[bytes, bytes] | None:
    """``dumps(value)`` split where ``value[key]`` goes: the bytes before and after it.

    The key keeps its position in the dict, so splicing a serialised list between the two
    halves gives exactly ``dumps({**value, key: that_list})``. None when the placeholder does
    not survive (a key the caller overrode with a non-placeholder value).
    """
    before, sep, after = orjson.dumps({**value, key: _SLOT}).partition(_SLOT_JSON)
    return (before, after) if sep else None


def image_part_pieces(url: bytes) -> list[bytes]:
    """``dumps({"type": "image_url", "image_url": {"url": url}})`` as three pieces, the URL shared.

    Large data URLs are base64 (the resolver's contract: ASCII that needs no JSON escaping) and
    are shared as they are; short URLs (``file://``) are checked and serialised when they would
    need escaping, so the bytes always equal what ``orjson.dumps`` writes.
    """
    if len(url) > _JOIN_BELOW and url.startswith(b"data:"):
        return [_IMAGE_PART_HEAD, url, _IMAGE_PART_TAIL]
    text = url.decode("utf-8", "replace")
    return [orjson.dumps({"type": "image_url", "image_url": {"url": text}})]


def coalesce(pieces: list[bytes]) -> list[bytes]:
    """Join runs of small pieces; keep large ones (the shared image URLs) as separate objects."""
    out: list[bytes] = []
    run: list[bytes] = []
    for p in pieces:
        if len(p) < _JOIN_BELOW:
            run.append(p)
            continue
        if run:
            out.append(b"".join(run))
            run = []
        out.append(p)
    if run:
        out.append(b"".join(run))
    return out


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
