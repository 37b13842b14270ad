"""Running the hub's async client from synchronous code (a suite's loader, the CLI).

A loader runs in a worker thread of the sweep, or on the main thread of ``--dry-run``, where an
event loop may already be running; ``asyncio.run`` would fail there. A ``LoopThread`` owns a
private event loop on its own thread for as long as the loader needs it (one HTTP session for
every image of a dataset), and ``run`` blocks the caller until a coroutine finishes there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A private event loop on a daemon thread; ``with LoopThread() as lt: lt.run(coro)``."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LoopThread:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fasteval-hub", daemon=True)
        self._thread.start()
        return self

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("LoopThread used outside its with block")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        # Async generators are closed on the loop's own thread: the caller's thread may be running
        # a loop of its own (``--dry-run``), where ``run_until_complete`` cannot run.
        try:
            asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to its end from synchronous code, whatever loop this thread runs."""
    with LoopThread() as lt:
        return lt.run(coro)
