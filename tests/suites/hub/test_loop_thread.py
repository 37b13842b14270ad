"""The hub's sync bridge runs a coroutine from any thread, whatever loop that thread runs."""

from __future__ import annotations

import asyncio
import gc
import warnings

from fasteval.suites.hub.loop_thread import run_blocking


async def _answer() -> int:
    await asyncio.sleep(0)
    return 42


def test_run_blocking_inside_a_running_loop_returns_and_leaves_no_coroutine_unawaited() -> None:
    """``--dry-run`` loads suites on the main thread, inside the CLI's loop: the bridge must not
    run anything on that thread's loop (it raised RuntimeError and left a coroutine unawaited)."""
    async def caller() -> int:
        return run_blocking(_answer())

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert asyncio.run(caller()) == 42
        gc.collect()

