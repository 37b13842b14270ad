"""A sweep and the results store: what the run takes from it at the start, what it gives as it runs.

At the start, the run's own records that a killed run did not get into the store go in (the
manifest's ``store_synced`` says how far it got: free after a whole run), then the store's ok
record of every planned job this folder does not hold is copied in instead of run. While the run
runs, each written batch of records is mirrored into the store from a thread of its own. The
store (and numpy with it) is imported only here, only for a run that names one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from fasteval.core.types import Job, Record
from fasteval.runfolder.index import RunIndex
from fasteval.runfolder.records import RECORDS, FsyncPolicy, RecordWriter, read_manifest, write_manifest

if TYPE_CHECKING:
    from fasteval.store.reader import StoreView
    from fasteval.store.writer import StoreMirror

log = logging.getLogger("fasteval")
_RECORD_FIELDS = frozenset(f.name for f in fields(Record))


class StoreLink:
    """One run folder's link to one results store."""

    def __init__(self, store: Path, run_dir: Path, fsync: FsyncPolicy,
                 on_failure: Callable[[RuntimeError], None]) -> None:
        self.store = store
        self.run_dir = run_dir
        self.fsync = fsync
        self.on_failure = on_failure

    async def take(self, jobs: Iterable[Job], index: RunIndex, finished: set[str], run_blobs: Path) -> int:
        """Copy the store's ok records of ``jobs`` (planned, not done here) into the run; their ids
        join ``finished``. A store that is not there yet is created (a first run takes nothing)."""
        from fasteval.store.reader import StoreError, open_view
        from fasteval.store.reuse import reused_records
        from fasteval.store.segments import ensure_store

        try:
            await asyncio.to_thread(ensure_store, self.store)
            view = await asyncio.to_thread(open_view, self.store)
            await asyncio.to_thread(self._backfill, view, index)
        except (OSError, StoreError) as e:
            log.warning("results store %s not read (%s): every job runs", self.store, e)
            return 0
        if not len(view):
            return 0
        writer = RecordWriter(self.run_dir / RECORDS, fsync=self.fsync, index=index, on_failure=self.on_failure)
        await writer.start()
        chunks = reused_records(view, jobs, run_blobs)
        n = 0
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                for rec in chunk:
                    writer.write(Record(**{k: v for k, v in rec.items() if k in _RECORD_FIELDS}))
                    finished.add(rec["job_id"])
                n += len(chunk)
        finally:
            await writer.close()
        if writer.failure is not None:
            raise writer.failure
        if n:
            log.info("%d job(s) reused from the results store %s (not sent to any model)", n, self.store)
        return n

    def _backfill(self, view: StoreView, index: RunIndex) -> None:
        """Records a killed run wrote but did not get into the store (the mirror is behind the
        records by a batch): put in now, so the store loses nothing."""
        from fasteval.store.manage import import_rows

        synced = (read_manifest(self.run_dir) or {}).get("store_synced") or {}
        since = int(synced.get("offset", 0)) if synced.get("store") == str(view.root) else 0
        path = self.run_dir / RECORDS
        if not path.exists() or path.stat().st_size <= since:
            return
        done = import_rows(view, index, index.rows(superseded=None), self.run_dir, since=since)
        if done.added:
            log.info("%d record(s) of this run put into the results store %s (an earlier run stopped before "
                     "it could)", done.added, view.root)

    def mirror(self, run_blobs: Path) -> StoreMirror:
        """The mirror the run's record writer hands its batches to."""
        from fasteval.store.writer import StoreMirror

        return StoreMirror(self.store, self.run_dir, (read_manifest(self.run_dir) or {}).get("run_id"), run_blobs)

    def close(self, mirror: StoreMirror, whole: bool) -> int:
        """Finish the mirror (blocks); when the run and its copy are whole, note how far records.jsonl
        is in the store. Returns the records written into the store."""
        mirror.close()
        if mirror.failure is None and whole:
            try:
                size = (self.run_dir / RECORDS).stat().st_size
                manifest = read_manifest(self.run_dir) or {}
                manifest["store_synced"] = {"store": str(mirror.root), "offset": size}
                write_manifest(self.run_dir, manifest)
            except OSError as e:
                log.warning("manifest not updated (%s): the next run checks this run's records against the store", e)
        return mirror.written
