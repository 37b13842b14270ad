"""The batch journal: what was submitted to a provider's batch API, so a restart pays nothing twice.

Layout under ``<run>/batches/``: ``<local>.jsonl`` holds one batch's input exactly as sent,
and ``journal.jsonl`` the events, appended and fsynced one write at a time:

- ``begin``: a batch's local id, lane (model or role), time, and its requests' custom_id ->
  (job, request number) map, written only after the input file is fsynced, and before create;
- ``file``: the uploaded input file's id (OpenAI), the moment it is known;
- ``created``: the provider's batch id, the moment it is known;
- ``results``: per-request outcomes as downloaded (the response body, or an error kind);
- ``ended``: the batch is over and every outcome it will ever give is journaled;
- ``forget``: a batch id that turned out not to be ours (matched after a crash, then disproved).

A torn last line (a crash mid-append) is cut off when the journal is opened. The journal knows
nothing of providers: outcomes are plain ``(custom_id, body | None, kind, message)`` tuples.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fasteval.runfolder.safe_open import open_nofollow, refuse_symlink

BATCHES_DIR = "batches"
JOURNAL = "journal.jsonl"

Outcome = tuple[str, bytes | None, str | None, str]
"""``(custom_id, response body or None, error kind or None, message)``."""


@dataclass(slots=True)
class JournalBatch:
    """One submitted (or about to be submitted) batch as the journal knows it."""

    local: str
    lane: str
    at: float
    ids: list[str]
    file_id: str | None = None
    batch_id: str | None = None
    ended: str | None = None
    """The provider's final status word once every outcome is journaled; None while open."""
    forgotten: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RequestState:
    """One request (by custom_id): which batches carried it and how it ended, if it has."""

    cid: str
    lane: str
    job: str
    n: int
    batches: list[str] = field(default_factory=list)
    body: bytes | None = None
    kind: str | None = None
    message: str = ""

    @property
    def resolved(self) -> bool:
        return self.body is not None or self.kind is not None


