"""Temporary pool folders named after their owner, and removal of those whose owner is dead.

A sweep killed with ``kill -9`` never runs ``SandboxPool.close``, so its ``fasteval-sandbox-*``
folder stays in the temp dir. The folder name carries the owner's pid *and* start time (from
``/proc/<pid>/stat``), so a recycled pid is not mistaken for the owner, and a live pool's folder is
never touched. Folders without that information (older versions) are left alone.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

PREFIX = "fasteval-sandbox-"
_NAME = re.compile(rf"^{PREFIX}(\d+)-(\d+)-")


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22; the command name (field 2) may contain spaces and parentheses, so split after it.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else None


def root_prefix() -> str:
    """``mkdtemp`` prefix naming this process as the folder's owner."""
    pid = os.getpid()
    return f"{PREFIX}{pid}-{process_start(pid) or 0}-"


def clean_stale_roots(tmp: Path) -> list[Path]:
    """Remove pool folders in ``tmp`` whose owning process is gone; returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return removed
    for entry in entries:
        m = _NAME.match(entry.name)
        if m is None or not entry.is_dir(follow_symlinks=False):
            continue
        pid, start = int(m.group(1)), int(m.group(2))
        if process_start(pid) == start:
            continue  # the owner is alive
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
