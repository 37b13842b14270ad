"""The results store: finished records of every run, keyed by job fingerprint, shared across runs.

A folder many processes write at once (each its own segment file, no locks: safe on NFS), read by
merging every segment's compact fingerprint entries; a new run copies an ok record of a planned
job's fingerprint instead of running it. docs/run-folder.md, "The results store".

The names below load their module on first use, so importing one part never imports the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fasteval.core.face import lazy_face

if TYPE_CHECKING:
    from fasteval.store.manage import gc, import_run, listing, summary
    from fasteval.store.reader import StoreError, StoreView, open_view
    from fasteval.store.reuse import reused_records
    from fasteval.store.writer import StoreMirror

__getattr__, __all__ = lazy_face("fasteval.store", {
    "manage": ("gc", "import_run", "listing", "summary"),
    "reader": ("StoreError", "StoreView", "open_view"),
    "reuse": ("reused_records",),
    "writer": ("StoreMirror",),
})
