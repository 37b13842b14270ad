"""The batch journal: what was submitted to a provider's batch API, so a restart pays nothing twice.

Layout under ``<run>/batches/``: ``<local>.jsonl`` holds one batch's input exactly as sent,
``<local>.out`` the response bodies of its requests that succeeded (each body as downloaded and a
newline, appended and fsynced before the event that points at them), and ``journal.jsonl`` the
events, appended and fsynced one write at a time:

- ``begin``: a batch's local id, lane (model or role), time, and its requests' custom_id ->
  (job, request number) map, written only after the input file is fsynced, and before create;
- ``file``: the uploaded input file's id (OpenAI, Gemini), the moment it is known (or found again after a crash);
- ``created``: the provider's batch id, the moment it is known;
- ``results``: per-request outcomes as downloaded: for a success, where its body lies in
  ``<local>.out`` (``at``, the offset of the first, then each body's length in order), for a
  failure its error kind and message (journals written before the ``.out`` files hold the bodies
  inline, as ``r``; they are read the same way, by offset into the journal);
- ``ended``: the batch is over and every outcome it will ever give is journaled;
- ``forget``: a batch id that turned out not to be ours (matched after a crash, then disproved).

A torn last line (a crash mid-append) is cut off when the journal is opened. The journal is input
we did not necessarily write (a shared or tampered run folder): every event is checked whole
before it is applied (a local id is a file name, so it must match ``LOCAL_ID``; offsets and
sizes are non-negative integers), and a line that fails is a counted bad line (``bad_lines``,
one logged message naming the first), never a traceback or a path outside ``batches/``. A body
is read back only within its ``.out`` file's size. The journal knows nothing of providers:
outcomes are plain ``(custom_id, body | None, kind, message)`` tuples.

Memory: a run of 50,000 batched requests downloads ~100 MB of bodies, and a job needs its body
once. So the journal keeps per request only where its body lies (two ints); a body is handed to
its waiter straight from the download, and read back from disk only when a replayed job (a
rerun) asks for it. Opening the journal streams it line by line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.redact import redact_text
from fasteval.core.terminal import clean
from fasteval.runfolder.diskfaults import is_fatal
from fasteval.runfolder.safe_open import open_nofollow, refuse_symlink

log = logging.getLogger(__name__)

BATCHES_DIR = "batches"
JOURNAL = "journal.jsonl"
LOCAL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")
"""A batch's local id names its files (``<local>.jsonl``, ``<local>.out``): nothing else is one."""
_MAX_LINE = 1 << 30
"""A journal line longer than this is not one we wrote (a legacy line holds at most one batch's bodies)."""

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
    """One request (by custom_id): which batches carried it and how it ended, if it has.

    Small on purpose (a run holds one per request): a succeeded request keeps where its body
    lies, never the body.
    """

    cid: str
    lane: str
    job: str
    n: int
    batches: list[str] = field(default_factory=list)
    at: int = -1
    """Offset of its response body in ``src`` once it succeeded; -1 until then."""
    size: int = 0
    src: str = ""
    """The file holding the body: a batch's local id (``<local>.out``), or "" for the journal line
    at ``at`` (``size`` bytes long) that holds it inline (journals written before ``.out`` files)."""
    kind: str | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.at >= 0

    @property
    def resolved(self) -> bool:
        return self.ok or self.kind is not None


