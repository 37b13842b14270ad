"""The run folder: records.jsonl (the source of truth), blobs, the run index, merge, disk faults, file names.

Everything that reads or writes a run folder goes through here; it imports only ``fasteval.core``.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.runfolder.diskfaults import RunDirUnwritable
    from fasteval.runfolder.index import RunIndex, RunIndexError, open_index, rebuild_index
    from fasteval.runfolder.index_rows import JobRow
    from fasteval.runfolder.merge import MergeConflict, merge_runs
    from fasteval.runfolder.names import BLOBS, CACHE_KEYS, INDEX, MANIFEST, RECORDS, RUN_LOG
    from fasteval.runfolder.records import (
        RecordWriter,
        iter_records,
        latest_by_job,
        read_manifest,
        write_manifest,
    )

__getattr__, __all__ = lazy_face("fasteval.runfolder", {
    "blobs": ("BlobStore",),
    "diskfaults": ("RunDirUnwritable",),
    "index": ("RunIndex", "RunIndexError", "open_index", "rebuild_index"),
    "index_rows": ("JobRow",),
    "merge": ("MergeConflict", "merge_runs"),
    "names": ("BLOBS", "CACHE_KEYS", "INDEX", "MANIFEST", "RECORDS", "RUN_LOG"),
    "records": ("RecordWriter", "iter_records", "latest_by_job", "read_manifest", "write_manifest"),
})
