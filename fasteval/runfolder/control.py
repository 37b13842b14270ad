"""A running sweep's control socket and its trace, both in the run folder.

``control.sock`` is a Unix socket (0600, the peer's uid checked by the server): ``fasteval ctl``
sends one JSON line and reads one back, nothing listens on the network. ``control.jsonl`` is the
trace: one appended line per change (who, when, command, old -> new), read by ``status``, the
report and the viewer, so a figure measured under changed limits says so. Both the sweep (which
serves and appends) and the CLI (which asks and reads) use this module, so the wire lives once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.errors import ControlRefused, NoSweepRunning
from fasteval.runfolder.safe_open import open_nofollow

CONTROL_SOCKET = "control.sock"
CONTROL_TRACE = "control.jsonl"
MAX_MESSAGE = 1 << 20
"""Bytes of one request or answer line (a status of many models is tens of KiB)."""
_SUN_PATH = 90
"""sun_path holds 108 bytes on Linux (less the temporary name's suffix); longer paths go through /proc/self/fd."""


@contextlib.contextmanager
def socket_path(run_dir: Path) -> Iterator[str]:
    """The socket's path, short enough for ``bind``/``connect`` however deep the run folder is.

    A path over sun_path's limit is reached through an open descriptor of the folder
    (``/proc/self/fd/N/control.sock``), which names the same inode without a chdir (the process's
    working directory is shared by every thread).
    """
    full = str(run_dir / CONTROL_SOCKET)
    if len(full.encode()) <= _SUN_PATH:
        yield full
        return
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{CONTROL_SOCKET}"
    finally:
        os.close(fd)


def _is_alive(path: str) -> bool:
    """Does a process answer on this socket? (A refused connect is a sweep that died.)"""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(path)
        return True
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as e:
        return e.errno not in (errno.ECONNREFUSED, errno.ENOENT)
    finally:
        probe.close()


def sweep_answers(run_dir: Path) -> bool:
    """Whether a sweep runs in ``run_dir`` now: its control socket answers (a stale one, left by a
    ``kill -9``, refuses). The probe connects and closes without a request; the sweep answers it
    with a refusal nobody reads, and records nothing."""
    try:
        if not stat.S_ISSOCK(os.lstat(run_dir / CONTROL_SOCKET).st_mode):
            return False
        with socket_path(run_dir) as path:
            return _is_alive(path)
    except OSError:
        return False


def bind_control_socket(run_dir: Path) -> socket.socket:
    """A listening socket at ``run_dir/control.sock``, mode 0600; a stale one is replaced.

    Bound under a temporary name, made 0600, then renamed into place: no moment exists where the
    final name accepts connections with looser permissions. A socket a live sweep still answers
    on, or a non-socket at that name (a planted link or file), is refused with ControlRefused.
    """
    target = run_dir / CONTROL_SOCKET
    with socket_path(run_dir) as path:
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            st = None
        if st is not None:
            if not stat.S_ISSOCK(st.st_mode):
                raise ControlRefused(f"{target} exists and is not a socket: refusing to replace it (remove it)")
            if _is_alive(path):
                raise ControlRefused(f"another sweep is running in {run_dir} (its control socket answers); "
                                     "stop it or use another --run-dir")
            os.unlink(target)  # left by a sweep that died (kill -9, a node lost): replaced
        tmp_name = f".{CONTROL_SOCKET}.{os.getpid()}"
        tmp = path[: -len(CONTROL_SOCKET)] + tmp_name
        with contextlib.suppress(FileNotFoundError):
            os.unlink(run_dir / tmp_name)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(tmp)
            os.chmod(run_dir / tmp_name, 0o600)
            sock.listen(16)
            os.rename(run_dir / tmp_name, target)
        except BaseException:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(run_dir / tmp_name)
            raise
        sock.setblocking(False)
        return sock


def unlink_control_socket(run_dir: Path, sock: socket.socket) -> None:
    """Close our socket and remove its name at the end of the sweep (a successor never takes it while we answer)."""
    sock.close()
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(run_dir / CONTROL_SOCKET).st_mode):
            os.unlink(run_dir / CONTROL_SOCKET)


def ask(run_dir: Path, request: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
    """Send one command to the sweep running in ``run_dir``; its answer as a dict.

    NoSweepRunning says why nothing answered: no socket (no sweep, or one that ended cleanly),
    or a stale one (a sweep that died without removing it).
    """
    target = run_dir / CONTROL_SOCKET
    if not run_dir.is_dir():
        raise NoSweepRunning(f"{run_dir}: no such run folder")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        raise NoSweepRunning(f"no sweep is running in {run_dir} (no {CONTROL_SOCKET})") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise NoSweepRunning(f"{target} is not a socket: not a sweep's control channel")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        with socket_path(run_dir) as path:
            try:
                sock.connect(path)
            except (ConnectionRefusedError, FileNotFoundError):
                raise NoSweepRunning(f"no sweep is running in {run_dir} (its {CONTROL_SOCKET} is stale: the sweep "
                                     "that made it is gone; the next run replaces it)") from None
            except PermissionError:
                raise NoSweepRunning(f"{target}: permission denied (the sweep belongs to another user)") from None
        sock.sendall(orjson.dumps(request) + b"\n")
        data = _read_line(sock)
    except TimeoutError:
        raise NoSweepRunning(f"the sweep in {run_dir} did not answer within {timeout_s:g} s") from None
    except OSError as e:
        raise NoSweepRunning(f"the sweep in {run_dir} dropped the connection ({e.strerror or e})") from None
    finally:
        sock.close()
    if not data:
        raise NoSweepRunning(f"the sweep in {run_dir} closed the connection without an answer")
    answer = orjson.loads(data)
    if not isinstance(answer, dict):
        raise NoSweepRunning(f"the sweep in {run_dir} answered something that is not an object")
    return answer


def _read_line(sock: socket.socket) -> bytes:
    buf = bytearray()
    while b"\n" not in buf and len(buf) <= MAX_MESSAGE:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return bytes(buf.split(b"\n", 1)[0])


def append_trace(run_dir: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """Append one change to the trace (``at`` added when missing); returns the line as written."""
    line = {"at": datetime.now(UTC).isoformat(timespec="milliseconds"), **entry}
    fd = open_nofollow(run_dir / CONTROL_TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "the control trace")
    try:
        os.write(fd, orjson.dumps(line, default=str) + b"\n")
    finally:
        os.close(fd)
    return line


def read_trace(run_dir: Path, last: int | None = None) -> list[dict[str, Any]]:
    """The trace's entries, oldest first (the ``last`` N only); unreadable lines are skipped."""
    try:
        fd = open_nofollow(run_dir / CONTROL_TRACE, os.O_RDONLY, "the control trace")
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    with os.fdopen(fd, "rb") as f:
        for raw in f:
            try:
                entry = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                out.append(entry)
                if last is not None and len(out) > last:
                    del out[0]
    return out


def trace_summary(entries: list[dict[str, Any]]) -> str:
    """One line per entry for terminals and reports: ``when who command: what old -> new``."""
    lines = []
    for e in entries:
        changes = "; ".join(f"{c.get('what')}: {c.get('old')} -> {c.get('new')}" for c in e.get("changes") or [])
        lines.append(f"{e.get('at', '?')} {e.get('who', '?')} {e.get('command', '?')}"
                     + (f" ({changes})" if changes else ""))
    return "\n".join(lines)
