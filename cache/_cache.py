"""The async cache: per-namespace modes, batched reads, one writer, single-flight computes.

Thousands of concurrent jobs call ``get``/``put``/``get_or_compute``; none of them touches SQLite on
the event loop. Reads go to a reader thread and writes to ONE writer thread (so jobs never contend on
the database lock among themselves; other processes wait on ``busy_timeout``). Identical concurrent
misses share one computation, so 500 jobs asking the same search query cost one upstream call.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import orjson

from cache._store import (
    CacheValue,
    Codec,
    EmptyValueError,
    Encoded,
    Lookup,
    NamespaceStats,
    PutRow,
    add_counters,
    db_stats,
    decode_value,
    default_cache_path,
    encode_value,
    prepare,
    read_rows,
    write_rows,
)
from cache._transfer import export_cache, import_cache
from cache._worker import SqliteWorker

log = logging.getLogger("fasteval.cache")

Mode = Literal["use", "refresh", "off", "replay"]
"""use: read+write; refresh: write only (recompute everything); off: bypass; replay: read only, a miss
raises CacheMiss so a frozen sweep never reaches the network."""

MODES: tuple[Mode, ...] = get_args(Mode)
NAMESPACES = ("search", "page", "summary", "judge", "model")
OPT_IN: dict[str, Mode] = {"model": "off"}
"""Namespaces off unless named: model turns are cached only on request (sampled outputs vary)."""
DEFAULT_MODES: dict[str, Mode] = {"search": "use", "page": "use", "summary": "use", "judge": "use", **OPT_IN}
"""Tool results and verdicts are cached by default; model turns only on request."""

_NS_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


class CacheMiss(LookupError):
    """A replay-mode lookup found nothing: the sweep is not fully frozen for this input."""

    def __init__(self, namespace: str, key: str) -> None:
        super().__init__(f"cache miss in replay mode: namespace {namespace!r}, key {key} "
                         "(replay never computes; rerun with mode 'use' to fill it)")
        self.namespace = namespace
        self.key = key


def parse_modes(spec: str) -> dict[str, Mode]:
    """Parse ``"replay"`` (every namespace) or ``"search=replay,model=use"``; ``*`` means default."""
    out: dict[str, Mode] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        ns, _, mode = part.rpartition("=")
        if mode not in MODES:
            raise ValueError(f"unknown cache mode {mode!r} (choose from {', '.join(MODES)})")
        out[ns or "*"] = mode
    return out


def _read_batch(conn: sqlite3.Connection, codec: Codec, lookups: list[Lookup]) -> list[Any]:
    try:
        found = read_rows(conn, codec, lookups)
    except sqlite3.DatabaseError as exc:
        # A file damaged mid-run degrades to misses: a slower run, never a crashed one.
        log.warning("cache read failed (%s); treating %d lookups as misses", exc, len(lookups))
        return [None] * len(lookups)
    return [found.get(lk) for lk in lookups]


def _write_batch(conn: sqlite3.Connection, codec: Codec, rows: list[PutRow]) -> list[Any]:
    try:
        write_rows(conn, codec, rows)
    except sqlite3.Error as exc:
        log.warning("cache write of %d entries failed (%s); they will be recomputed next time", len(rows), exc)
        return [False] * len(rows)
    return [True] * len(rows)


@dataclass(slots=True)
class _Flight:
    task: asyncio.Task[CacheValue]
    waiters: int = 0


@dataclass(slots=True)
class _Counts:
    hits: int = 0
    misses: int = 0


@dataclass(slots=True)
class _State:
    counts: dict[str, _Counts] = field(default_factory=dict)
    used: set[tuple[str, str]] = field(default_factory=set)


class Cache:
    """Content-addressed SQLite cache shared by all runs (and processes) that point at one file.

    Store only successes: ``put`` refuses empty values, and callers must not pass errors or
    content-filtered outputs (``get_or_compute`` takes a ``cacheable`` predicate for the latter).
    """

    def __init__(self, path: str | Path | None = None, *, modes: Mapping[str, Mode] | None = None,
                 compress_threshold: int = 1024) -> None:
        self.path = Path(path).expanduser() if path is not None else default_cache_path()
        self._modes: dict[str, Mode] = {}
        self._default: Mode = "use"
        for ns, mode in (modes or {}).items():
            self.set_mode(ns, mode)
        self._threshold = compress_threshold
        self._reader: SqliteWorker | None = None
        self._writer: SqliteWorker | None = None
        self._pending: dict[Lookup, Encoded] = {}
        self._flights: dict[Lookup, _Flight] = {}
        self._state = _State()
        self.moved_aside: Path | None = None
        """Where a corrupt database was moved at open, if it was."""

    # -- lifecycle ---------------------------------------------------------------------------------
    async def open(self) -> Cache:
        """Verify (or recover) the file, then start the reader and writer threads."""
        self.moved_aside = await asyncio.to_thread(prepare, self.path)
        self._reader = SqliteWorker("fasteval-cache-reader", self.path, _read_batch, self._threshold)
        self._writer = SqliteWorker("fasteval-cache-writer", self.path, _write_batch, self._threshold)
        await self._reader.start()
        await self._writer.start()
        return self

    async def close(self) -> None:
        """Commit queued writes, fold hit/miss counts into the file, stop the threads."""
        if self._writer is None or self._reader is None or self._writer.closed:
            return
        counts = {ns: (c.hits, c.misses) for ns, c in self._state.counts.items()}
        done = self._writer.submit(call=lambda conn, _c: add_counters(conn, counts))
        await self._writer.stop()
        await self._reader.stop()
        exc = done.exception() if done.done() else None
        if exc is not None:
            log.warning("could not save cache counters: %s", exc)

    async def __aenter__(self) -> Cache:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- modes -------------------------------------------------------------------------------------
    def mode(self, namespace: str) -> Mode:
        """The mode of ``namespace``: its own if set, ``off`` for the opt-in ``model``, else the default."""
        explicit = self._modes.get(namespace)
        if explicit is not None:
            return explicit
        return OPT_IN.get(namespace, self._default)

    def set_mode(self, namespace: str, mode: Mode) -> None:
        """Set one namespace's mode; ``*`` sets the default of every namespace not named.

        The default never turns on the opt-in ``model`` namespace: ``--cache-mode replay`` freezes
        the tools and the judge while the model under test still runs live.
        """
        if mode not in MODES:
            raise ValueError(f"unknown cache mode {mode!r}")
        if namespace == "*":
            self._default = mode
        else:
            _check_ns(namespace)
            self._modes[namespace] = mode

    # -- reads and writes --------------------------------------------------------------------------
    async def get(self, namespace: str, key: str) -> CacheValue | None:
        """The cached value, or None on a miss (``off``/``refresh`` always miss).

        In ``replay`` mode a miss raises ``CacheMiss`` naming the namespace and key.
        """
        mode = self.mode(namespace)
        if mode in ("off", "refresh"):
            return None
        lk = (namespace, key)
        enc = self._pending.get(lk)
        if enc is None:
            enc = await self._require(self._reader).submit(lk)
        counts = self._counts(namespace)
        if enc is None:
            counts.misses += 1
            if mode == "replay":
                raise CacheMiss(namespace, key)
            return None
        counts.hits += 1
        self._state.used.add(lk)
        return decode_value(enc.kind, enc.data)

    async def put(self, namespace: str, key: str, value: CacheValue) -> bool:
        """Store a successful result; True once committed. Empty values raise ``EmptyValueError``.

        No-op (False) in ``off`` and ``replay`` modes; a failed write is logged and returns False.
        """
        enc = encode_value(value)
        if self.mode(namespace) in ("off", "replay"):
            return False
        result: bool = await self._enqueue(namespace, key, enc)
        return result

    async def get_or_compute(self, namespace: str, key: str,
                             compute: Callable[[], Awaitable[CacheValue]], *,
                             cacheable: Callable[[CacheValue], bool] | None = None) -> CacheValue:
        """Cached value, or ``compute()`` run once for all concurrent callers of the same key.

        If ``compute`` raises, every waiter gets the exception and nothing is stored. Results that
        are empty, or that ``cacheable`` rejects (e.g. content-filtered), are returned but not stored.
        Dict results are copied per caller, so one job mutating its result cannot affect another.
        """
        mode = self.mode(namespace)
        if mode == "off":
            return await compute()
        lk = (namespace, key)
        flight = self._flights.get(lk)
        if flight is None:
            task = asyncio.ensure_future(self._lookup_or_compute(namespace, key, mode, compute, cacheable))
            flight = self._flights[lk] = _Flight(task)
            task.add_done_callback(lambda _t: self._end_flight(lk, flight))
        flight.waiters += 1
        try:
            value = await asyncio.shield(flight.task)
        except asyncio.CancelledError:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                flight.task.cancel()  # nobody wants the result any more
            raise
        flight.waiters -= 1
        if isinstance(value, dict) and flight.waiters > 0:
            value = orjson.loads(orjson.dumps(value))
        return value

    def _end_flight(self, lk: Lookup, flight: _Flight) -> None:
        if self._flights.get(lk) is flight:
            del self._flights[lk]
        if not flight.task.cancelled():
            flight.task.exception()  # mark retrieved: the waiters got it already

    async def _lookup_or_compute(self, namespace: str, key: str, mode: Mode,
                                 compute: Callable[[], Awaitable[CacheValue]],
                                 cacheable: Callable[[CacheValue], bool] | None) -> CacheValue:
        if mode == "refresh":
            self._counts(namespace).misses += 1
        else:
            hit = await self.get(namespace, key)  # raises CacheMiss in replay mode
            if hit is not None:
                return hit
        value = await compute()
        if cacheable is not None and not cacheable(value):
            return value
        try:
            enc = encode_value(value)
        except EmptyValueError:
            log.debug("not caching an empty %s result for key %s", namespace, key)
            return value
        # Not awaited: the pending map already serves this value to later callers until it commits.
        self._enqueue(namespace, key, enc)
        return value

    def _enqueue(self, namespace: str, key: str, enc: Encoded) -> asyncio.Future[Any]:
        lk = (namespace, key)
        writer = self._require(self._writer)
        self._pending[lk] = enc
        self._state.used.add(lk)
        fut = writer.submit((namespace, key, enc))

        def committed(f: asyncio.Future[Any]) -> None:
            if self._pending.get(lk) is enc:
                del self._pending[lk]
            if not f.cancelled() and f.exception() is not None:
                log.warning("cache write for %s/%s not stored: %s", namespace, key, f.exception())

        fut.add_done_callback(committed)
        return fut

    async def flush(self) -> None:
        """Wait until every write queued so far is committed."""
        await self._require(self._writer).submit(call=lambda _conn, _codec: None)

    # -- introspection -----------------------------------------------------------------------------
    async def stats(self) -> dict[str, NamespaceStats]:
        """Entries and bytes per namespace on disk, with this process's hits and misses."""
        await self.flush()
        out: dict[str, NamespaceStats] = await self._require(self._reader).submit(
            call=lambda conn, _codec: db_stats(conn, scope="none"))
        for ns, c in self._state.counts.items():
            st = out.setdefault(ns, NamespaceStats(ns))
            st.hits, st.misses = c.hits, c.misses
        return out

    async def export(self, out: str | Path, *, namespace: str | None = None,
                     keys: Iterable[tuple[str | None, str]] | None = None) -> int:
        """Export committed entries (see ``export_cache``) after flushing queued writes."""
        await self.flush()
        return await asyncio.to_thread(export_cache, self.path, out, namespace=namespace,
                                       keys=None if keys is None else list(keys))

    async def import_file(self, file: str | Path) -> int:
        """Import an export into this cache (see ``import_cache``)."""
        await self.flush()
        return await asyncio.to_thread(import_cache, self.path, file)

    def used_keys(self) -> set[tuple[str, str]]:
        """(namespace, key) pairs this process read as hits or wrote: what a run depends on."""
        return set(self._state.used)

    async def write_used_keys(self, path: str | Path) -> int:
        """Write ``used_keys()`` as ``<namespace> <key>`` lines (the run dir's ``cache_keys.txt``)."""
        lines = sorted(f"{ns} {key}\n" for ns, key in self._state.used)
        await asyncio.to_thread(Path(path).write_text, "".join(lines))
        return len(lines)

    def _counts(self, namespace: str) -> _Counts:
        c = self._state.counts.get(namespace)
        if c is None:
            c = self._state.counts[namespace] = _Counts()
        return c

    @staticmethod
    def _require(worker: SqliteWorker | None) -> SqliteWorker:
        if worker is None:
            raise RuntimeError("cache is not open: use 'await cache.open()' or 'async with Cache(...)'")
        return worker


def _check_ns(namespace: str) -> None:
    if not _NS_RE.match(namespace):
        raise ValueError(f"bad cache namespace {namespace!r}: lowercase letters, digits, _ . -")

