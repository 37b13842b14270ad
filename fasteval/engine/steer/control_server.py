"""The control socket of a running sweep: one JSON request line in, one JSON answer line out.

The socket lives in the run folder (fasteval.runfolder.control binds it 0600 and replaces a stale
one); every connection's peer is checked with SO_PEERCRED and anyone but the sweep's own user is
refused, so a shared run folder on a cluster filesystem never lets another account steer the run.
At most ``MAX_CONNECTIONS`` are served at once, each with a short deadline to send its line: a flood
of connections is refused as it arrives instead of eating the sweep's file descriptors. Each change
is appended to the trace with who (user, uid, pid of the client), when, the command, and old -> new.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import pwd
import socket
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from fasteval.engine.steer.control import FOR_THIS_SWEEP
from fasteval.engine.steer.steering import SCOPES, ControlError, Steering
from fasteval.runfolder.control import (
    CONTROL_SOCKET,
    CONTROL_TRACE,
    MAX_MESSAGE,
    append_trace,
    bind_control_socket,
    read_trace,
    unlink_control_socket,
)
from fasteval.runfolder.records import json_safe

log = logging.getLogger("fasteval")

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_credentials(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket, as the kernel says."""
    pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return pid, uid


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


MAX_CONNECTIONS = 16
"""Connections served at once. One more is refused as it is accepted (one line, then closed), so a
flood of idle connections costs the steering for a moment, never the sweep's file descriptors."""
READ_DEADLINE_S = 3.0
"""How long a connection may take to send its request line (``fasteval ctl`` sends it at once)."""
WRITE_DEADLINE_S = 5.0
"""How long a client may take to read its answer."""
_ACCEPT_BACKOFF_S = 0.1
_WARN_EVERY_S = 30.0


@contextlib.asynccontextmanager
async def control_channel(controller: Steering, run_dir: Path) -> AsyncIterator[None]:
    """Serve ``fasteval ctl`` on ``run_dir/control.sock`` for as long as the block runs.

    A filesystem that cannot hold a socket (some FUSE and network mounts) costs the steering, not
    the sweep: one warning, and the sweep runs as before. Another live sweep there is refused.
    """
    try:
        sock = await asyncio.to_thread(bind_control_socket, run_dir)
    except OSError as e:
        log.warning("no control channel for this sweep (fasteval ctl will not reach it): cannot create %s: %s",
                    run_dir / CONTROL_SOCKET, e.strerror or e)
        try:
            yield
        finally:
            await controller.close()
        return
    server = _Server(sock, _Handler(controller, run_dir))
    server.start()
    try:
        yield
    finally:
        await controller.close()
        await server.close()
        unlink_control_socket(run_dir, sock)


class _Server:
    """The accept loop: the peer's uid checked on accept, at most ``MAX_CONNECTIONS`` served at once.

    Our own loop rather than ``asyncio.start_unix_server``: that one accepts every connection
    waiting (a hundred per turn of the loop) and keeps each until its handler gives up, so 1,100
    idle connections held 1,000 descriptors and every job that opened a file failed.
    """

    def __init__(self, sock: socket.socket, handler: _Handler) -> None:
        self.sock = sock
        self.handler = handler
        self.active: set[asyncio.Task[None]] = set()
        self.refused = 0
        self._accepting: asyncio.Task[None] | None = None
        self._warned_at = -_WARN_EVERY_S

    def start(self) -> None:
        self._accepting = asyncio.create_task(self._accept_loop())

    async def close(self) -> None:
        """Accept nothing more; let the answers being written go out (a ``cancel`` that ended the
        sweep is still answered), within a second; then stop what is left."""
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        if self.active:
            await asyncio.wait(set(self.active), timeout=1.0)
        left = list(self.active)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self.sock)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors (the jobs will say so): the connection waits in the backlog
                    self._warn(f"cannot accept a connection ({e.strerror})")
                    await asyncio.sleep(_ACCEPT_BACKOFF_S)
                    continue
                if e.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EINTR, errno.EAGAIN):
                    continue  # that client left before we took it
                log.warning("control socket: no longer accepting connections (%s)", e.strerror or e)
                return
            conn.setblocking(False)
            try:
                pid, uid = peer_credentials(conn)
            except OSError:
                conn.close()
                continue
            if uid != os.getuid():
                log.warning("control socket: refused a connection from %s (pid %d)", _user(uid), pid)
                _refuse(conn, f"refused: this sweep belongs to {_user(os.getuid())}, you are {_user(uid)}")
                continue
            if len(self.active) >= MAX_CONNECTIONS:
                self.refused += 1
                self._warn(f"{MAX_CONNECTIONS} connections open")
                _refuse(conn, f"busy: {MAX_CONNECTIONS} control connections are open; try again in a moment")
                continue
            task = asyncio.create_task(self.handler.serve(conn, pid, uid))
            self.active.add(task)
            task.add_done_callback(self.active.discard)

    def _warn(self, why: str) -> None:
        """One warning per ``_WARN_EVERY_S`` in run.log, however long a flood lasts."""
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("control socket: %s; %d connection(s) refused so far", why, self.refused)


def _refuse(conn: socket.socket, error: str) -> None:
    """Answer one line without reading anything, and close: the client reads it before the close."""
    with contextlib.suppress(OSError):
        conn.send(encode_answer({"ok": False, "error": error}))
    conn.close()


