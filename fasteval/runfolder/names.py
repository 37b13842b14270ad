"""The run folder's file names, in one place: every module that opens one of them says it by name.

docs/run-folder.md draws the folder; scripts and Slurm jobs rely on these names, so they change
here or nowhere.
"""

from __future__ import annotations

RECORDS = "records.jsonl"
"""The source of truth: one line per finished job, appended, never rewritten."""
MANIFEST = "manifest.json"
"""The config, its hash, the versions and the plan this folder was started with."""
INDEX = "index.sqlite"
"""The run index, rebuilt from records.jsonl whenever it is missing or stale."""
RUN_LOG = "run.log"
"""Warnings and internal errors, tracebacks included (never on the terminal)."""
BLOBS = "blobs"
"""Images by sha256, two hex digits per folder."""
CACHE_KEYS = "cache_keys.txt"
"""The cache keys this run read or wrote (``fasteval cache export --run-dir``)."""
TRACKERS = "trackers.json"
"""``log_to:`` only: the experiment trackers' run ids, so a resumed sweep logs into the same runs."""
