"""Batch mode: a batched model's requests are gathered into provider batches, journaled, awaited.

The hook is the model client: a batched client is built with its lane (``batch_lane``), and
``ModelClient.batch`` is the lane's ``chat``, which turns the request into a batch line,
enqueues it and awaits its result, so the agent loop does not change. Rounds
of every live trajectory of that model gather for ``gather_s`` (or until a documented limit in
requests or bytes) and go out as one batch; when it ends, each trajectory runs its tools locally
and its next request joins the next batch.

Restarts: a request's custom_id is a hash of (lane, job, request number within the job, body),
so the replayed agent loop of an unfinished job asks for the same ids. The journal
(fasteval.runfolder.batch_journal) answers a request that already succeeded without the
network, lets one still in an open batch wait for that batch (reattached at start: polled,
downloaded, or found again by listing when the crash fell between create and id-recorded), and
resubmits only requests that did not succeed and whose error our retry taxonomy retries: in a
later batch, or (``batch: {fallback: interactive}``) at once through the model's interactive
client, at the full price; a job's records say how many (``metadata.batch_fallback``) and which
part of its tokens rode in batches (``usage.batch_*``, priced at the batch factor).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fasteval.core.errors import UnsafeRunFolder
from fasteval.core.job import JobContext, current_job
from fasteval.core.pricing import BATCH_TOKENS
from fasteval.engine.batch.batch_watch import COLLECT_TRIES, BatchUnknown, BatchWatch
from fasteval.runfolder.batch_journal import BatchJournal, JournalBatch, Outcome, RequestState
from fasteval.runfolder.diskfaults import is_fatal
from providers import (
    MODEL_RETRYABLE,
    BatchInfo,
    BatchSettings,
    BatchWire,
    ChatRequest,
    ChatResponse,
    EndpointDown,
    EndpointStats,
    ModelClient,
    ProviderError,
    RetryPolicy,
    custom_id_ok,
)

log = logging.getLogger(__name__)


def custom_id(lane: str, job: str, n: int, body: bytes) -> str:
    """Valid for every provider (``[a-zA-Z0-9_-]{1,64}``); the job/round map lives in the journal."""
    h = hashlib.blake2b(f"{lane}\x1f{job}\x1f{n}\x1f".encode(), digest_size=24)
    h.update(body)
    cid = f"fe_{h.hexdigest()}"
    assert custom_id_ok(cid)
    return cid


class BatchesPending(EndpointDown):
    """``--no-wait``: the job's request is at the provider; no record now, a rerun collects it."""


class _FallBack(Exception):
    """Set on a waiter whose batch failed retryably when the lane falls back to interactive requests."""


@dataclass(slots=True)
class _Queued:
    cid: str
    line: bytes
    job: str
    n: int