class BatchJournal:
    """Loaded once at the start of a run; every change is an fsynced append, made off the event loop."""

    def __init__(self, run_dir: Path, *, readonly: bool = False) -> None:
        self.dir = run_dir / BATCHES_DIR
        self.path = self.dir / JOURNAL
        self.batches: dict[str, JournalBatch] = {}
        self.requests: dict[str, RequestState] = {}
        self.bytes_written = 0
        self.bad_lines = 0
        """Complete lines that are not a valid event (tampered, or another program's): skipped."""
        self.first_bad = ""
        """Where the first bad line is and why, for the one message a reader shows."""
        self._jobs: dict[str, str] = {}
        """One string per job id (a job's rounds share it)."""
        self._lock = asyncio.Lock()
        self._readonly = readonly
        """A reader beside a live run (status): a torn tail may be an append in progress, left alone."""
        self.on_failure: Callable[[OSError, Path], None] | None = None
        """Told of a write that failed for good (a full disk): the sweep stops with one line naming the file."""
        self._load()

    @classmethod
    def exists(cls, run_dir: Path) -> bool:
        return (run_dir / BATCHES_DIR / JOURNAL).exists()

    def _load(self) -> None:
        """Stream the journal (a legacy one may hold every body inline: never read it whole)."""
        refuse_symlink(self.dir, "the batch journal's folder")
        if not self.path.exists() and not self.path.is_symlink():
            return
        fd = open_nofollow(self.path, os.O_RDONLY, "the batch journal")
        good = 0
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            while line := f.readline(_MAX_LINE):
                if not line.endswith(b"\n"):
                    if len(line) < _MAX_LINE:
                        break  # a torn append
                    self._bad(good, "longer than 1 GiB")
                    good += len(line) + _skip_line(f)
                    continue
                if line.strip():
                    self._load_line(line, good)
                good += len(line)
        if self.bad_lines:
            log.warning("%s: %d bad line(s) skipped (%s); their batches are unknown to this run",
                        clean(str(self.path)), self.bad_lines, self.first_bad)
        if good < size and not self._readonly:  # cut a torn append off before the next append lands after it
            fd = open_nofollow(self.path, os.O_WRONLY, "the batch journal")
            try:
                os.ftruncate(fd, good)
                os.fsync(fd)
            finally:
                os.close(fd)

    def _load_line(self, line: bytes, offset: int) -> None:
        try:
            ev = orjson.loads(line)
            _check(ev, self.batches)
        except (orjson.JSONDecodeError, ValueError) as e:
            self._bad(offset, str(e))
            return
        self._apply(ev, offset, len(line))

    def _bad(self, offset: int, why: str) -> None:
        self.bad_lines += 1
        if self.bad_lines == 1:
            self.first_bad = f"the first at byte {offset}: {clean(why)[:200]}"

    def _apply(self, ev: dict[str, Any], offset: int = -1, length: int = 0) -> None:
        """One event onto the state; ``offset``/``length``: the event's line in the journal (legacy bodies)."""
        kind = ev["e"]
        if kind == "begin":
            b = JournalBatch(local=ev["local"], lane=ev["lane"], at=float(ev["at"]), ids=[])
            self.batches[b.local] = b
            for cid, job, n in ev["map"]:
                st = self.requests.get(cid)
                if st is None:
                    job = self._jobs.setdefault(job, job)
                    st = self.requests[cid] = RequestState(cid=cid, lane=b.lane, job=job, n=int(n))
                b.ids.append(st.cid)
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
            self._apply_results(b, ev, offset, length)

    def _open_request(self, cid: str, b: JournalBatch) -> RequestState | None:
        """The request an outcome of ``b`` settles; None when not ours, resubmitted since, or already succeeded."""
        st = self.requests.get(cid)
        if st is None or st.batches[-1] != b.local or st.ok:
            return None
        return st

    def _apply_results(self, b: JournalBatch, ev: dict[str, Any], offset: int, length: int) -> None:
        if "r" in ev:  # a legacy event: bodies inline, found again by this line's place in the journal
            for cid, body, err, msg in ev["r"]:
                if (st := self._open_request(cid, b)) is None:
                    continue
                if body is not None and offset >= 0:
                    st.at, st.size, st.src, st.kind, st.message = offset, length, "", None, ""
                else:
                    st.kind, st.message = err or "transient", msg
            return
        pos = int(ev["at"])
        for cid, size in ev.get("ok") or ():
            if (st := self._open_request(cid, b)) is not None:
                st.at, st.size, st.src, st.kind, st.message = pos, int(size), b.local, None, ""
            pos += int(size) + 1
        for cid, err, msg in ev.get("err") or ():
            if (st := self._open_request(cid, b)) is not None:
                st.kind, st.message = err, msg

    def body(self, cid: str) -> bytes:
        """A succeeded request's response body, read from disk (blocking: call it off the event loop)."""
        st = self.requests[cid]
        if not st.ok:
            raise KeyError(f"{cid} has no result")
        if st.src:
            data = _pread(self.dir / f"{st.src}.out", st.at, st.size, "a batch's results")
            if len(data) != st.size:
                raise OSError(f"{self.dir / (st.src + '.out')}: the result of {cid} is cut short or lies past "
                              "its end (a tampered journal or a cut file)")
            return data
        ev = orjson.loads(_pread(self.path, st.at, st.size, "the batch journal"))
        for c, body, _, _ in ev["r"]:
            if c == cid and body is not None:
                return str(body).encode()
        raise ValueError(f"the journal line at {st.at} holds no result for {cid}")

    async def _append(self, events: list[dict[str, Any]]) -> None:
        async with self._lock:
            await self._append_locked(events)

    async def _append_locked(self, events: list[dict[str, Any]]) -> None:
        data = b"".join(orjson.dumps(e) + b"\n" for e in events)
        await self._write(self.path, _append_synced, self.path, data)
        self.bytes_written += len(data)
        for e in events:
            self._apply(e)

    async def begin(self, lane: str, lines: list[bytes], entries: list[tuple[str, str, int]]) -> JournalBatch:
        """Write and fsync the batch's input, then journal it: from here on it may have been created."""
        local = f"fe{int(time.time())}{secrets.token_hex(6)}"
        path = self.dir / f"{local}.jsonl"
        await self._write(path, _write_lines_synced, path, lines)
        await self._append([{"e": "begin", "local": local, "lane": lane, "at": time.time(),
                             "map": [list(x) for x in entries]}])
        return self.batches[local]

    async def _write(self, path: Path, write: Callable[..., Any], *args: Any) -> Any:
        """``write(*args)`` off the loop; a storage fault is reported (``on_failure``) before it is raised."""
        try:
            return await asyncio.to_thread(write, *args)
        except OSError as e:
            if self.on_failure is not None and is_fatal(e):
                self.on_failure(e, path)
            raise

    def input_lines(self, local: str) -> list[bytes]:
        return [x for x in _read(self.dir / f"{local}.jsonl", "a batch input").splitlines() if x]

    async def file(self, local: str, file_id: str) -> None:
        await self._append([{"e": "file", "local": local, "file_id": file_id}])

    async def created(self, local: str, batch_id: str) -> None:
        await self._append([{"e": "created", "local": local, "id": batch_id}])

    async def forget(self, local: str, batch_id: str) -> None:
        await self._append([{"e": "forget", "local": local, "id": batch_id}])

    async def results(self, local: str, outcomes: list[Outcome], ended: str | None = None) -> None:
        """Journal outcomes, and the end of the batch if given: bodies go to ``<local>.out``
        (fsynced first), the event says where they are."""
        events: list[dict[str, Any]] = []
        outcomes = _first_of_each(outcomes)  # a duplicate id: the first wins, as the lane hands it out
        async with self._lock:
            if outcomes:
                ok = [(c, b) for c, b, _, _ in outcomes if b is not None]
                at = 0
                if ok:
                    data = b"".join(b + b"\n" for _, b in ok)
                    at = await self._write(self.dir / f"{local}.out", _append_synced, self.dir / f"{local}.out", data)
                    self.bytes_written += len(data)
                events.append({"e": "results", "local": local, "at": at, "ok": [[c, len(b)] for c, b in ok],
                               # an error body may echo the key back: the journal is a run folder file
                               "err": [[c, k or "transient", redact_text(m)] for c, b, k, m in outcomes
                                       if b is None]})
            if ended is not None:
                events.append({"e": "ended", "local": local, "status": ended})
            if events:
                await self._append_locked(events)

    def open_batches(self, lane: str | None = None) -> list[JournalBatch]:
        """Batches not yet ended (created, or begun and perhaps created before a crash)."""
        return [b for b in self.batches.values() if b.ended is None and (lane is None or b.lane == lane)]

    def claimed(self) -> set[str]:
        return {b.batch_id for b in self.batches.values() if b.batch_id} | \
            {i for b in self.batches.values() for i in b.forgotten}


