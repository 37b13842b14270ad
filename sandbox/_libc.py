"""The few libc calls the sandbox makes through ctypes (mount, umount2, unshare, prctl), in one place.

Python's ``os`` module has none of them. ``sandbox._jail`` builds the worker's jail with them and
``sandbox._quota`` the call folders' tmpfs mounts; both raise the same ``OSError`` on failure.
"""

from __future__ import annotations

import ctypes
import os

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 4096, 8192, 16384, 1 << 18
MNT_DETACH = 2

libc = ctypes.CDLL(None, use_errno=True)


def check(rc: int, what: str) -> None:
    """Raise ``OSError`` with errno and a readable message when a libc call returned non-zero."""
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2); ``None`` arguments are passed as NULL."""

    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    check(libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def umount_lazy(target: str) -> None:
    """umount2(MNT_DETACH): detached at once, freed when its last user lets go."""
    check(libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")
