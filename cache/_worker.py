"""A SQLite connection on its own thread, serving the event loop in batches.

sqlite3 blocks, and a thread hop per query caps a cache at a few thousand operations per second.
Here the loop only enqueues; the thread drains everything queued since its last pass, runs it as one
batch (one ``IN`` query for reads, one transaction for writes) and settles all futures with a single
``call_soon_threadsafe``. Under load batches grow by themselves, so cost per operation falls.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cache._store import Codec, connect

log = logging.getLogger("fasteval.cache")

Call = Callable[[sqlite3.Connection, Codec], Any]
"""A one-off operation run alone on the worker's connection (stats, counters, flush)."""

BatchFn = Callable[[sqlite3.Connection, Codec, list[Any]], list[Any]]
"""Runs all batchable payloads of one pass; returns one result (or exception) per payload."""

_MAX_BATCH = 4096


class _Item:
    __slots__ = ("fut", "loop", "payload", "call")

    def __init__(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any],
                 payload: Any, call: Call | None) -> None:
        self.loop, self.fut, self.payload, self.call = loop, fut, payload, call


def _settle(pairs: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for fut, res in pairs:
        if fut.done():  # the awaiting caller was cancelled
            continue
        if isinstance(res, BaseException):
            fut.set_exception(res)
        else:
            fut.set_result(res)


class SqliteWorker:
    """Owns one connection (made on its own thread, as sqlite3 requires) and a FIFO of operations."""

    def __init__(self, name: str, path: Path, batch_fn: BatchFn, compress_threshold: int) -> None:
        self._path = path
        self._batch_fn = batch_fn
        self._threshold = compress_threshold
        self._q: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._ready: asyncio.Future[None] | None = None
        self.closed = False

    async def start(self) -> None:
        """Start the thread and wait until its connection is open (errors surface here, not later)."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._loop = loop
        self._thread.start()
        await self._ready

    def submit(self, payload: Any = None, call: Call | None = None) -> asyncio.Future[Any]:
        """Queue a batchable payload (or a one-off ``call``); the future settles after it ran."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if self.closed:
            fut.set_exception(RuntimeError("cache is closed"))
        else:
            self._q.put(_Item(loop, fut, payload, call))
        return fut

    async def stop(self) -> None:
        """Run everything already queued, close the connection, join the thread."""
        if self.closed:
            return
        self.closed = True
        self._q.put(None)
        await asyncio.to_thread(self._thread.join)

    def _run(self) -> None:
        assert self._ready is not None
        try:
            conn = connect(self._path)
            codec = Codec(self._threshold)
        except BaseException as exc:  # report to the opener instead of dying silently
            self._loop.call_soon_threadsafe(_settle, [(self._ready, exc)])
            return
        self._loop.call_soon_threadsafe(_settle, [(self._ready, None)])
        try:
            stop = False
            while not stop:
                first = self._q.get()
                if first is None:
                    break
                batch = [first]
                while len(batch) < _MAX_BATCH:
                    try:
                        nxt = self._q.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stop = True
                        break
                    batch.append(nxt)
                self._run_batch(conn, codec, batch)
        finally:
            conn.close()

    def _run_batch(self, conn: sqlite3.Connection, codec: Codec, batch: list[_Item]) -> None:
        results: dict[int, Any] = {}
        plain = [i for i, item in enumerate(batch) if item.call is None]
        if plain:
            try:
                out = self._batch_fn(conn, codec, [batch[i].payload for i in plain])
            except Exception as exc:
                out = [exc] * len(plain)
            results.update(zip(plain, out, strict=True))
        for i, item in enumerate(batch):
            if item.call is not None:
                try:
                    results[i] = item.call(conn, codec)
                except Exception as exc:
                    results[i] = exc
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
        for i, item in enumerate(batch):
            by_loop.setdefault(item.loop, []).append((item.fut, results[i]))
        for loop, pairs in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, pairs)
            except RuntimeError:  # that loop is gone; nobody is waiting any more
                log.debug("cache worker: event loop closed before results were delivered")