class BatchLane:
    """One batched model or role: gathers, submits, polls, downloads, resolves its requests."""

    def __init__(self, name: str, wire: BatchWire, journal: BatchJournal, settings: BatchSettings, *,
                 retry: RetryPolicy | None = None, stats: EndpointStats | None = None, no_wait: bool = False,
                 interactive: Callable[[ChatRequest], Awaitable[ChatResponse]] | None = None) -> None:
        self.name, self.wire, self.journal, self.settings = name, wire, journal, settings
        self.interactive = interactive
        """The model's interactive path (``ModelClient.chat_interactive``): ``fallback: interactive`` uses it."""
        self.retry = retry or RetryPolicy()
        self.stats = stats or EndpointStats()
        self.no_wait = no_wait
        self.max_requests = min(settings.max_requests or wire.max_requests, wire.max_requests)
        mb = settings.max_mb
        self.max_bytes = min(int(mb * 1024 * 1024) if mb else wire.max_bytes, wire.max_bytes)
        self.live: dict[str, BatchInfo | None] = {}
        """Open batches by local id: the provider's latest view (None until created)."""
        self.watch = BatchWatch(name, wire, settings, self.retry, self.live)
        self.submitted = 0
        self._queue: list[_Queued] = []
        self._qbytes = 0
        self._timer: asyncio.TimerHandle | None = None
        self._waiters: dict[str, asyncio.Future[bytes]] = {}
        self._created: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loose: dict[str, int] = {}
        self._given_up: dict[str, ProviderError] = {}
        """Batches (local ids) this process stopped driving (BatchUnknown): a job asking again fails at once."""

    # -- the client hook -----------------------------------------------------------------------------
    async def chat(self, request: ChatRequest) -> ChatResponse:
        slot = current_job()  # the job's request numbers make its custom_ids the same on a rerun
        body = await self.wire.body(request)
        if slot is not None:
            job, n = slot.job_id, slot.next_request(self.name)
        else:  # outside a job (a rescore): the n-th identical request of this process
            digest = hashlib.blake2b(body, digest_size=16).hexdigest()
            job, n = "-", self._loose.get(digest, 0)
            self._loose[digest] = n + 1
        cid = custom_id(self.name, job, n, body)
        fut = self._waiters.get(cid)
        if fut is None:
            st = self.journal.requests.get(cid)
            if st is not None and not st.resolved and (stuck := self._given_up.get(st.batches[-1])) is not None:
                raise stuck
            if st is not None and st.ok:  # a replayed job: its result is on disk, not in memory
                return self._response(await self._journaled_body(cid), st.batches[-1], slot)
            if st is not None and st.resolved and self._falls_back(st.kind):  # failed in an earlier run's batch
                return await self._fall_back(request, slot)
            fut = asyncio.get_running_loop().create_future()
            self._waiters[cid] = fut
            if st is None or st.resolved:  # new, or failed before: _resolve_failed decides
                if st is not None and not self._may_resubmit(st.kind, len(st.batches)):
                    del self._waiters[cid]
                    raise self._final(st)
                line = self.wire.line(cid, body)
                if len(line) + 1 > self.max_bytes:
                    del self._waiters[cid]
                    raise ProviderError("bad_input", f"request of {len(line)} bytes exceeds the batch limit of "
                                        f"{self.max_bytes} bytes")
                self._enqueue(_Queued(cid, line, job, n))
        if self.no_wait:
            await self._wait_submitted(cid)
            if not fut.done() or (fut.exception() is not None and not isinstance(fut.exception(), _FallBack)):
                raise BatchesPending(self.name, "its requests are in batches at the provider; rerun to collect them")
        try:
            raw = await fut
        except _FallBack:
            return await self._fall_back(request, slot)
        st = self.journal.requests[cid]
        return self._response(raw, st.batches[-1], slot)

    def _falls_back(self, kind: str | None) -> bool:
        return self.settings.fallback == "interactive" and self.interactive is not None and kind in MODEL_RETRYABLE

    async def _fall_back(self, request: ChatRequest, slot: JobContext | None) -> ChatResponse:
        """Its batch failed retryably: ask the model interactively now (full price) instead of another batch."""
        assert self.interactive is not None
        resp = await self.interactive(request)  # retries, breaker and token counts of the interactive client
        self.stats.batch_fallbacks += 1
        if slot is not None:
            slot.fallbacks += 1
        return resp

    async def _journaled_body(self, cid: str) -> bytes:
        try:
            return await asyncio.to_thread(self.journal.body, cid)
        except (OSError, ValueError, KeyError, UnsafeRunFolder) as e:  # never pay again for a result we hold
            raise ProviderError("fatal", f"its batch result is journaled but unreadable ({type(e).__name__}: {e}); "
                                "restore the run folder's batches/ files or start a new run") from None

    def _may_resubmit(self, kind: str | None, attempts: int) -> bool:
        """The ceiling: a request goes out in at most ``1 + max_resubmissions`` batches, over every rerun."""
        return kind in MODEL_RETRYABLE and attempts <= self.settings.max_resubmissions

    def _final(self, st: RequestState) -> ProviderError:
        """A failed request that is not sent again: its error, and why not when it could have been."""
        msg = st.message
        if st.kind in MODEL_RETRYABLE:
            msg = (f"{msg}; sent in {len(st.batches)} batch(es), the most batch.max_resubmissions "
                   f"({self.settings.max_resubmissions}) allows: not sent again")
        return ProviderError(st.kind or "fatal", f"{msg} (in batch)")  # type: ignore[arg-type]

    def _response(self, raw: bytes, local: str, slot: JobContext | None) -> ChatResponse:
        resp = self.wire.parse(raw)
        bid = self.journal.batches[local].batch_id
        u = resp.usage
        if slot is not None:
            if bid:
                slot.batch_ids.add(bid)
            mine = slot.batched.setdefault(self.name, dict.fromkeys(BATCH_TOKENS, 0))
            for key, n in zip(BATCH_TOKENS, (u.prompt_tokens, u.completion_tokens, u.cache_read_tokens,
                                            u.cache_write_tokens), strict=True):
                mine[key] += n
        s = self.stats
        s.requests += 1
        s.prompt_tokens += u.prompt_tokens
        s.completion_tokens += u.completion_tokens
        s.cache_read_tokens += u.cache_read_tokens
        s.cache_write_tokens += u.cache_write_tokens
        s.batch_prompt_tokens += u.prompt_tokens
        s.batch_completion_tokens += u.completion_tokens
        s.batch_cache_read_tokens += u.cache_read_tokens
        s.batch_cache_write_tokens += u.cache_write_tokens
        return resp

    async def _wait_submitted(self, cid: str) -> None:
        while True:
            st = self.journal.requests.get(cid)
            if st is not None and self.journal.batches[st.batches[-1]].batch_id:
                return
            if self._waiters[cid].done():
                return
            await asyncio.sleep(0.05)

    # -- gathering -----------------------------------------------------------------------------------
    def _enqueue(self, q: _Queued) -> None:
        self._queue.append(q)
        self._qbytes += len(q.line) + 1
        if len(self._queue) >= self.max_requests or self._qbytes >= self.max_bytes:
            self._flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.settings.gather_s, self._flush)

    def _flush(self) -> None:
        """Split what gathered by the limits (requests and bytes) and submit each part."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        chunk: list[_Queued] = []
        size = 0
        for q in self._queue:
            if chunk and (len(chunk) >= self.max_requests or size + len(q.line) + 1 > self.max_bytes):
                self._spawn(self._submit(chunk))
                chunk, size = [], 0
            chunk.append(q)
            size += len(q.line) + 1
        if chunk:
            self._spawn(self._submit(chunk))
        self._queue, self._qbytes = [], 0

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _submit(self, chunk: list[_Queued]) -> None:
        lines = [q.line for q in chunk]
        entries = [(q.cid, q.job, q.n) for q in chunk]
        chunk.clear()  # the lines live on in ``lines`` only until the batch is created (up to 200 MB of images)
        try:
            jb = await self.journal.begin(self.name, lines, entries)
        except (OSError, UnsafeRunFolder) as e:  # never submit what is not journaled first
            for cid, _, _ in entries:
                self._fail(cid, ProviderError("fatal", f"cannot journal a batch: {e}"))
            return
        del entries
        await self._drive(jb, lines, fresh=True)

    # -- one batch, from create to its last result ---------------------------------------------------
    async def reattach(self, only: set[str] | None = None) -> int:
        """Drive every batch the journal left open (a previous run's), or those of ``only`` (local ids); how many."""
        open_ = [b for b in self.journal.open_batches(self.name) if only is None or b.local in only]
        for jb in open_:
            self._spawn(self._drive(jb, None, fresh=False))
        return len(open_)

    async def _drive(self, jb: JournalBatch, lines: list[bytes] | None, *, fresh: bool) -> None:
        self.live[jb.local] = None
        created = self._created.setdefault(jb.local, asyncio.Event())
        got: dict[str, bytes] = {}
        """The downloaded bodies, handed to their waiters and then dropped (the journal keeps their place)."""
        try:
            if jb.batch_id is None:
                await self._ensure_created(jb, lines, fresh=fresh)
            if lines is not None:  # sent: the input on disk serves a re-create, not memory for hours
                lines.clear()  # (the caller's frame holds this same list)
                lines = None
            created.set()
            assert jb.batch_id is not None
            info = await self.watch.poll(jb.batch_id, jb.local, jb.at)
            outcomes, whole = await self._collect(jb, info)
            await self.journal.results(jb.local, outcomes, ended=info.status if whole else None)
            got = {}
            for c, body, _, _ in outcomes:  # a duplicate id: the first body wins, as in the journal
                if body is not None:
                    got.setdefault(c, body)
            if not whole:  # the rest may have run: never sent again, the batch stays open for a rerun
                self._given_up[jb.local] = ProviderError("transient", f"batch {info.id}: no readable result for this "
                                                         f"request after {COLLECT_TRIES} downloads of results that "
                                                         "hold lines not ours; it may have run and been paid for, so "
                                                         "it is not submitted again: rerun later to collect it")
        except BatchUnknown as e:  # never "ended": the batch may still run, so nothing of it is sent again
            log.warning("model %s: %s", self.name, e)
            err = ProviderError("transient", str(e))
            self._given_up[jb.local] = err
            self._fail_all(jb, err)
            return
        except ProviderError as e:  # the batch could not be created (and provably was not): its requests failed
            try:
                await self.journal.results(jb.local, [(c, None, e.kind, f"batch: {e}") for c in jb.ids],
                                           ended="unreachable")
            except OSError as oe:
                self._fail_all(jb, ProviderError("fatal", f"cannot journal batch {jb.local}: {oe}"))
                return
        except Exception as e:  # a journal write or our bug: its jobs end in error instead of waiting forever
            if not is_fatal(e):  # a storage fault stopped the sweep with one line naming the file: no traceback
                log.error("model %s: batch %s failed: %s", self.name, jb.batch_id or jb.local, e, exc_info=True)
            self._fail_all(jb, ProviderError("fatal", f"batch {jb.batch_id or jb.local}: {type(e).__name__}: {e}"))
            return
        finally:
            created.set()
            self.live.pop(jb.local, None)
        self._wake(jb, got)

    async def _ensure_created(self, jb: JournalBatch, lines: list[bytes] | None, *, fresh: bool) -> None:
        if not fresh:
            found = await self._found(jb)
            if found is not None:
                await self.journal.created(jb.local, found)
                return
        file_id = jb.file_id
        if file_id is None and not fresh:
            file_id = await self._retry(lambda: self.wire.find_file(jb.local))
            if file_id is not None:  # uploaded before a crash: journaled now, so a later rerun skips the search
                await self.journal.file(jb.local, file_id)
        if lines is None:
            lines = await asyncio.to_thread(self.journal.input_lines, jb.local)

        async def on_file(fid: str) -> None:
            await self.journal.file(jb.local, fid)

        async def attempt() -> str:
            try:
                return await self.wire.create(jb.local, lines, file_id=jb.file_id or file_id, on_file=on_file)
            except ProviderError as e:
                if e.kind in ("timeout", "transient"):  # it may have been created all the same
                    found = await self._found(jb)
                    if found is not None:
                        return found
                raise

        bid = await self._retry(attempt)
        await self.journal.created(jb.local, bid)
        self.submitted += 1

    async def _found(self, jb: JournalBatch) -> str | None:
        """A batch created for ``jb`` whose id we never recorded, proven ours, or None when provably none.

        A wire that can only guess (``find_proves`` False) has each guess confirmed by its custom_ids
        (read once it ended) before it is adopted; a stranger is journaled as forgotten, never touched.
        """
        siblings: set[str] = set()
        """Batches of ours for another journaled batch (ids lost the same way): theirs to adopt, not forgotten."""
        while True:
            try:
                bid: str | None = await self._retry(
                    lambda: self.wire.find(jb.local, jb.at, len(jb.ids), self.journal.claimed() | siblings))
            except ProviderError as e:
                raise BatchUnknown(f"batch {jb.local}: cannot tell whether it was created at the provider ({e}); "
                                   "not submitting its requests again: rerun later") from None
            if bid is None or self.wire.find_proves:
                return bid
            seen = await self.watch.guess_ids(bid, jb.local, jb.at, jb.ids)
            if not seen.isdisjoint(jb.ids):
                return bid
            if not seen.isdisjoint(self.journal.requests):
                siblings.add(bid)
                continue
            log.info("model %s: batch %s (found by request count and time) is not ours", self.name, bid)
            await self.journal.forget(jb.local, bid)

    async def _collect(self, jb: JournalBatch, info: BatchInfo) -> tuple[list[Outcome], bool]:
        """The batch's outcomes, and whether they are all it will give (else the rest stay unknown)."""
        if info.failed is not None:
            return [(c, None, "fatal", f"batch {info.id} failed: {info.failed}") for c in jb.ids], True
        lines, whole = await self.watch.download(info, jb.ids)
        return [(r.custom_id, r.body, r.kind, r.message) for r in lines], whole

    async def _retry(self, call: Any) -> Any:
        return await self.watch.retry(call)

    # -- resolving waiters ---------------------------------------------------------------------------
    def _wake(self, jb: JournalBatch, got: dict[str, bytes]) -> None:
        again: list[RequestState] = []
        for cid in jb.ids:
            fut = self._waiters.get(cid)
            if fut is None or fut.done():
                continue  # no job waits (a rerun's replay reads it from the journal when it asks)
            st = self.journal.requests[cid]
            if st.batches[-1] != jb.local:
                continue  # resubmitted since: a later batch resolves it
            if not st.resolved and (stuck := self._given_up.get(jb.local)) is not None:
                self._fail(cid, stuck)
                continue
            if st.ok:
                body = got.get(cid)
                if body is None:  # journaled by an earlier event of this batch: read it back
                    self._spawn(self._deliver(cid))
                    continue
                del self._waiters[cid]
                fut.set_result(body)
            elif self._falls_back(st.kind):
                del self._waiters[cid]
                fut.set_exception(_FallBack())
            elif self._may_resubmit(st.kind, len(st.batches)):
                again.append(st)
            else:
                self._fail(cid, self._final(st))
        if again:
            self._resubmit(jb.local, again)

    async def _deliver(self, cid: str) -> None:
        fut = self._waiters.pop(cid, None)
        if fut is None or fut.done():
            return
        try:
            fut.set_result(await self._journaled_body(cid))
        except ProviderError as e:
            fut.set_exception(e)

    def _resubmit(self, local: str, again: list[RequestState]) -> None:
        """Queue retryable failures for the next batch, their bodies read from the batch input that carried them."""
        try:
            bodies = self._bodies(local, {st.cid for st in again})
        except (OSError, ValueError, KeyError, UnsafeRunFolder) as e:
            bodies, why = {}, f"{type(e).__name__}: {e}"
        else:
            why = "not in it"
        for st in again:
            body = bodies.get(st.cid)
            if body is None:
                self._fail(st.cid, ProviderError("fatal", f"cannot resubmit {st.cid}: its batch input is unreadable "
                                                 f"({why})"))
                continue
            self._enqueue(_Queued(st.cid, self.wire.line(st.cid, body), st.job, st.n))

    def _bodies(self, local: str, wanted: set[str]) -> dict[str, bytes]:
        """custom_id -> request body of ``wanted``, from the batch input that carried them."""
        out: dict[str, bytes] = {}
        for line in self.journal.input_lines(local):
            cid, body = self.wire.entry(line)
            if cid in wanted:
                out[cid] = body
        return out

    def _fail_all(self, jb: JournalBatch, e: ProviderError) -> None:
        for cid in jb.ids:
            self._fail(cid, e)

    def _fail(self, cid: str, e: ProviderError) -> None:
        fut = self._waiters.pop(cid, None)
        if fut is not None and not fut.done():
            self.stats.errors += 1
            fut.set_exception(e)

    # -- the end -------------------------------------------------------------------------------------
    def rows(self) -> dict[str, dict[str, Any]]:
        """Per batch in flight, for the live panel: requests, the provider's status, age, its counts."""
        out: dict[str, dict[str, Any]] = {}
        for jb in self.journal.open_batches(self.name):
            info = self.live.get(jb.local)
            counts = " ".join(f"{k}={v}" for k, v in (info.counts if info else {}).items())
            out[f"batch {jb.batch_id or 'submitting'} ({self.name})"] = {
                "in_flight": len(jb.ids), "limit": info.status if info else "unknown" if jb.local in self._given_up
                else "submitting",
                "waiting": f"{batch_age(info, jb.at) / 60:.0f}m", "requests": counts}
        if self._queue:
            out[f"batch gathering ({self.name})"] = {"in_flight": len(self._queue), "limit": "-", "waiting": "-",
                                                     "requests": ""}
        return out

    async def drained(self) -> None:
        """Until every batch this lane drives has ended and been collected."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def in_flight(self) -> int:
        """Open batches known to be at the provider (their id is journaled)."""
        return sum(1 for b in self.journal.open_batches(self.name) if b.batch_id)

    async def close(self) -> None:
        """Leave batches at the provider (their cost is committed): a rerun collects them."""
        if self._timer is not None:
            self._timer.cancel()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        left = self.in_flight()
        if left:
            log.warning("model %s: %d batch(es) left running at the provider; rerun the same command to collect "
                        "them (fasteval batches cancel RUN stops them)", self.name, left)
        unsure = len(self.journal.open_batches(self.name)) - left
        if unsure:  # stopped while uploading or creating: nothing may exist, so none is said to be running
            log.warning("model %s: %d batch(es) were being submitted when stopped; the rerun finds any that was "
                        "created, or submits it", self.name, unsure)
        await self.wire.close()


def batch_age(info: BatchInfo | None, at: float) -> float:
    return time.time() - (info.created_at if info is not None and info.created_at else at)


def concurrency_caps(lanes: dict[str, BatchLane], cap: int, jobs: int) -> list[str]:
    """One warning line per batched model whose batches ``run.max_concurrency`` keeps smaller than its limit.

    A batch gathers one request per live trajectory, and at most ``cap`` trajectories live at once:
    a batch never holds more than ``cap`` requests, whatever ``max_requests`` says (unless the run
    has fewer jobs than ``cap``, when the cap never binds).
    """
    if jobs <= cap:
        return []
    out = []
    for name, lane in lanes.items():
        if lane.max_requests > cap:
            whose = "batch.max_requests" if lane.settings.max_requests else "the provider's limit"
            out.append(f"model {name}: its batches hold at most {cap} requests (one per live trajectory, "
                       f"run.max_concurrency {cap}), not {lane.max_requests} ({whose}); raise run.max_concurrency "
                       f"(or --max-concurrency) for bigger batches")
    return out


def pending_line(lanes: dict[str, BatchLane], not_run: int) -> str:
    """The one line a run whose remaining work is batches at the provider ends with (exit 3)."""
    open_ = [b for lane in lanes.values() for b in lane.journal.open_batches(lane.name)]
    by = ", ".join(f"{n}: {k}" for n, lane in lanes.items() if (k := lane.in_flight()))
    latest = max((b.at for b in open_), default=time.time()) + 24 * 3600
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(latest))
    return (f"incomplete: {len(open_)} batch(es) at the provider ({by}) hold the work of {not_run} job(s); most "
            f"batches end within an hour, all by {when}: rerun the same command then to collect them")


def batch_lane(settings: BatchSettings, journal: BatchJournal, wire: str, *,
               no_wait: bool = False) -> Callable[[ModelClient], BatchLane]:
    """What puts a model client in batch mode as it is built (``build_client(batch=...)``): its lane,
    given the client whose provider, retry policy, stats and interactive path the lane uses, and the
    batch API of its ``wire``."""
    def lane(client: ModelClient) -> BatchLane:
        from providers import batch_wire

        return BatchLane(client.name, batch_wire(wire, client.provider), journal, settings, retry=client.retry,
                         stats=client.stats, no_wait=no_wait, interactive=client.chat_interactive)
    return lane
