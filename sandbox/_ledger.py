"""The pool-wide disk budget: bytes each worker's working folders hold, in one shared file.

In the jail every working folder is a tmpfs, so what model code writes is memory, and N kept
trajectories pin N times ``trajectory_disk_bytes`` of it. Each worker writes what its folders
hold (measured by statvfs, where the memory is) into its own slot of a small file the pool made
before starting it; before a call it reserves the call's allowance under a POSIX record lock,
so the slots together never promise more than ``pool_disk_bytes``, whatever the workers do at
once. A worker that dies takes its folders with it; the pool zeroes its slot.
"""

from __future__ import annotations

import array
import fcntl
import os
import struct
import sys
from pathlib import Path

SLOTS = 1000
"""One per worker uid block (``sandbox._pool``: uids repeat after 1000 workers)."""
_SLOT = struct.Struct("<q")


def create_ledger(path: Path) -> None:
    """An all-zero ledger (the pool, before any worker starts)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, SLOTS * _SLOT.size)
    finally:
        os.close(fd)


def clear_slot(path: Path, slot: int) -> None:
    """Forget a worker's bytes (it is gone, and its tmpfs mounts with it)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        os.pwrite(fd, _SLOT.pack(0), slot * _SLOT.size)
    finally:
        os.close(fd)


class DiskLedger:
    """One worker's view of the ledger: its slot, and the pool's budget."""

    def __init__(self, fd: int, slot: int, budget: int) -> None:
        self.fd, self.slot, self.budget = fd, slot, budget

    def _others(self) -> int:
        # Summed in C: a Python loop over the 1000 slots cost ~0.15 ms, twice per call.
        values = array.array("q", os.pread(self.fd, SLOTS * _SLOT.size, 0))
        if sys.byteorder != "little":
            values.byteswap()
        return sum(values) - values[self.slot]

    def reserve(self, held: int, want: int) -> int:
        """Room for one call (at most ``want`` bytes) beside the ``held`` bytes of this worker;
        the slot then promises both until ``settle``."""
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            room = max(0, min(want, self.budget - self._others() - held))
            os.pwrite(self.fd, _SLOT.pack(held + room), self.slot * _SLOT.size)
            return room
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)

    def settle(self, held: int) -> int:
        """Record what this worker's folders hold now; the bytes the other workers hold."""
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            os.pwrite(self.fd, _SLOT.pack(held), self.slot * _SLOT.size)
            return self._others()
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)