def _first_of_each(outcomes: list[Outcome]) -> list[Outcome]:
    seen: set[str] = set()
    out = []
    for o in outcomes:
        if o[0] not in seen:
            seen.add(o[0])
            out.append(o)
    return out


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


def _write_lines_synced(path: Path, lines: list[bytes]) -> None:
    """One line at a time: a batch of image rounds may be gigabytes, never joined into one more copy."""
    _folder(path)
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a batch input")
    try:
        for line in lines:
            _write_all(fd, line + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _append_synced(path: Path, data: bytes) -> int:
    """Append and fsync; the offset ``data`` starts at (one writer per file: the journal's lock)."""
    _folder(path)
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "the batch journal")
    try:
        at = os.fstat(fd).st_size
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return at


def _pread(path: Path, offset: int, size: int, what: str) -> bytes:
    """At most what the file holds from ``offset``: a tampered size never allocates more than that."""
    fd = open_nofollow(path, os.O_RDONLY, what)
    try:
        return os.pread(fd, max(0, min(size, os.fstat(fd).st_size - offset)), offset)
    finally:
        os.close(fd)


def _skip_line(f: Any) -> int:
    """Read past the rest of an over-long line in bounded pieces; its length."""
    n = 0
    while chunk := f.readline(_MAX_LINE):
        n += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return n


