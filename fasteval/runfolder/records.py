"""The run folder: manifest, append-only JSONL records, and resume bookkeeping.

A record line is written whole (one ``write`` of the line including its newline) and flushed;
fsync is ``always`` (every batch), ``batch`` (at most every second) or ``never``. After a hard
kill the only possible damage is a torn last line, which ``repair_tail`` truncates away before
appending, so finished records are never rewritten.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Literal

import orjson

from fasteval.core.redact import redact_bytes, redact_text
from fasteval.core.types import Record
from fasteval.runfolder.diskfaults import database_failure, vanished, write_failure
from fasteval.runfolder.index import RunIndex
from fasteval.runfolder.index_rows import IndexRowTuple, row_of_written
from fasteval.runfolder.manifest import read_manifest as read_manifest
from fasteval.runfolder.manifest import write_manifest as write_manifest
from fasteval.runfolder.names import MANIFEST as MANIFEST  # importers of records keep their names
from fasteval.runfolder.names import RECORDS as RECORDS
from fasteval.runfolder.safe_open import open_nofollow, refuse_symlink

log = logging.getLogger("fasteval")
# The writer commits index rows at most this often (or per this many rows): off the hot path.
INDEX_EVERY_S = 0.5
INDEX_EVERY_ROWS = 2000

FsyncPolicy = Literal["always", "batch", "never"]


def repair_tail(path: Path) -> int:
    """Cut a torn (unterminated or unparsable) last line; returns the bytes removed.

    The last line is found by scanning back for newlines in 1 MiB steps, so a valid record of
    any length (a 20 MB trajectory) is kept whole and a torn one is cut at its start.
    """
    refuse_symlink(path, RECORDS)  # never cut a file the folder merely points at
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with os.fdopen(open_nofollow(path, os.O_RDWR, RECORDS), "rb+") as f:
        f.seek(size - 1)
        terminated = f.read(1) == b"\n"
        end = size - 1 if terminated else size
        start = _line_start(f, end)
        if terminated:
            f.seek(start)
            try:
                orjson.loads(f.read(end - start))
                return 0
            except orjson.JSONDecodeError:
                pass
        f.truncate(start)
        return size - start


def _line_start(f: BinaryIO, end: int) -> int:
    """Offset just after the last newline before ``end`` (0 when there is none)."""
    step = 1 << 20
    pos = end
    while pos > 0:
        lo = max(0, pos - step)
        f.seek(lo)
        nl = f.read(pos - lo).rfind(b"\n")
        if nl >= 0:
            return lo + nl + 1
        pos = lo
    return 0


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete record line; a torn line (only possible last) is skipped."""
    refuse_symlink(path, RECORDS)
    if not path.exists():
        return
    with os.fdopen(open_nofollow(path, os.O_RDONLY, RECORDS), "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "job_id" in rec:
                yield rec


def latest_by_job(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """The last record of each job across files (a later ok record supersedes an error)."""
    out: dict[str, dict[str, Any]] = {}
    for p in paths:
        for rec in iter_records(p):
            prev = out.get(rec["job_id"])
            if prev is None or prev.get("status") != "ok" or rec.get("status") == "ok":
                out[rec["job_id"]] = rec
    return out


_JSON_INT_MIN, _JSON_INT_MAX = -(1 << 63), (1 << 64) - 1  # what orjson writes as a number
_MAX_DEPTH = 200  # orjson refuses nesting past 255


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` with what orjson refuses made writable: an int past 64 bits becomes its digits (a
    string: exact, and no reader mistakes it for a number it can hold), a lone surrogate is
    replaced, a non-string key becomes a string, nesting past ``_MAX_DEPTH`` becomes its repr."""
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        if _JSON_INT_MIN <= value <= _JSON_INT_MAX:
            return value
        try:
            return str(value)
        except ValueError:  # past Python's digit limit for str()
            return f"<integer of {value.bit_length()} bits>"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
    if depth > _MAX_DEPTH:
        return redact_text(repr(value)[:1000])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_safe(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(json_safe(k, depth + 1)): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v, depth + 1) for v in value]
    return value  # numpy and the other types orjson writes itself (else ``default=str``)


def _dumps_hostile(record: Record) -> bytes:
    """A record orjson refused (a server's 2**70 tokens, a lone surrogate in tool output) as one line.

    The slow path only: a finished trajectory is always written, never lost to one odd value.
    """
    try:
        return orjson.dumps(json_safe(record), option=orjson.OPT_SERIALIZE_NUMPY, default=str)
    except (orjson.JSONEncodeError, TypeError, RecursionError) as e:
        log.warning("record of job %s could not be serialised whole (%s); writing its summary", record.job_id, e)
        summary = {f: json_safe(getattr(record, f)) for f in ("job_id", "model", "suite", "setting", "task_id",
                                                              "seed", "status", "score", "answer", "error",
                                                              "error_kind", "termination", "rounds", "tool_calls",
                                                              "usage", "latency_s", "retries")}
        summary["metadata"] = {"unserialisable": f"{type(e).__name__}: {e}"[:300]}
        return orjson.dumps(summary, default=str)


class RecordWriter:
    """Appends records from many coroutines through one writer task (batched, ordered).

    Every line is scrubbed of secrets before it is written. The first failed write (full disk,
    deleted run folder) halts the writer: the partial line is cut back, later records are
    dropped, and ``on_failure`` gets a one-line error so the sweep stops instead of running
    jobs whose results cannot be saved.
    """

    def __init__(self, path: Path, fsync: FsyncPolicy = "batch", index: RunIndex | None = None,
                 on_failure: Callable[[RuntimeError], None] | None = None, index_wait_s: float = 2.0) -> None:
        self.path = path
        self.fsync = fsync
        self.index = index
        """When set, written lines are added to the run index after their bytes (batched)."""
        self.index_wait_s = index_wait_s
        """How long an index update may wait for another process's lock before the writer gives
        the index up (it runs on the event loop; readers catch the index up later)."""
        self.on_failure = on_failure
        self.failure: RuntimeError | None = None
        self.mirror: Callable[[list[tuple[bytes, Record]]], None] | None = None
        """Given each batch once its lines are written (the results store takes a copy); must not block."""
        self._queue: asyncio.Queue[tuple[bytes, Record] | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._fd = -1
        self._size = 0
        self._halted = False
        self._last_sync = 0.0
        self.written = 0
        # Rows of written lines not yet in the index: one index commit per INDEX_EVERY_S (or
        # INDEX_EVERY_ROWS rows) keeps the index off the hot path; readers index any lag themselves.
        self._pending: list[IndexRowTuple] = []
        self._pending_first: bytes | None = None
        self._pending_last = b""
        self._pending_end = 0
        self._last_index = 0.0

    async def start(self) -> None:
        repair_tail(self.path)
        if self.index is not None:
            try:
                self.index.refresh()  # every line before our first one is indexed
            except (OSError, sqlite3.Error) as e:
                # a disk that fills while the index is built is the sweep's one-line local fault
                err = database_failure(e, self.index.path or self.path.parent / "index", self.path.parent)
                if err is None:
                    raise
                raise err from e
            self.index.set_busy_timeout(self.index_wait_s)
        self._fd = open_nofollow(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, RECORDS)
        self._size = os.fstat(self._fd).st_size
        self._task = asyncio.create_task(self._run())

    def write(self, record: Record) -> None:
        if self._halted:
            return  # after a failure nothing more is claimed as done
        if record.error:
            # the index keeps the error text too
            record.error = redact_text(record.error if isinstance(record.error, str) else str(json_safe(record.error)))
        # orjson serialises the dataclasses directly: no asdict() deep copy on the hot path.
        try:
            line = orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        except orjson.JSONEncodeError:
            line = _dumps_hostile(record) + b"\n"
        self._queue.put_nowait((redact_bytes(line), record))

    def halt(self) -> None:
        """Accept no more records (the sweep stopped for a fault found elsewhere)."""
        self._halted = True

    def _fail(self, err: RuntimeError) -> None:
        self._halted = True
        if self.failure is None:
            self.failure = err
            if self.on_failure is not None:
                self.on_failure(err)

    def _write_batch(self, batch: list[tuple[bytes, Record]]) -> bool:
        """Write every line of ``batch``; False (and the writer halted) on the first failure."""
        # A records file with no links left means its folder was deleted: writing on would
        # "save" records nobody can read.
        if os.fstat(self._fd).st_nlink == 0:
            self._fail(vanished(self.path.parent, self.path))
            return False
        for line, _ in batch:
            try:
                # One write per line: a kill can tear only the line being written.
                n = os.write(self._fd, line)
                if n != len(line):
                    os.write(self._fd, line[n:])
            except OSError as e:
                try:
                    os.ftruncate(self._fd, self._size)  # cut a partial line back to the last whole one
                except OSError:
                    pass  # the torn tail is repaired on the next start
                self._fail(write_failure(e, self.path, self.path.parent))
                return False
            self._size += len(line)
            self.written += 1
        return True

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            batch: list[tuple[bytes, Record]] = []
            stop = item is None
            if item is not None:
                batch.append(item)
            while not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    stop = True
                else:
                    batch.append(nxt)
            # A batch cut short is left to the index's own catch-up on the next start.
            if batch and self.failure is None and self._write_batch(batch):
                if self.mirror is not None:
                    self.mirror(batch)
                now = time.monotonic()
                if self.index is not None:
                    self._index_batch(batch, now, flush=stop)
                if self.failure is None and (self.fsync == "always" or
                                             (self.fsync == "batch" and now - self._last_sync >= 1.0)):
                    try:
                        await asyncio.to_thread(os.fsync, self._fd)
                    except OSError as e:
                        self._fail(write_failure(e, self.path, self.path.parent))
                    self._last_sync = now
            if stop:
                self._flush_index(time.monotonic())  # lines already written stay indexable
                return

    def _index_failed(self, e: Exception) -> None:
        """A full disk under the index stops the sweep like one under the records; other index
        errors only cost the index (it is derived, and rebuilt from the records on the next read)."""
        err = database_failure(e, self.path.parent / "index", self.path.parent)
        if err is not None:
            self._fail(err)
        else:
            log.warning("run index not updated (%s); it catches up from the records on the next read", e)
            self.index = None

    def _index_batch(self, batch: list[tuple[bytes, Record]], now: float, flush: bool) -> None:
        end = os.lseek(self._fd, 0, os.SEEK_CUR)  # O_APPEND: the end of our last line
        pos = end - sum(len(line) for line, _ in batch)
        if pos == 0:
            self._pending_first = batch[0][0]
        for line, rec in batch:
            row = row_of_written(rec, line, pos)
            if row is not None:  # else a bad line, counted when a reader catches the index up
                self._pending.append(row)
            pos += len(line)
        self._pending_last, self._pending_end = batch[-1][0], end
        if flush or len(self._pending) >= INDEX_EVERY_ROWS or now - self._last_index >= INDEX_EVERY_S:
            self._flush_index(now)

    def _flush_index(self, now: float) -> None:
        if self.index is None or not self._pending:
            return
        last, end = self._pending_last, self._pending_end
        try:
            self.index.append(self._pending, end, end - len(last), last, first_line=self._pending_first)
        except (OSError, sqlite3.Error) as e:
            self._index_failed(e)
        self._pending, self._pending_first, self._last_index = [], None, now

    async def close(self) -> None:
        """Flush and close; never raises (a failure is reported through ``failure``)."""
        if self._task is not None:
            self._queue.put_nowait(None)
            await self._task
            self._task = None
            if self.index is not None and self.failure is None:
                # The next resume reads the resume set as one array, not this run's rows one by one,
                # and the first reader finds the planner's statistics made (``RunIndex.settle``).
                try:
                    await asyncio.to_thread(self.index.settle)
                except (OSError, sqlite3.Error) as e:
                    log.warning("run index: not settled (%s); the next reader settles it", e)
        if self._fd >= 0:
            if self.fsync != "never" and self.failure is None:
                try:
                    os.fsync(self._fd)
                except OSError as e:
                    self._fail(write_failure(e, self.path, self.path.parent))
            try:
                os.close(self._fd)
            except OSError as e:
                log.warning("closing %s: %s", self.path, e)
            self._fd = -1
