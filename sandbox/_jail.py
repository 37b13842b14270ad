"""Confinement of a worker process: namespaces, a read-only root, an unprivileged uid, rlimits.

Runs inside the worker after its imports and before it serves any call. Chosen mechanisms:

- ``unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC)``: a private mount table,
  an empty network namespace (only a downed loopback, so no connection leaves, loopback servers
  included), a PID namespace whose init is the worker's zygote (so killing it kills every process
  a call ever started), and an IPC namespace where SysV/POSIX IPC objects are disabled (they would
  outlive a call and let it talk to the next one).
- a fresh ``/proc`` for that PID namespace (``hidepid=2``): code sees only the worker's own
  processes, never the host's command lines (an API key in ``--api-key`` stays invisible).
- a tmpfs root that holds read-only binds of the system and Python trees only, plus the worker's
  own folder at ``/sandbox``; ``chroot`` into it, so run folders, caches and the repository are
  simply not there.
- an unprivileged uid per call child (``setuid`` after the fork; the zygote stays root inside the
  jail and runs no model code): we run as root, where RLIMIT_NPROC is not enforced, so the uid
  drop is what makes the process cap bite; it also forbids signalling the zygote or other
  sessions, and lets the zygote kill every process of a uid after a call without touching others.
- ``PR_SET_NO_NEW_PRIVS`` and ``nosuid`` mounts so setuid binaries under /usr give nothing back.

When the kernel or container refuses namespaces, the pool falls back to ``process`` isolation:
limits plus a Python audit hook that refuses sockets and new processes (weaker; docs/sandbox.md
lists what it still exposes).
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import sysconfig
import time
from typing import Any

from sandbox._libc import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    check,
    libc,
    mount,
)

JAIL_HOME = "/sandbox"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWIPC = 0x08000000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_DEVICES = ("null", "zero", "full", "random", "urandom")


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
    mount(src, dst, None, MS_BIND | MS_REC)
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def enter_namespaces() -> None:
    """Unshare, then fork: the caller returns as PID 1 of the new PID namespace (the zygote).

    The original process stays outside as a shim that only waits and mirrors the zygote's exit;
    the pool kills the shim, and the zygote dies with it (parent-death signal), taking the whole
    namespace with it.
    """
    check(libc.unshare(_CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWPID | _CLONE_NEWIPC), "unshare")
    pid = os.fork()
    if pid:
        _shim(pid)
    set_parent_death_signal()


_WAIT_FOR = """
import os, signal, sys
_, status = os.waitpid(int(sys.argv[1]), 0)
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code & 0xFF)
"""


def _shim(child: int) -> None:
    """Wait for the zygote and exit as it did, in a bare interpreter: this process holds its own
    copy of every import (the zygote's heap was collapsed into fresh huge pages), about 150 MB
    per worker kept for nothing while it waits."""
    os.closerange(3, 65536)  # the protocol pipes belong to the zygote alone
    try:
        os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", _WAIT_FOR, str(child)])
    except OSError:
        pass
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def set_parent_death_signal() -> None:
    check(libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")


def harden_zygote() -> None:
    """No core dumps, no ptrace and no /proc/<pid>/{mem,fd,environ} of the zygote for same-uid code;
    orphans of calls are reparented to it so it can reap them."""
    check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _mount_proc(target: str) -> None:
    os.makedirs(target)
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        mount("proc", target, "proc", flags, "hidepid=2")
    except OSError:  # older kernels: still a private /proc, only without hiding other uids
        mount("proc", target, "proc", flags)


def _disable_ipc(proc: str) -> None:
    """SysV and POSIX message queues would outlive a call; a zero quota in our IPC namespace forbids them."""
    for name, value in (
        ("sys/kernel/shmmax", "0"), ("sys/kernel/msgmni", "0"), ("sys/kernel/sem", "0 0 0 0"),
        ("sys/fs/mqueue/queues_max", "0"),
    ):  # fmt: skip
        try:
            with open(f"{proc}/{name}", "w") as f:
                f.write(value)
        except OSError:
            pass


def enter_jail(host_dir: str, mount_point: str) -> None:
    """Leave the host's view (call after ``enter_namespaces``): only /sandbox (= host_dir) is writable.

    The zygote stays root here; each call child drops to its own uid (``drop_to``).
    """
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = mount_point
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
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
            mount(f"/dev/{dev}", f"{root}/dev/{dev}", None, MS_BIND)
    _mount_proc(f"{root}/proc")
    _disable_ipc(f"{root}/proc")
    os.makedirs(root + JAIL_HOME)
    mount(host_dir, root + JAIL_HOME, None, MS_BIND)
    mount(None, root + JAIL_HOME, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)
    mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chroot(root)
    os.chdir(JAIL_HOME)
    os.chmod(JAIL_HOME, 0o711)  # calls may traverse to /sandbox/work, not list or write /sandbox
    check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
    harden_zygote()


def drop_to(uid: int) -> None:
    """Become ``uid`` for good (all of real, effective and saved ids; no capability survives)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def kill_uids(uids: set[int] | frozenset[int], wait: bool = True, skip: frozenset[int] = frozenset()) -> set[int]:
    """SIGKILL every live process of any of ``uids``; one scan of /proc kills them all.

    Inside the jail this scans the namespace's own /proc: a handful of entries, not the host's.
    ``wait=True`` repeats until a scan finds none (a fork bomb may still be forking);
    ``wait=False`` makes one pass. Returns the uids that still had live processes in the last
    pass: a uid not returned had none, and (as only its own processes can make more) has none.
    ``skip``: pids known to be none of them (the template, the manager, unused spares).
    """
    found: set[int] = set()
    for _ in range(200):
        found = set()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) in skip:
                continue
            owner = _live_uid(entry.name)
            if owner is not None and owner in uids:
                found.add(owner)
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    pass
        if not found or not wait:
            return found
        time.sleep(0.002)
    return found


def _live_uid(pid: str) -> int | None:
    """The real uid of a live (not zombie) process, or None."""
    try:
        fd = os.open(f"/proc/{pid}/status", os.O_RDONLY)
    except OSError:
        return None
    try:
        status = os.read(fd, 4096)  # State and Uid are in the first lines
    except OSError:
        return None
    finally:
        os.close(fd)
    state = status.find(b"\nState:")
    uid = status.find(b"\nUid:")
    if state < 0 or uid < 0 or status[state + 7:state + 9].strip().startswith(b"Z"):
        return None
    return int(status[uid + 5:status.index(b"\n", uid + 5)].split()[0])


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
