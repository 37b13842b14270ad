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
import json
import os
import socket
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.errors import ControlAnswerUnreadable, ControlRefused, NoSweepRunning
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

    Bound in a private folder of our own (0700, made for it inside the run folder), made 0600
    there, then renamed into place: no moment exists where the final name accepts connections
    with looser permissions, and no one else can swap the socket for a link between the bind and
    the chmod (a chmod follows links: in a shared run folder that swap would hand another file
    0600). A socket a live sweep still answers on, or a non-socket at that name (a planted link
    or file), is refused with ControlRefused.
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
    run_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with _private_folder(run_dir, run_fd) as (name, dir_fd):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(f"/proc/self/fd/{dir_fd}/{CONTROL_SOCKET}")  # short, however deep the run folder
                os.chmod(CONTROL_SOCKET, 0o600, dir_fd=dir_fd)
                sock.listen(16)
                os.rename(CONTROL_SOCKET, CONTROL_SOCKET, src_dir_fd=dir_fd, dst_dir_fd=run_fd)
            except BaseException:
                sock.close()
                with contextlib.suppress(OSError):
                    os.unlink(CONTROL_SOCKET, dir_fd=dir_fd)
                raise
    finally:
        os.close(run_fd)
    sock.setblocking(False)
    return sock


@contextlib.contextmanager
def _private_folder(run_dir: Path, run_fd: int) -> Iterator[tuple[str, int]]:
    """A new 0700 folder of ours in the run folder, open (name, descriptor); removed afterwards.

    Checked through its descriptor (ours, 0700, not a link): a folder swapped in between its
    creation and its opening is refused, never used.
    """
    name = f".{CONTROL_SOCKET}.{os.getpid()}"  # anything already there is in the way: no socket, one warning
    os.mkdir(name, 0o700, dir_fd=run_fd)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=run_fd)
        try:
            st = os.fstat(fd)
            if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
                raise OSError(errno.EPERM, f"{run_dir / name} was replaced while the control socket was made")
            yield name, fd
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(name, dir_fd=run_fd)


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
        try:
            sock.sendall(orjson.dumps(request) + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the sweep answered and closed before reading (busy, or another user): read why
        data = _read_line(sock)
    except TimeoutError:
        raise NoSweepRunning(f"the sweep in {run_dir} did not answer within {timeout_s:g} s") from None
    except OSError as e:
        raise NoSweepRunning(f"the sweep in {run_dir} dropped the connection ({e.strerror or e})") from None
    finally:
        sock.close()
    if not data:
        raise NoSweepRunning(f"the sweep in {run_dir} closed the connection without an answer")
    try:
        answer = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ControlAnswerUnreadable(f"the sweep in {run_dir} answered something that is not JSON "
                                      f"({len(data)} bytes): is it another fasteval version?") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
        raise ControlAnswerUnreadable(f"the sweep in {run_dir} answered JSON without an \"ok\" field: "
                                      "is it another fasteval version?")
    return answer


def _read_line(sock: socket.socket) -> bytes:
    """One answer line; a reset after the line (the sweep closed without reading us) is no failure."""
    buf = bytearray()
    while b"\n" not in buf and len(buf) <= MAX_MESSAGE:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            if buf:
                break
            raise
        if not chunk:
            break
        buf += chunk
    return bytes(buf.split(b"\n", 1)[0])


def append_trace(run_dir: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """Append one change to the trace (``at`` added when missing); returns the line as written.

    Whatever the entry holds is written (an int past 64 bits as its digits): a change that was
    made is never left out of the trace because it could not be encoded.
    """
    line = {"at": datetime.now(UTC).isoformat(timespec="milliseconds"), **entry}
    try:
        data = orjson.dumps(line, default=str)
    except TypeError:  # an int past 64 bits (orjson's limit): the standard library writes its digits
        data = json.dumps(line, default=str, ensure_ascii=False).encode("utf-8", "replace")
    fd = open_nofollow(run_dir / CONTROL_TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "the control trace")
    try:
        os.write(fd, data + b"\n")
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
