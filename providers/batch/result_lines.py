"""A batch's results file, streamed line by line with a bound on each line.

A results file is the provider's text: one 300 MB line, read whole and parsed, took 1.3 GB. Here
the body is read in 1 MiB chunks and cut at newlines; a line past ``max_line`` is never held: its
first 4 KiB are kept to name the request it answers (``custom_id`` or ``key`` come first in every
wire's lines), and the rest is skipped as it streams. That request fails ``fatal`` (a result this
large was paid for, and asking again would pay again for the same); the other lines are unaffected.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from providers.base import ProviderError
from providers.batch.base import ResultLine
from providers.breaker import connection_error

MAX_RESULT_LINE = 32 * 1024 * 1024
"""A result line longer than this is not read (a real one, a whole answer with its usage, is KBs)."""
_HEAD = 4096
_CHUNK = 1 << 20
_ERROR_BODY = 1 << 20
_ID = re.compile(rb'"(?:custom_id|key)"\s*:\s*"([A-Za-z0-9_-]{1,64})"')


@dataclass(slots=True)
class LongLine:
    """A result line over the bound: its start and its length, nothing more."""

    head: bytes
    size: int
    limit: int

    def result(self) -> ResultLine:
        m = _ID.search(self.head)
        return ResultLine(custom_id=m.group(1).decode() if m else "", kind="fatal",
                          message=f"its result line is {self.size} bytes, over the {self.limit}-byte limit: not read")


class LineCutter:
    """Newline-cutting over chunks, with at most ``max_line`` bytes of one line held at a time."""

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self.lines: list[bytes | LongLine] = []
        self._buf = bytearray()
        self._long: LongLine | None = None

    def feed(self, chunk: bytes) -> None:
        start = 0
        while start < len(chunk):
            nl = chunk.find(b"\n", start)
            if nl >= 0 and not self._buf and self._long is None and nl - start <= self.max_line:
                line = chunk[start:nl]  # the common case, a whole line inside one chunk: one copy
                if line.strip():
                    self.lines.append(line)
                start = nl + 1
                continue
            self._take(chunk[start:len(chunk) if nl < 0 else nl])
            if nl < 0:
                return
            self._end_line()
            start = nl + 1

    def close(self) -> list[bytes | LongLine]:
        self._end_line()
        return self.lines

    def _take(self, piece: bytes) -> None:
        if self._long is not None:
            self._long.size += len(piece)
            return
        self._buf += piece
        if len(self._buf) > self.max_line:
            self._long = LongLine(head=bytes(self._buf[:_HEAD]), size=len(self._buf), limit=self.max_line)
            self._buf = bytearray()

    def _end_line(self) -> None:
        if self._long is not None:
            self.lines.append(self._long)
            self._long = None
        elif self._buf.strip():
            self.lines.append(bytes(self._buf))
        self._buf = bytearray()


async def http_lines(session: aiohttp.ClientSession, url: str, classify: Callable[[int, bytes], ProviderError],
                     max_line: int = MAX_RESULT_LINE, **kwargs: object) -> list[bytes | LongLine]:
    """``GET url``'s non-empty lines, each at most ``max_line`` bytes (a longer one is a ``LongLine``)."""
    cutter = LineCutter(max_line)
    try:
        async with session.request("GET", url, **kwargs) as resp:  # type: ignore[arg-type]
            if resp.status != 200:
                raise classify(resp.status, await resp.content.read(_ERROR_BODY))
            async for chunk in resp.content.iter_chunked(_CHUNK):
                cutter.feed(chunk)
    except TimeoutError:
        raise ProviderError("timeout", f"GET {url}: no answer within the timeout") from None
    except aiohttp.ClientConnectionError as e:
        raise connection_error(e, url) from None
    except aiohttp.ClientPayloadError as e:
        raise ProviderError("transient", f"GET {url}: truncated body ({type(e).__name__})") from None
    return cutter.close()
