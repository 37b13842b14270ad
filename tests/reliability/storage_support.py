"""Real small filesystems for storage-fault tests: a tmpfs mounted for the test (root only)."""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    """A fresh tmpfs of ``size`` at ``where``; the test is skipped where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def remount_read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)


def fill_disk(path: Path) -> int:
    """Write ``path`` until the filesystem is full (64 KiB, then page-sized pieces); returns the bytes written."""
    written = 0
    with path.open("wb", buffering=0) as f:
        for size in (65536, 4096, 512):
            chunk = b"\0" * size
            while True:
                try:
                    written += f.write(chunk) or 0
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    return written
