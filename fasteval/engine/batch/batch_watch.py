"""Watching a batch at its provider: polling it to its end and reading its results, under one rule.

A batch is ours when we hold its id (we created it, or found it by a mark we set), or when a
batch found only by a guess shows one of our custom_ids in its results. What the provider says
otherwise (an outage, a status word we do not know, an HTML page for a results file, someone
else's ids, a junk line) is "we do not know yet", never "ended" and never "not ours": the requests
of a batch that may still run, or may have run, are never submitted again. When we cannot learn
more (past the batch's window, or after COLLECT_TRIES downloads) the lane ends their jobs in
error and leaves the batch open in the journal, for a rerun to collect or ``batches cancel``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from providers import (
    MODEL_RETRYABLE,
    BatchInfo,
    BatchSettings,
    BatchWire,
    ProviderError,
    ResultLine,
    RetryPolicy,
    retry_call,
)

log = logging.getLogger("fasteval.engine.batch.batching")

COLLECT_TRIES = 3
"""Downloads of an ended batch's results before its jobs end in error: a download that fails, or
results that hold none of the batch's custom_ids (an HTML page, someone else's ids, a junk line)."""
POLL_GRACE_S = 25 * 3600.0
"""A batch that cannot be polled is polled again, with backoff, this long after it was begun (the
providers' 24 h window and an hour); past it, its jobs end in error and it stays open in the journal."""
POLL_BACKOFF_MAX_S = 600.0


class BatchUnknown(Exception):
    """We cannot learn a batch's state or results now. Its requests may have run (and be paid for),
    so they are never submitted again: their jobs end in error, the batch stays open in the journal
    (a rerun polls and collects it; ``fasteval batches cancel`` cancels it)."""


class BatchWatch:
    """One lane's polls and downloads (``live`` gets the provider's latest view of each batch)."""

    def __init__(self, name: str, wire: BatchWire, settings: BatchSettings, retry: RetryPolicy,
                 live: dict[str, BatchInfo | None]) -> None:
        self.name, self.wire, self.settings, self.retry_policy, self.live = name, wire, settings, retry, live

    async def retry(self, call: Any) -> Any:
        return await retry_call(self.retry_policy, call, error_type=ProviderError, retryable=MODEL_RETRYABLE)

    def _backoff(self, n: int) -> float:
        return float(min(self.settings.poll_s * 2 ** min(n, 12), max(self.settings.poll_s, POLL_BACKOFF_MAX_S)))

    async def poll(self, batch_id: str, local: str, at: float) -> BatchInfo:
        """Until the batch ends. A failed poll (an outage, an unreadable answer, a status word we do not
        know) means "we do not know yet": polled again with backoff, one line in run.log, never an end."""
        fails = 0
        while True:
            try:
                info: BatchInfo = await self.retry(lambda: self.wire.retrieve(batch_id))
            except ProviderError as e:
                fails += 1
                if time.time() > at + POLL_GRACE_S:
                    raise BatchUnknown(f"batch {batch_id}: cannot poll it ({e}); it stays open in the run folder: "
                                       "rerun to collect it, or `fasteval batches cancel` it") from None
                if fails == 1:
                    log.warning("model %s: batch %s: cannot poll it (%s); polling on with backoff: its state is "
                                "unknown, so it is neither ended nor submitted again", self.name, batch_id, e)
                await asyncio.sleep(self._backoff(fails))
                continue
            if fails:
                log.warning("model %s: batch %s: polled again after %d failed round(s): %s", self.name, batch_id,
                            fails, info.status)
                fails = 0
            self.live[local] = info
            if info.state == "ended":
                return info
            await asyncio.sleep(self.settings.poll_s)

    async def _lines(self, info: BatchInfo, ids: list[str], n: int) -> list[ResultLine] | str:
        """One download (after a backoff when ``n`` > 0): the lines, or why there are none to read."""
        if n:
            await asyncio.sleep(self._backoff(n))
        try:
            lines: list[ResultLine] = await self.retry(lambda: self.wire.results(info, ids))
        except ProviderError as e:
            return f"its results could not be downloaded ({e})"
        return lines

    async def download(self, info: BatchInfo, ids: list[str]) -> tuple[list[ResultLine], bool]:
        """An ended batch's result lines that name one of ``ids`` (the first of a duplicate), and whether
        that is all the batch will say: none when the provider holds none (expired, or past its
        retention). Results with lines that are not ours (unreadable, someone else's ids) and ids of
        ours missing are downloaded again; after COLLECT_TRIES the missing ones may have run, so
        False. BatchUnknown when no download worked or none held one of ours: a fault of the batch,
        never "not ours"."""
        wanted = set(ids)
        why = ""
        best: list[ResultLine] | None = None
        for n in range(COLLECT_TRIES):
            lines = await self._lines(info, ids, n)
            if isinstance(lines, str):
                why = lines
                continue
            mine: dict[str, ResultLine] = {}
            for r in lines:
                if r.custom_id in wanted:
                    mine.setdefault(r.custom_id, r)
            strangers = sum(1 for r in lines if r.custom_id not in wanted)
            if strangers:
                log.warning("model %s: batch %s: %d result line(s) that are not its requests' ignored", self.name,
                            info.id, strangers)
            if not lines or (mine and (not strangers or len(mine) == len(wanted))):
                return list(mine.values()), True
            if mine:
                best = list(mine.values())
            why = _none_of_ours(lines, len(wanted)) if not mine else why
        if best is not None:
            return best, False
        raise BatchUnknown(f"batch {info.id}: {why}, {COLLECT_TRIES} downloads; its requests may have run and been "
                           "paid for, so they are not submitted again: rerun later to collect them")

    async def guess_ids(self, batch_id: str, local: str, at: float, ids: list[str]) -> set[str]:
        """The custom_ids in the results of a batch found only by a guess (read once it has ended; it is
        never cancelled): it is ours when they hold one of ``ids``, and not when they hold readable ids,
        none ours, or nothing at all. BatchUnknown when they cannot be read."""
        info = await self.poll(batch_id, local, at)
        why = ""
        for n in range(COLLECT_TRIES):
            lines = await self._lines(info, ids, n)
            if isinstance(lines, str):
                why = lines
                continue
            seen = {r.custom_id for r in lines if r.custom_id}
            if seen or not lines:
                return seen
            why = _none_of_ours(lines, len(ids))
        raise BatchUnknown(f"batch {batch_id} (found by its request count and time after a crash): {why}, "
                           f"{COLLECT_TRIES} downloads; cannot tell whether it is ours, so nothing is submitted "
                           "again: rerun later")


def _none_of_ours(lines: list[ResultLine], wanted: int) -> str:
    first = lines[0].message or lines[0].custom_id
    return f"its {len(lines)} result line(s) hold none of its {wanted} requests' ids (first: {first[:120]!r})"
