"""The run folder: manifest, append-only JSONL records, and resume bookkeeping.

A record line is written whole (one ``write`` of the line including its newline) and flushed;
fsync is ``always`` (every batch), ``batch`` (at most every second) or ``never``. After a hard
kill the only possible damage is a torn last line, which ``repair_tail`` truncates away before
appending, so finished records are never rewritten.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import orjson

from fasteval.diskfaults import vanished, write_failure
from fasteval.redact import redact_bytes
from fasteval.types import Record

log = logging.getLogger("fasteval")

RECORDS = "records.jsonl"
MANIFEST = "manifest.json"
FsyncPolicy = Literal["always", "batch", "never"]


def repair_tail(path: Path) -> int:
    """Cut a torn (unterminated or unparsable) last line; returns the bytes removed."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as f:
        chunk = min(size, 1 << 20)
        f.seek(size - chunk)
        tail = f.read(chunk)
        if tail.endswith(b"\n"):
            last = tail[:-1].rsplit(b"\n", 1)[-1]
            try:
                orjson.loads(last)
                return 0
            except orjson.JSONDecodeError:
                cut = size - len(last) - 1
        else:
            nl = tail.rfind(b"\n")
            cut = size - chunk + nl + 1 if nl >= 0 else (0 if chunk == size else size)
        f.truncate(cut)
        return size - cut


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete record line; a torn line (only possible last) is skipped."""
    if not path.exists():
        return
    with path.open("rb") as f:
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


class RecordWriter:
    """Appends records from many coroutines through one writer task (batched, ordered).

    Every line is scrubbed of secrets before it is written. The first failed write (full disk,
    deleted run folder) halts the writer: the partial line is cut back, later records are
    dropped, and ``on_failure`` gets a one-line error so the sweep stops instead of running
    jobs whose results cannot be saved.
    """

    def __init__(self, path: Path, fsync: FsyncPolicy = "batch",
                 on_failure: Callable[[RuntimeError], None] | None = None) -> None:
        self.path = path
        self.fsync = fsync
        self.on_failure = on_failure
        self.failure: RuntimeError | None = None
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._fd = -1
        self._size = 0
        self._halted = False
        self._last_sync = 0.0
        self.written = 0

    async def start(self) -> None:
        repair_tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._task = asyncio.create_task(self._run())

    def write(self, record: Record) -> None:
        if self._halted:
            return  # after a failure nothing more is claimed as done
        # orjson serialises the dataclasses directly: no asdict() deep copy on the hot path.
        line = orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n"
        self._queue.put_nowait(redact_bytes(line))

    def halt(self) -> None:
        """Accept no more records (the sweep stopped for a fault found elsewhere)."""
        self._halted = True

    def _fail(self, err: RuntimeError) -> None:
        self._halted = True
        if self.failure is None:
            self.failure = err
            if self.on_failure is not None:
                self.on_failure(err)

    def _write_batch(self, batch: list[bytes]) -> None:
        # A records file with no links left means its folder was deleted: writing on would
        # "save" records nobody can read.
        if os.fstat(self._fd).st_nlink == 0:
            self._fail(vanished(self.path.parent, self.path))
            return
        for line in batch:
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
                return
            self._size += len(line)
            self.written += 1

    async def _run(self) -> None:
        while True:
            item = await self._queue.get()
            batch: list[bytes] = []
            stop = item is None
            if item is not None:
                batch.append(item)
            while not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    stop = True
                else:
                    batch.append(nxt)
            if batch and self.failure is None:
                self._write_batch(batch)
                now = time.monotonic()
                if self.failure is None and (self.fsync == "always" or
                                             (self.fsync == "batch" and now - self._last_sync >= 1.0)):
                    try:
                        await asyncio.to_thread(os.fsync, self._fd)
                    except OSError as e:
                        self._fail(write_failure(e, self.path, self.path.parent))
                    self._last_sync = now
            if stop:
                return

    async def close(self) -> None:
        """Flush and close; never raises (a failure is reported through ``failure``)."""
        if self._task is not None:
            self._queue.put_nowait(None)
            await self._task
            self._task = None
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


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    tmp = run_dir / (MANIFEST + ".tmp")
    tmp.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    os.replace(tmp, run_dir / MANIFEST)


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    p = run_dir / MANIFEST
    if not p.exists():
        return None
    data: dict[str, Any] = orjson.loads(p.read_bytes())
    return data
