"""Confinement of a worker process: namespaces, a read-only root, an unprivileged uid, rlimits.

Runs inside the worker after its imports and before it serves any call. Chosen mechanisms:

- ``unshare(CLONE_NEWNS | CLONE_NEWNET)``: a private mount table and an empty network namespace
  (only a downed loopback), so no connection can leave the process, loopback servers included.
- a tmpfs root that holds read-only binds of the system and Python trees only, plus the worker's
  own folder at ``/sandbox``; ``chroot`` into it, so run folders, caches and the repository are
  simply not there.
- a fresh uid per worker (``setuid``): we run as root, where RLIMIT_NPROC is not enforced, so the
  uid drop is what makes the process cap bite; it also forbids signalling the pool (root) or other
  workers, and lets a worker kill every process of its uid after a call without touching anyone else.
- ``PR_SET_NO_NEW_PRIVS`` and ``nosuid`` mounts so setuid binaries under /usr give nothing back.

When the kernel or container refuses namespaces, the pool falls back to ``process`` isolation:
limits plus a Python audit hook that refuses sockets and new processes (weaker, documented).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import sysconfig
from typing import Any

JAIL_HOME = "/sandbox"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT = 1, 2, 4, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_PR_SET_NO_NEW_PRIVS = 38
_DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    _check(_libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def readonly_trees() -> list[str]:
    """System and Python directories the jailed code may read (lazy imports need them)."""
    paths = ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64"]
    paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    paths += [sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")]
    real = sorted({os.path.normpath(p) for p in paths if p and os.path.lexists(p)})
    # A tree already inside another listed tree is covered by that bind.
    return [p for p in real if not any(p != q and p.startswith(q + "/") for q in real)]


def _bind_readonly(src: str, dst: str) -> None:
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    _mount(src, dst, None, _MS_BIND | _MS_REC)
    _mount(None, dst, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def enter_jail(host_dir: str, mount_point: str, uid: int) -> None:
    """Leave the host's view: from here on only /sandbox (= host_dir) is writable."""
    _check(_libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET), "unshare")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    root = mount_point
    _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=755")
    for tree in readonly_trees():
        dst = root + tree
        if os.path.islink(tree) and os.path.dirname(tree) == "/":
            os.symlink(os.readlink(tree), dst)  # merged-/usr layouts: /lib -> usr/lib
        else:
            _bind_readonly(tree, dst)
    for dev in _DEVICES:
        if os.path.exists(f"/dev/{dev}"):
            os.makedirs(f"{root}/dev", exist_ok=True)
            open(f"{root}/dev/{dev}", "a").close()
            _mount(f"/dev/{dev}", f"{root}/dev/{dev}", None, _MS_BIND)
    os.makedirs(f"{root}/proc")
    _mount("/proc", f"{root}/proc", None, _MS_BIND | _MS_REC)
    os.makedirs(root + JAIL_HOME)
    _mount(host_dir, root + JAIL_HOME, None, _MS_BIND)
    _mount(None, root + JAIL_HOME, None, _MS_REMOUNT | _MS_BIND | _MS_NOSUID | _MS_NODEV)
    _mount(None, root, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    os.chroot(root)
    os.chdir(JAIL_HOME)
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def apply_limits(limits: dict[str, Any]) -> None:
    """Hard rlimits, set while still privileged so the code cannot raise them again."""

    def cap(kind: int, value: int) -> None:
        resource.setrlimit(kind, (value, value))

    cap(resource.RLIMIT_AS, int(limits["memory_bytes"]))
    cap(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    cap(resource.RLIMIT_NOFILE, int(limits["open_files"]))
    cap(resource.RLIMIT_NPROC, int(limits["max_procs"]))
    cap(resource.RLIMIT_CORE, 0)
    # Writing past RLIMIT_FSIZE then fails with EFBIG (an OSError the code sees) instead of a kill.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


_BLOCKED_EVENTS = frozenset(
    {"os.fork", "os.forkpty", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "subprocess.Popen"}
)


def _audit_guard(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.__new__" and len(args) > 1 and args[1] in (2, 10):  # AF_INET, AF_INET6
        raise PermissionError("network access is disabled in the sandbox")
    if event in ("socket.connect", "socket.bind", "socket.getaddrinfo"):
        raise PermissionError("network access is disabled in the sandbox")
    if event in _BLOCKED_EVENTS:
        raise PermissionError("starting processes is disabled in the sandbox")


def install_process_guards() -> None:
    """Fallback when namespaces are unavailable: refuse sockets and new processes at the Python level."""
    sys.addaudithook(_audit_guard)
