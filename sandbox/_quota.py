"""Disk quotas for the folders model code writes: a call's and a trajectory's bytes and inodes.

``RLIMIT_FSIZE`` caps one file; nothing capped how many. In the jail each working folder (a
stateless call's, a session's, a kept work folder's) is its own small tmpfs mount, so the kernel
stops writes at the quota (``ENOSPC``) and nothing reaches the host's disk. Before each call of a
session its tmpfs is resized to what it holds plus one call's allowance, capped by the
trajectory's: a call can add at most ``call_disk_*``, a trajectory hold at most
``trajectory_disk_*``, and a full folder never touches another trajectory's (each has its own
mount). Folders are parked and brought back with ``MS_MOVE`` (a mount point cannot be renamed)
and removed with a lazy unmount. The memory a tmpfs holds is bounded by these quotas.

Without the jail (``isolation="process"``, no mount rights) folders are plain directories: after
each call the folder is measured and a call or trajectory over its quota gets an error and the
folder's files are removed. That stops a trajectory from growing, not one call from writing up to
its file-size limit times its open-file limit before it ends.

All workers' folders together hold at most ``pool_disk_bytes`` (``sandbox._ledger``): a call's
allowance is also capped by what the pool has left, so a call that would pass the pool's budget
meets the same full folder (jail) or emptied folder (process isolation) as one past its own.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox._ledger import DiskLedger
from sandbox._libc import MS_MOVE, MS_NODEV, MS_NOSUID, MS_REMOUNT, mount, umount_lazy


def usage(path: Path) -> tuple[int, int]:
    """Bytes and inodes a tmpfs folder holds (statvfs: constant time, whatever it holds)."""
    return _held(os.statvfs(path))


def _held(st: os.statvfs_result) -> tuple[int, int]:
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree


RECYCLE_INODES = 64
"""A stateless folder holding more entries than this is unmounted, not emptied file by file."""
_FS_IOC_GETFLAGS = 0x80086601


def walk_usage(path: Path, stop_at: int) -> tuple[int, int]:
    """Bytes and inodes of a plain folder, counting stops once ``stop_at`` inodes are seen."""
    size, inodes = 0, 1
    stack = [str(path)]
    while stack and inodes <= stop_at:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            inodes += 1
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            size += st.st_blocks * 512
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
    return size, inodes


class FolderQuota:
    """Makes, moves, resizes and removes working folders under the quotas of ``limits``."""

    def __init__(self, limits: dict[str, Any], mounts: bool, ledger: DiskLedger | None = None) -> None:
        self.call = int(limits.get("call_disk_bytes", 512 << 20)), int(limits.get("call_disk_inodes", 10_000))
        self.trajectory = (int(limits.get("trajectory_disk_bytes", 1 << 30)),
                           int(limits.get("trajectory_disk_inodes", 20_000)))
        self.mounts = mounts
        self.ledger = ledger
        self._before: dict[str, tuple[int, int]] = {}
        self.held: dict[str, int] = {}
        self._reserved = False  # the ledger's slot holds a call's reservation that nothing settled yet
        self._parent_dev: dict[Path, int] = {}
        """Bytes each session's folder held after its last call (what this worker adds to the ledger)."""

    def _options(self, size: int, inodes: int, uid: int | None) -> str:
        owner = f",uid={uid},gid={uid}" if uid is not None else ""
        return f"size={max(size, 1 << 16)},nr_inodes={max(inodes, 2)},mode=0700{owner}"

    def create(self, path: Path, uid: int, chown: bool) -> None:
        """A new empty folder owned by ``uid``, allowed one call's writes."""
        if not (self.mounts and path.is_dir()):  # in the jail ``work`` stays as the mount point's folder
            path.mkdir(mode=0o700)
        if self.mounts:
            mount("tmpfs", str(path), "tmpfs", MS_NOSUID | MS_NODEV, self._options(*self.call, uid))
        elif chown:
            os.chown(path, uid, uid)

    def occupied(self, path: Path) -> bool:
        """Whether a folder is at ``path`` (in the jail: a tmpfs mounted there)."""
        return self._mounted(path) if self.mounts else path.exists()

    def _mounted(self, path: Path) -> bool:
        """``os.path.ismount`` in one ``lstat``: that one also resolves the parent's real path
        (a system call per component), several times per call; our folders' parents
        (``/sandbox`` and its parking folder) are plain folders that stay where they are."""
        try:
            dev = os.lstat(path).st_dev
        except FileNotFoundError:
            return False
        parent = self._parent_dev.get(path.parent)
        if parent is None:
            parent = self._parent_dev[path.parent] = os.stat(path.parent).st_dev
        return dev != parent

    def move(self, src: Path, dst: Path, keep_src: bool = False) -> None:
        """``os.replace`` for folders that may be mount points. ``dst`` may be an empty folder
        (the mount point ``work``); ``keep_src`` leaves ``src``'s empty folder for the next move."""
        if self.mounts and self._mounted(src):
            if not dst.is_dir():
                dst.mkdir(mode=0o700)
            mount(str(src), str(dst), None, MS_MOVE)
            if not keep_src:
                os.rmdir(src)
        else:
            os.replace(src, dst)

    def before_call(self, path: Path, key: str | None, held_as: str | None = None) -> None:
        """Give the call's folder room for one more call, within the trajectory's quota and what
        the pool's budget has left (a stateless call's folder too, when there is a ledger).
        ``held_as``: the name its bytes go by in ``held`` (the session's key, or the stateless
        folder's)."""
        if key is None and self.ledger is None:
            return
        held_as = held_as or key
        if not self.mounts:
            if key is not None:
                self._before[key] = walk_usage(path, self.trajectory[1])
            return
        st = os.statvfs(path)
        used, inodes = _held(st)
        if key is not None:
            self._before[key] = used, inodes
        size = min(self.trajectory[0], used + self.call[0]) if key is not None else self.call[0]
        if self.ledger is not None:
            others = sum(v for k, v in self.held.items() if k != held_as)
            size = used + self.ledger.reserve(others + used, max(size - used, 0))
            self._reserved = True
        count = min(self.trajectory[1], inodes + self.call[1]) if key is not None else self.call[1]
        size, count = max(size, used, 1 << 16), max(count, inodes, 2)
        if st.f_blocks * st.f_frsize == -(-size // st.f_frsize) * st.f_frsize and st.f_files == count:
            return  # already this size (a recycled stateless folder, as a rule): no remount
        mount(None, str(path), None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={size},nr_inodes={count}")

    def _settle(self, key: str | None, used: int) -> int:
        """Record a folder's bytes after its call; the bytes the other workers hold."""
        if key is not None:
            self.held[key] = used
        self._reserved = False
        return self.ledger.settle(sum(self.held.values())) if self.ledger is not None else 0

    def forget(self, held_as: str) -> None:
        """A folder's bytes leave the ledger (it was emptied or removed), and so does a
        reservation that no ``after_call`` settled (the call crashed or timed out)."""
        if (self.held.pop(held_as, None) is not None or self._reserved) and self.ledger is not None:
            self._settle(None, 0)

    def empty(self, path: Path) -> bool:
        """Delete what a stateless call left in its tmpfs (no process of its uid is left); True
        when it then holds nothing (no byte, one inode: its root). False, and nothing deleted,
        when it holds too many entries to delete one by one: unmounting it is cheaper."""
        if not self.mounts:
            return False
        used, inodes = usage(path)
        if (used, inodes) == (0, 1):
            return True
        if inodes > RECYCLE_INODES:
            return False
        for entry in list(os.scandir(path)):
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)  # never follows a symlink, even one swapped in
                else:
                    os.unlink(entry.path)
            except OSError:
                pass  # what is left fails the check below: the folder is unmounted instead
        return usage(path) == (0, 1)

    def recycle(self, path: Path, uid: int) -> bool:
        """Make a stateless call's tmpfs ready for the next call of the same ``uid``, whose
        processes are all gone; False when it cannot be made as good as a fresh one (then
        unmount it).

        Reusing the mount spares the next call a mount and, above all, this one an unmount:
        ``umount`` waits for an RCU grace period (1-2 ms on the development VM). As good as
        fresh means: nothing in it (statvfs: no byte, one inode), and its root as ``create``
        made it (mode 0700, owned by ``uid``, no extended attribute or ACL, no inode flag), so
        nothing one call set on it reaches a later one.
        """
        if not self.empty(path):
            return False
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            flags = fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))
            return (st.st_mode & 0o7777 == 0o700 and st.st_uid == uid and st.st_gid == uid
                    and not os.listxattr(fd) and not any(flags))
        except OSError:
            return False
        finally:
            os.close(fd)

    def after_call(self, path: Path, key: str | None, wipe: Callable[[Path], None],
                   held_as: str | None = None) -> str | None:
        """A note for the call's reply when the folder hit a quota (None when it did not)."""
        held_as = held_as or key
        if self.mounts:
            try:
                st = os.statvfs(path)
            except OSError:
                return None
            # tmpfs keeps no reserve: a full folder has (next to) no free block or no free inode.
            before = self._before.pop(key, (0, 0)) if key is not None else (0, 0)
            self._settle(held_as, _held(st)[0])
            if st.f_bavail * st.f_frsize >= 1 << 16 and st.f_favail > 0:
                return None
            if _held(st) == before:  # a call that only read a full folder hit nothing
                return None
            return self._note("the work folder is full")
        if not path.is_dir():
            return None
        used, inodes = walk_usage(path, self.trajectory[1])
        before = self._before.pop(key, (0, 1)) if key is not None else (0, 1)
        over_call = used - before[0] > self.call[0] or inodes - before[1] > self.call[1]
        over_traj = used > self.trajectory[0] or inodes > self.trajectory[1]
        others = self._settle(held_as, used)
        over_pool = self.ledger is not None and others + sum(self.held.values()) + (0 if held_as else used) > self.ledger.budget
        if not (over_call or over_traj or over_pool):
            return None
        for entry in list(os.scandir(path)):
            wipe(Path(entry.path))
        self._settle(held_as, 0)
        return self._note("the work folder went over its quota and its files were removed")

    def _note(self, what: str) -> str:
        return (f"SandboxError: {what}: a call may add {self.call[0]} bytes and {self.call[1]} files, a "
                f"trajectory keep {self.trajectory[0]} bytes and {self.trajectory[1]} files, all trajectories "
                f"together {self.ledger.budget if self.ledger else 'any number of'} bytes "
                "(SandboxLimits call_disk_* / trajectory_disk_* / pool_disk_bytes)")

    def remove(self, path: Path, fallback: Callable[[Path], None], key: str | None = None) -> None:
        """Drop a folder: a lazy unmount of its tmpfs (frees it at once), else ``fallback``;
        ``key``'s bytes leave the ledger."""
        if key is not None:
            self.held.pop(key, None)
        if self.ledger is not None:  # also ends a reservation no after_call settled (a crashed call)
            self._settle(None, 0)
        if self.mounts and self._mounted(path):
            umount_lazy(str(path))
            os.rmdir(path)
        else:
            fallback(path)
