"""The run folder: records.jsonl (the source of truth), blobs, the run index, merge, disk faults.

Everything that reads or writes a run folder goes through here; it imports only ``fasteval.core``.

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.runfolder.diskfaults import RunDirUnwritable
    from fasteval.runfolder.index import INDEX, JobRow, RunIndex, RunIndexError, open_index, rebuild_index
    from fasteval.runfolder.merge import MergeConflict, merge_runs
    from fasteval.runfolder.records import (
        MANIFEST,
        RECORDS,
        RecordWriter,
        iter_records,
        latest_by_job,
        read_manifest,
        write_manifest,
    )

_WHERE = {
    "BlobStore": "fasteval.runfolder.blobs",
    "RunDirUnwritable": "fasteval.runfolder.diskfaults",
    "INDEX": "fasteval.runfolder.index",
    "JobRow": "fasteval.runfolder.index",
    "RunIndex": "fasteval.runfolder.index",
    "RunIndexError": "fasteval.runfolder.index",
    "open_index": "fasteval.runfolder.index",
    "rebuild_index": "fasteval.runfolder.index",
    "MergeConflict": "fasteval.runfolder.merge",
    "merge_runs": "fasteval.runfolder.merge",
    "MANIFEST": "fasteval.runfolder.records",
    "RECORDS": "fasteval.runfolder.records",
    "RecordWriter": "fasteval.runfolder.records",
    "iter_records": "fasteval.runfolder.records",
    "latest_by_job": "fasteval.runfolder.records",
    "read_manifest": "fasteval.runfolder.records",
    "write_manifest": "fasteval.runfolder.records",
}

__all__ = ["BlobStore", "INDEX", "JobRow", "MANIFEST", "MergeConflict", "RECORDS", "RecordWriter", "RunDirUnwritable", "RunIndex", "RunIndexError", "iter_records", "latest_by_job", "merge_runs", "open_index", "read_manifest", "rebuild_index", "write_manifest"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'fasteval.runfolder' has no attribute {name!r}")