def encode_answer(answer: dict[str, Any]) -> bytes:
    """One JSON line, whatever the answer holds (an int past 64 bits is written as its digits)."""
    try:
        return orjson.dumps(json_safe(answer), default=str) + b"\n"
    except (TypeError, ValueError) as e:
        return orjson.dumps({"ok": False, "error": f"the answer could not be encoded ({e})"}) + b"\n"


async def _read_line(conn: socket.socket) -> bytes:
    """The request line (at most MAX_MESSAGE bytes; what came before the end of the stream without one)."""
    loop = asyncio.get_running_loop()
    buf = bytearray()
    while b"\n" not in buf:
        if len(buf) > MAX_MESSAGE:
            raise ValueError(f"the request is longer than {MAX_MESSAGE} bytes")
        chunk = await loop.sock_recv(conn, 65536)
        if not chunk:
            break
        buf += chunk
    return bytes(buf.split(b"\n", 1)[0])


class _Handler:
    def __init__(self, controller: Steering, run_dir: Path) -> None:
        self.controller = controller
        self.run_dir = run_dir
        self._trace_lock = asyncio.Lock()  # trace lines in the order the changes were made

    async def serve(self, conn: socket.socket, pid: int, uid: int) -> None:
        """Read one request within the deadline and answer it with one line, whatever fails."""
        loop = asyncio.get_running_loop()
        try:
            try:
                async with asyncio.timeout(READ_DEADLINE_S):
                    line = await _read_line(conn)
            except TimeoutError:
                answer: dict[str, Any] = {"ok": False, "error": f"no request line within {READ_DEADLINE_S:g} s"}
            except ValueError as e:
                answer = {"ok": False, "error": str(e)}
            else:
                answer = await self._answer(line, pid, uid)
            async with asyncio.timeout(WRITE_DEADLINE_S):
                await loop.sock_sendall(conn, encode_answer(answer))
        except (OSError, TimeoutError):
            pass  # the client left, or does not read: nothing more to say to it
        finally:
            conn.close()

    async def _answer(self, line: bytes, pid: int, uid: int) -> dict[str, Any]:
        try:
            request = orjson.loads(line)
        except ValueError:
            return {"ok": False, "error": "the request is not one JSON line"}
        if not isinstance(request, dict):
            return {"ok": False, "error": "the request is not a JSON object"}
        try:
            answer = self._run(request)
        except ControlError as e:
            return {"ok": False, "error": str(e)}
        except Exception as e:  # a bug of ours: the client still hears one line; run.log has the traceback
            log.warning("control socket: %s failed", describe(request), exc_info=True)
            return {"ok": False, "error": f"the sweep failed to apply it ({type(e).__name__}: {e})"[:500]}
        changes = answer.get("changes")
        if changes:  # traced before the client hears it was done
            entry = {"who": f"{_user(uid)} (uid {uid}, pid {pid})", "command": describe(request), "changes": changes}
            try:
                async with self._trace_lock:
                    answer["trace"] = await asyncio.to_thread(append_trace, self.run_dir, entry)
            except OSError as e:
                log.warning("control socket: %s applied but not traced: %s", describe(request), e)
                answer["warning"] = f"applied, but not written to {CONTROL_TRACE} ({e.strerror or e})"
        return {"ok": True, **answer}

    def _run(self, request: dict[str, Any]) -> dict[str, Any]:
        c = self.controller
        command = request.get("command")
        scope, name = _scope(request)
        if command == "status":
            return {"status": c.state(), "pid": os.getpid(), "run_dir": str(self.run_dir),
                    "trace": read_trace(self.run_dir, last=20)}
        if command == "pause":
            return {"changes": c.pause(scope, name, bool(request.get("now")))}
        if command == "resume":
            return {"changes": c.resume(None if scope == "all" and not request.get("all") else scope, name)}
        if command == "set":
            values = request.get("values")
            if not isinstance(values, dict) or not values:
                raise ControlError("set needs KEY=VALUE pairs")
            target = "global" if request.get("global") else scope
            if target == "all":
                raise ControlError("set needs --model, --endpoint or --global")
            return {"changes": c.set_limits(target, name, values), "lasts": FOR_THIS_SWEEP}
        if command == "requeue":
            if not request.get("errors"):
                raise ControlError("requeue needs --errors (only jobs that ended in error are run again)")
            n, changes = c.requeue(_opt_str(request.get("kind")), _opt_str(request.get("model")))
            return {"requeued": n, "changes": changes}
        if command == "drain":
            return {"changes": c.drain(_opt_str(request.get("model")))}
        if command == "cancel":
            model = _opt_str(request.get("model"))
            if model is None:
                raise ControlError("cancel needs --model (drain ends everything)")
            n, changes = c.cancel(model)
            return {"cancelled": n, "changes": changes}
        raise ControlError(f"unknown command {command!r}")


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _scope(request: dict[str, Any]) -> tuple[str, str]:
    named = [s for s in SCOPES[1:] if request.get(s)]
    if len(named) > 1:
        raise ControlError(f"name one of --model, --suite, --endpoint, not {len(named)}")
    return (named[0], str(request[named[0]])) if named else ("all", "")


def describe(request: dict[str, Any]) -> str:
    """The command as a line for the trace: ``set --model m rpm=30``."""
    parts = [str(request.get("command"))]
    for key in ("model", "suite", "endpoint", "kind"):
        if request.get(key):
            parts.append(f"--{key} {request[key]}")
    for flag in ("global", "now", "errors", "all"):
        if request.get(flag):
            parts.append(f"--{flag}")
    values = request.get("values")
    if isinstance(values, dict):
        parts += [f"{k}={v}" for k, v in values.items()]
    return " ".join(parts)[:500]
