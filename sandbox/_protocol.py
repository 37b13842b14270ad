"""Wire format between the pool and its workers: a JSON header followed by raw byte blobs.

Images travel as raw bytes after the header instead of base64 inside it, so a 10 MB input costs
one copy through the pipe and no encoding. Frame: 4-byte big-endian header length, the header
(JSON), then the blobs whose sizes the header lists under ``"blobs"``.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

_LEN = struct.Struct(">I")


def encode(header: dict[str, Any], blobs: list[bytes] | None = None) -> bytes:
    """One frame: the header gets a ``blobs`` list of sizes so the reader knows what follows."""
    blobs = blobs or []
    body = json.dumps({**header, "blobs": [len(b) for b in blobs]}).encode()
    return b"".join([_LEN.pack(len(body)), body, *blobs])


def header_size(prefix: bytes) -> int:
    return int(_LEN.unpack(prefix)[0])


def decode_header(body: bytes) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(body)
    return header


def _read_exact(fd: int, n: int) -> bytes:
    """Blocking read of exactly n bytes (the worker side has nothing else to do meanwhile)."""
    chunks: list[bytes] = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("pool closed the pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> tuple[dict[str, Any], list[bytes]]:
    header = decode_header(_read_exact(fd, header_size(_read_exact(fd, _LEN.size))))
    return header, [_read_exact(fd, n) for n in header.get("blobs", [])]


def write_frame(fd: int, header: dict[str, Any], blobs: list[bytes] | None = None) -> None:
    data = memoryview(encode(header, blobs))
    while data:
        data = data[os.write(fd, data) :]
