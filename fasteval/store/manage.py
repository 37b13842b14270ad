"""``fasteval store ls | import | gc``: what a store holds, a run's records put in, segments compacted.

``gc`` compacts only segments no writer will touch again (sealed by their writer, or left by a
writer that is gone: a dead pid on this host, or no change for ``stale_s`` elsewhere) into one
segment of their winners, written under a hidden name and renamed into place before the old ones
are removed. A reader that listed the old ones lists again; a gc killed half-way leaves copies
that the next read dedupes and the next gc removes. Records are never rewritten: a compacted
segment holds the very lines, byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fasteval.runfolder.blobs import pid_alive
from fasteval.runfolder.index import RunIndex, open_index
from fasteval.runfolder.index_rows import JobRow
from fasteval.runfolder.names import BLOBS as RUN_BLOBS
from fasteval.runfolder.records import read_manifest
from fasteval.runfolder.safe_open import open_nofollow
from fasteval.store.blobs import copy_blobs, image_refs
from fasteval.store.reader import Segment, StoreView, list_segments, open_view
from fasteval.store.segments import (
    BLOBS,
    ENTRY,
    SEGMENTS,
    ensure_store,
    entry_of,
    envelope,
    is_fingerprint,
    this_host,
    writer_of,
)
from fasteval.store.writer import provenance

STALE_S = 24 * 3600.0
"""An unsealed segment untouched this long, written on another host, is taken as abandoned."""


def listing(root: Path) -> Iterator[dict[str, Any]]:
    """One entry per fingerprint the store holds, in store order: the job, its result, its run of origin."""
    view = open_view(root)
    for i in view.in_store_order().tolist():
        doc = view.read(i)
        if doc is None:
            continue
        rec, stored = doc["record"], doc.get("stored") or {}
        yield {"fingerprint": doc["fingerprint"], "status": doc.get("status"), "model": rec.get("model"),
               "suite": rec.get("suite"), "setting": rec.get("setting"), "task_id": rec.get("task_id"),
               "seed": rec.get("seed"), "score": rec.get("score"), "run": stored.get("run"),
               "run_id": stored.get("run_id"), "host": stored.get("host"), "at": stored.get("at")}


@dataclass(slots=True)
class Imported:
    added: int = 0
    already: int = 0
    """Records whose fingerprint the store already holds (an ok one, or any one for an error)."""
    unkeyed: int = 0
    """Records from before fingerprints: nothing to key them by."""


def import_run(root: Path, run_dir: Path) -> Imported:
    """Put every record of ``run_dir`` the store lacks into it (superseded ones too: each is the
    result of its own fingerprint), with the run as provenance (or, for a record the run reused,
    the run it came from)."""
    ensure_store(root)
    view = open_view(root)
    with open_index(run_dir) as index:
        return import_rows(view, index, index.rows(superseded=None), run_dir)


def import_rows(view: StoreView, index: RunIndex, rows: Iterable[JobRow], run_dir: Path,
                since: int = 0) -> Imported:
    """The records of ``rows`` (at byte ``since`` or later) that ``view``'s store lacks, written into it."""
    from fasteval.store.segments import SegmentWriter

    root = view.root
    stored = provenance(run_dir, (read_manifest(run_dir) or {}).get("run_id"))
    out = Imported()
    writer: SegmentWriter | None = None
    batch: list[tuple[bytes, np.void]] = []
    try:
        for row in rows:
            fp = row.fingerprint
            if row.offset < since:
                continue
            if not is_fingerprint(fp):
                out.unkeyed += 1
                continue
            if _held(view, str(fp), row.status == "ok"):
                out.already += 1
                continue
            line = index.read_line(row.offset, row.length)
            rec = index.read_row(row)
            origin = rec.get("reused")
            prov = {k: v for k, v in origin.items() if k not in ("store", "was")} if isinstance(origin, dict) \
                else stored
            refs = image_refs(rec)
            if refs:
                copy_blobs(run_dir / RUN_BLOBS, root / BLOBS, refs)
            ok = row.status == "ok"
            batch.append((envelope(str(fp), ok, prov, line), entry_of(str(fp), rec.get("components"), ok, 0, 0)))
            if len(batch) >= 500:
                writer = writer or SegmentWriter(root)
                writer.write(batch)
                out.added += len(batch)
                batch = []
        if batch:
            writer = writer or SegmentWriter(root)
            writer.write(batch)
            out.added += len(batch)
    finally:
        if writer is not None:
            writer.close()
    return out


