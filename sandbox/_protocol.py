"""Wire format between the pool, the worker and its call children: a JSON header then raw blobs.

Images travel as raw bytes after the header instead of base64 inside it, so a 10 MB input costs
one copy through the pipe and no encoding. Frame: 4-byte big-endian header length, the header
(JSON), then the blobs whose sizes the header lists under ``"blobs"``.

Every reader checks each length against ``Bounds`` *before* allocating: a header length, a blob
count, a blob size, a total. Whatever wrote the frame may be hostile code (a call child, or code
that found a pipe), so a 4 GiB length prefix costs a ``FrameError``, not 4 GiB.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Any

UID_BLOCK = 4096
"""Uids per worker (its calls and sessions); the pool spaces workers' uid ranges by it."""

_LEN = struct.Struct(">I")
PREFIX = _LEN.size


class FrameError(ValueError):
    """A frame that breaks the protocol or its bounds; the writer is not trusted any more."""


@dataclass(slots=True, frozen=True)
class Bounds:
    """The largest frame a reader accepts."""

    header: int
    blobs: int
    blob_bytes: int
    total_bytes: int


def encode(header: dict[str, Any], blobs: list[bytes] | None = None) -> bytes:
    """One frame: the header gets a ``blobs`` list of sizes so the reader knows what follows."""
    blobs = blobs or []
    body = json.dumps({**header, "blobs": [len(b) for b in blobs]}).encode()
    return b"".join([_LEN.pack(len(body)), body, *blobs])


def header_size(prefix: bytes, bounds: Bounds) -> int:
    """The header length, refused if larger than the bound (checked before any allocation)."""
    n = int(_LEN.unpack(prefix)[0])
    if n > bounds.header:
        raise FrameError(f"reply header of {n} bytes exceeds the {bounds.header}-byte limit")
    return n


def decode_header(body: bytes, bounds: Bounds) -> tuple[dict[str, Any], list[int]]:
    """The header and its validated blob sizes."""
    try:
        header = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FrameError(f"reply header is not JSON: {str(exc)[:200]}") from None
    if not isinstance(header, dict):
        raise FrameError("reply header is not a JSON object")
    return header, blob_sizes(header.get("blobs", []), bounds)


def blob_sizes(sizes: Any, bounds: Bounds) -> list[int]:
    if not isinstance(sizes, list) or len(sizes) > bounds.blobs:
        raise FrameError(f"reply lists more than {bounds.blobs} blobs or no list")
    if not all(type(n) is int and 0 <= n <= bounds.blob_bytes for n in sizes):
        raise FrameError(f"reply blob size outside 0..{bounds.blob_bytes} bytes")
    if sum(sizes) > bounds.total_bytes:
        raise FrameError(f"reply blobs total more than {bounds.total_bytes} bytes")
    return list(sizes)


def read_exact(fd: int, n: int) -> bytes:
    """Blocking read of exactly n bytes (the caller has nothing else to do meanwhile)."""
    chunks: list[bytes] = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, bounds: Bounds) -> tuple[dict[str, Any], list[bytes]]:
    header, sizes = decode_header(read_exact(fd, header_size(read_exact(fd, PREFIX), bounds)), bounds)
    return header, [read_exact(fd, n) for n in sizes]


def write_frame(fd: int, header: dict[str, Any], blobs: list[bytes] | None = None) -> None:
    write_all(fd, encode(header, blobs))


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class FrameBuffer:
    """Incremental, bounded parse of one frame from bytes that arrive in pieces (non-blocking reads)."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self._buf = bytearray()
        self._need: int | None = None  # total frame length once the header is known
        self._header: dict[str, Any] | None = None
        self._sizes: list[int] = []

    def feed(self, data: bytes) -> bool:
        """Add bytes; True once a whole frame is buffered. Raises FrameError on a bound breach."""
        self._buf += data
        if self._header is None and len(self._buf) >= PREFIX:
            hlen = header_size(bytes(self._buf[:PREFIX]), self.bounds)
            if len(self._buf) >= PREFIX + hlen:
                self._header, self._sizes = decode_header(bytes(self._buf[PREFIX : PREFIX + hlen]), self.bounds)
                self._need = PREFIX + hlen + sum(self._sizes)
        if self._need is not None and len(self._buf) > self._need:
            raise FrameError("bytes after the end of the reply frame")
        return self._need is not None and len(self._buf) == self._need

    def frame(self) -> tuple[dict[str, Any], list[bytes]]:
        assert self._header is not None and self._need is not None
        pos = self._need - sum(self._sizes)
        blobs = []
        for n in self._sizes:
            blobs.append(bytes(self._buf[pos : pos + n]))
            pos += n
        return self._header, blobs