def _str(ev: dict[str, Any], key: str) -> str:
    v = ev.get(key)
    if not isinstance(v, str):
        raise ValueError(f"{ev.get('e')} event: {key} is not a string")
    return v


def _count(v: Any, what: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 1 << 62:
        raise ValueError(f"{what} is not a non-negative integer")
    return v


def _rows(v: Any, width: int, what: str) -> list[list[Any]]:
    if not isinstance(v, list) or not all(isinstance(r, list) and len(r) == width for r in v):
        raise ValueError(f"{what} is not a list of {width}-item lists")
    return v


def _check(ev: Any, batches: dict[str, JournalBatch]) -> None:
    """Raise ``ValueError`` unless ``ev`` is an event ``_apply`` can take whole (checked before any change)."""
    if not isinstance(ev, dict):
        raise ValueError("not a JSON object")
    kind, local = ev.get("e"), _str(ev, "local")
    if kind == "begin":
        if not LOCAL_ID.match(local):
            raise ValueError(f"local id {local[:80]!r} is not a batch id (1-64 of A-Z a-z 0-9 _ -)")
        if local in batches:
            raise ValueError(f"batch {local} begins twice")
        _str(ev, "lane")
        if not isinstance(ev.get("at"), (int, float)):
            raise ValueError("begin event: at is not a time")
        for cid, job, n in _rows(ev.get("map"), 3, "begin event: map"):
            if not isinstance(cid, str) or not isinstance(job, str):
                raise ValueError("begin event: a map entry is not (custom_id, job, n)")
            _count(n, "begin event: a request number")
        return
    if kind not in ("file", "created", "forget", "ended", "results"):
        raise ValueError(f"unknown event {str(kind)[:40]!r}")
    if local not in batches:
        raise ValueError(f"{kind} event for batch {local[:80]!r}, which no begin event names")
    if kind != "results":
        _str(ev, {"file": "file_id", "created": "id", "forget": "id", "ended": "status"}[kind])
    elif "r" in ev:
        for cid, body, err, msg in _rows(ev["r"], 4, "results event: r"):
            if not (isinstance(cid, str) and isinstance(msg, str) and (body is None or isinstance(body, str))
                    and (err is None or isinstance(err, str))):
                raise ValueError("results event: an entry of r is not (custom_id, body, kind, message)")
    else:
        _count(ev.get("at"), "results event: at")
        for cid, size in _rows(ev.get("ok") or [], 2, "results event: ok"):
            _count(size, "results event: a size")
            if not isinstance(cid, str):
                raise ValueError("results event: a custom_id is not a string")
        for row in _rows(ev.get("err") or [], 3, "results event: err"):
            if not all(isinstance(x, str) for x in row):
                raise ValueError("results event: an error is not (custom_id, kind, message)")


def batch_rows(run_dir: Path) -> list[dict[str, Any]]:
    """One row per batch the journal knows: lane, local and provider ids, requests, state, age."""
    if not BatchJournal.exists(run_dir):
        return []
    journal = BatchJournal(run_dir, readonly=True)
    now = time.time()
    rows = []
    for b in journal.batches.values():
        done = sum(1 for c in b.ids if journal.requests[c].ok)
        rows.append({"model": b.lane, "local": b.local, "batch_id": b.batch_id, "requests": len(b.ids),
                     "succeeded": done, "state": b.ended or ("submitted" if b.batch_id else "submitting"),
                     "age_s": round(now - b.at, 1)})
    return rows