class BatchJournal:
    """Loaded once at the start of a run; every change is an fsynced append, made off the event loop."""

    def __init__(self, run_dir: Path, *, readonly: bool = False) -> None:
        self.dir = run_dir / BATCHES_DIR
        self.path = self.dir / JOURNAL
        self.batches: dict[str, JournalBatch] = {}
        self.requests: dict[str, RequestState] = {}
        self.bytes_written = 0
        self._lock = asyncio.Lock()
        self._readonly = readonly
        """A reader beside a live run (status): a torn tail may be an append in progress, left alone."""
        self._load()

    @classmethod
    def exists(cls, run_dir: Path) -> bool:
        return (run_dir / BATCHES_DIR / JOURNAL).exists()

    def _load(self) -> None:
        refuse_symlink(self.dir, "the batch journal's folder")
        if not self.path.exists() and not self.path.is_symlink():
            return
        raw = _read(self.path, "the batch journal")
        end = raw.rfind(b"\n") + 1
        if end < len(raw) and not self._readonly:  # a torn append: cut it off before the next append lands after it
            fd = open_nofollow(self.path, os.O_WRONLY, "the batch journal")
            try:
                os.ftruncate(fd, end)
                os.fsync(fd)
            finally:
                os.close(fd)
        for line in raw[:end].splitlines():
            if line.strip():
                self._apply(orjson.loads(line))

    def _apply(self, ev: dict[str, Any]) -> None:
        kind = ev["e"]
        if kind == "begin":
            b = JournalBatch(local=ev["local"], lane=ev["lane"], at=float(ev["at"]), ids=[r[0] for r in ev["map"]])
            self.batches[b.local] = b
            for cid, job, n in ev["map"]:
                st = self.requests.get(cid)
                if st is None:
                    st = self.requests[cid] = RequestState(cid=cid, lane=b.lane, job=job, n=int(n))
                st.batches.append(b.local)
                st.kind, st.message = None, ""  # resubmitted: its earlier (retryable) failure is history
            return
        b = self.batches[ev["local"]]
        if kind == "file":
            b.file_id = ev["file_id"]
        elif kind == "created":
            b.batch_id = ev["id"]
        elif kind == "forget":
            b.forgotten.append(ev["id"])
            b.batch_id = None
        elif kind == "ended":
            b.ended = ev["status"]
            for cid in b.ids:  # carried by this batch and no outcome: it did not succeed
                st = self.requests[cid]
                if not st.resolved and st.batches[-1] == b.local:
                    st.kind, st.message = "transient", f"no result from batch {b.batch_id} ({b.ended})"
        elif kind == "results":
            for cid, body, err, msg in ev["r"]:
                st = self.requests.get(cid)
                if st is None or st.batches[-1] != b.local or st.body is not None:
                    continue  # not ours, from an earlier batch, or already succeeded
                st.body = body.encode() if isinstance(body, str) else None
                st.kind, st.message = (None, "") if body is not None else (err, msg)

    async def _append(self, events: list[dict[str, Any]]) -> None:
        data = b"".join(orjson.dumps(e) + b"\n" for e in events)
        async with self._lock:
            await asyncio.to_thread(_append_synced, self.path, data)
            self.bytes_written += len(data)
            for e in events:
                self._apply(e)

    async def begin(self, lane: str, lines: list[bytes], entries: list[tuple[str, str, int]]) -> JournalBatch:
        """Write and fsync the batch's input, then journal it: from here on it may have been created."""
        local = f"fe{int(time.time())}{secrets.token_hex(6)}"
        path = self.dir / f"{local}.jsonl"
        await asyncio.to_thread(_write_synced, path, b"\n".join(lines) + b"\n")
        await self._append([{"e": "begin", "local": local, "lane": lane, "at": time.time(),
                             "map": [list(x) for x in entries]}])
        return self.batches[local]

    def input_lines(self, local: str) -> list[bytes]:
        return [x for x in _read(self.dir / f"{local}.jsonl", "a batch input").splitlines() if x]

    async def file(self, local: str, file_id: str) -> None:
        await self._append([{"e": "file", "local": local, "file_id": file_id}])

    async def created(self, local: str, batch_id: str) -> None:
        await self._append([{"e": "created", "local": local, "id": batch_id}])

    async def forget(self, local: str, batch_id: str) -> None:
        await self._append([{"e": "forget", "local": local, "id": batch_id}])

    async def results(self, local: str, outcomes: list[Outcome], ended: str | None = None) -> None:
        """Journal outcomes (bodies as text: JSON responses), and the end of the batch if given."""
        events: list[dict[str, Any]] = []
        if outcomes:
            events.append({"e": "results", "local": local,
                           "r": [[c, b.decode() if b is not None else None, k, m] for c, b, k, m in outcomes]})
        if ended is not None:
            events.append({"e": "ended", "local": local, "status": ended})
        if events:
            await self._append(events)

    def open_batches(self, lane: str | None = None) -> list[JournalBatch]:
        """Batches not yet ended (created, or begun and perhaps created before a crash)."""
        return [b for b in self.batches.values() if b.ended is None and (lane is None or b.lane == lane)]

    def claimed(self) -> set[str]:
        return {b.batch_id for b in self.batches.values() if b.batch_id} | \
            {i for b in self.batches.values() for i in b.forgotten}


def _read(path: Path, what: str) -> bytes:
    fd = open_nofollow(path, os.O_RDONLY, what)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _folder(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    refuse_symlink(path.parent, "the batch journal's folder")


def _write_synced(path: Path, data: bytes) -> None:
    _folder(path)
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a batch input")
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _append_synced(path: Path, data: bytes) -> None:
    _folder(path)
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "the batch journal")
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def batch_rows(run_dir: Path) -> list[dict[str, Any]]:
    """One row per batch the journal knows: lane, local and provider ids, requests, state, age."""
    if not BatchJournal.exists(run_dir):
        return []
    journal = BatchJournal(run_dir, readonly=True)
    now = time.time()
    rows = []
    for b in journal.batches.values():
        done = sum(1 for c in b.ids if journal.requests[c].body is not None)
        rows.append({"model": b.lane, "local": b.local, "batch_id": b.batch_id, "requests": len(b.ids),
                     "succeeded": done, "state": b.ended or ("submitted" if b.batch_id else "submitting"),
                     "age_s": round(now - b.at, 1)})
    return rows
