"""A sweep's finished records, also written into the results store (off the event loop).

The run's record writer hands each written batch over (``offer``); a thread of its own copies the
batch's images into the store and appends the records to this process's segment, so a slow or
remote store never holds the sweep up. A record the run copied from the store is not written
back (it is there already). The store is a second home, not the source of truth: if it cannot be
written, the run goes on, one warning says so, and ``fasteval store import STORE RUN`` later puts
the run's records in.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fasteval.core.types import Record
from fasteval.store.blobs import copy_blobs, image_refs
from fasteval.store.segments import BLOBS, SegmentWriter, ensure_store, entry_of, envelope, is_fingerprint

log = logging.getLogger("fasteval")


def provenance(run_dir: Path, run_id: str | None) -> dict[str, Any]:
    """Which run computed a record, where and when: what the store keeps beside each record."""
    from fasteval.core.version import fasteval_version

    return {"run": str(run_dir.resolve()), "run_id": run_id, "host": socket.gethostname(),
            "at": datetime.now(UTC).isoformat(timespec="seconds"), "fasteval": fasteval_version()}


class StoreMirror:
    """Writes a run's records into a store from a background thread (one segment per mirror)."""

    def __init__(self, root: Path, run_dir: Path, run_id: str | None, run_blobs: Path) -> None:
        self.root = root
        self.run_dir = run_dir
        self.run_id = run_id
        self.run_blobs = run_blobs
        self.written = 0
        self.failure: str | None = None
        self._queue: queue.Queue[list[tuple[bytes, Record]] | None] = queue.Queue()
        self._segment: SegmentWriter | None = None
        self._thread = threading.Thread(target=self._work, name="fasteval-store", daemon=True)
        self._thread.start()

    def offer(self, batch: list[tuple[bytes, Record]]) -> None:
        """Take a batch of (line as written, record): returns at once."""
        if self.failure is None:
            self._queue.put(batch)

    def close(self) -> None:
        """Write what was offered and seal the segment (blocks; call from a thread off the loop)."""
        self._queue.put(None)
        self._thread.join()
        if self._segment is not None:
            self._segment.close()

    def _work(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            if self.failure is not None:
                continue
            try:
                self._write(batch)
            except OSError as e:
                self.failure = f"{type(e).__name__}: {e}"
                log.warning("results store %s not written (%s): the run goes on; `fasteval store import %s %s` "
                            "adds its records later", self.root, self.failure, self.root, self.run_dir)

    def _write(self, batch: list[tuple[bytes, Record]]) -> None:
        stored = provenance(self.run_dir, self.run_id)
        lines = []
        for line, rec in batch:
            if rec.reused is not None or not is_fingerprint(rec.fingerprint):
                continue  # from the store already, or from before fingerprints: nothing to key it by
            refs = image_refs(rec)
            if refs:
                copy_blobs(self.run_blobs, self.root / BLOBS, refs)
            ok = rec.status == "ok"
            lines.append((envelope(rec.fingerprint, ok, stored, line), entry_of(rec.fingerprint, rec.components, ok, 0, 0)))
        if not lines:
            return
        if self._segment is None:
            ensure_store(self.root)
            self._segment = SegmentWriter(self.root)
        self._segment.write(lines)
        self.written += len(lines)