def _held(view: StoreView, fp: str, ok: bool) -> bool:
    """Does the store already hold this fingerprint (ok: an ok record; an error: any record)?"""
    if not len(view):
        return False
    want = np.array([bytes.fromhex(fp)], dtype="S16")
    at = int(np.searchsorted(view.winners["fp"], want)[0])
    if at >= len(view) or view.winners["fp"][at] != want[0]:
        return False
    return bool(view.winners["ok"][at]) or not ok


@dataclass(slots=True)
class Compacted:
    segments_before: int = 0
    segments_after: int = 0
    lines_before: int = 0
    lines_after: int = 0
    left_alone: int = 0
    """Segments a writer may still append to (not sealed, writer not known to be gone)."""


def idle(seg: Segment, now: float, stale_s: float) -> bool:
    """No writer will append to this segment again: sealed, or its writer is gone."""
    if seg.sealed:
        return True
    writer = writer_of(seg.name)
    if writer is not None and writer[0] == this_host() and not pid_alive(writer[1]):
        return True
    return now - seg.mtime > stale_s


def gc(root: Path, stale_s: float = STALE_S) -> Compacted:
    """Compact every idle segment into one segment of their winners (see the module's docstring)."""
    ensure_store(root)
    segs = list_segments(root)
    now = time.time()
    done = [s for s in segs if idle(s, now, stale_s)]
    out = Compacted(segments_before=len(segs), left_alone=len(segs) - len(done))
    view = open_view(root, segments=done)
    out.lines_before = view.lines
    if len(done) <= 1 and view.lines == len(view):
        out.segments_after, out.lines_after = len(segs), view.lines
        _clean_blob_temps(root, now)
        return out
    if done:
        _write_compacted(root, view, done[0].name)
        for s in done:
            for suffix in (".jsonl", ".fps", ".sealed"):
                with contextlib.suppress(FileNotFoundError):
                    s.path.with_suffix(suffix).unlink()
    out.lines_after = len(view)
    out.segments_after = len(list_segments(root))
    _clean_blob_temps(root, now)
    return out


def _write_compacted(root: Path, view: StoreView, first: str) -> None:
    """The winners of ``view``, in store order, as one sealed segment sorting where ``first`` did."""
    folder = root / SEGMENTS
    name = f"{first}~gc{secrets.token_hex(4)}"  # sorts right after the first segment it replaces
    tmp = folder / f".{name}"
    data_fd = open_nofollow(tmp.with_suffix(".jsonl"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, "a store segment")
    entries = np.zeros(len(view), dtype=ENTRY)
    pos = 0
    try:
        for k, i in enumerate(view.in_store_order().tolist()):
            seg = view.segments[int(view.seg_of[i])]
            e = view.winners[i]
            fd = open_nofollow(seg.path, os.O_RDONLY, "a store segment")
            try:
                line = os.pread(fd, int(e["length"]), int(e["offset"]))
            finally:
                os.close(fd)
            view_line = memoryview(line)
            while view_line:
                view_line = view_line[os.write(data_fd, view_line):]
            entries[k] = e
            entries["offset"][k], entries["length"][k] = pos, len(line)
            pos += len(line)
        os.fsync(data_fd)
    finally:
        os.close(data_fd)
    (tmp.with_suffix(".fps")).write_bytes(entries.tobytes())
    os.replace(tmp.with_suffix(".fps"), folder / f"{name}.fps")
    os.replace(tmp.with_suffix(".jsonl"), folder / f"{name}.jsonl")
    (folder / f"{name}.sealed").touch()


def _clean_blob_temps(root: Path, now: float) -> None:
    """Temporary blob files of copies that died (older than an hour)."""
    blobs = root / BLOBS
    if not blobs.is_dir():
        return
    for shard in blobs.iterdir():
        if not shard.is_dir():
            continue
        for f in shard.glob(".tmp-*"):
            with contextlib.suppress(OSError):
                if now - f.lstat().st_mtime > 3600:
                    f.unlink()


def summary(root: Path) -> dict[str, Any]:
    """What ``store ls`` prints above its listing: segments, lines, fingerprints, ok ones."""
    view = open_view(root)
    return {"store": str(root), "segments": len(view.segments), "lines": view.lines, "fingerprints": len(view),
            "ok": view.ok, "sealed": sum(1 for s in view.segments if s.sealed)}

