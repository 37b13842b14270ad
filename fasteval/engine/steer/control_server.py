"""The control socket of a running sweep: one JSON request line in, one JSON answer line out.

The socket lives in the run folder (fasteval.runfolder.control binds it 0600 and replaces a stale
one); every connection's peer is checked with SO_PEERCRED and anyone but the sweep's own user is
refused, so a shared run folder on a cluster filesystem never lets another account steer the run.
Each change is appended to the trace with who (user, uid, pid of the client), when, the command,
and old -> new.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pwd
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from fasteval.engine.steer.control import FOR_THIS_SWEEP
from fasteval.engine.steer.steering import SCOPES, ControlError, Steering
from fasteval.runfolder.control import (
    CONTROL_SOCKET,
    MAX_MESSAGE,
    append_trace,
    bind_control_socket,
    read_trace,
    unlink_control_socket,
)

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
    handler = _Handler(controller, run_dir)
    server = await asyncio.start_unix_server(handler.serve, sock=sock, limit=MAX_MESSAGE)
    try:
        yield
    finally:
        await controller.close()
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1.0)
        unlink_control_socket(run_dir, sock)


class _Handler:
    def __init__(self, controller: Steering, run_dir: Path) -> None:
        self.controller = controller
        self.run_dir = run_dir
        self._trace_lock = asyncio.Lock()  # trace lines in the order the changes were made

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            answer = await self._answer(reader, writer)
            writer.write(orjson.dumps(answer, default=str) + b"\n")
            await asyncio.wait_for(writer.drain(), 10.0)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict[str, Any]:
        pid, uid = peer_credentials(writer.get_extra_info("socket"))
        try:  # read before answering, even a refusal: the client then reads it rather than a reset
            line = await asyncio.wait_for(reader.readline(), 10.0)
        except (ValueError, asyncio.LimitOverrunError, asyncio.IncompleteReadError):
            line = b""
        if uid != os.getuid():
            log.warning("control socket: refused a connection from %s (pid %d)", _user(uid), pid)
            return {"ok": False, "error": f"refused: this sweep belongs to {_user(os.getuid())}, "
                                          f"you are {_user(uid)}"}
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
        changes = answer.get("changes")
        if changes:
            entry = {"who": f"{_user(uid)} (uid {uid}, pid {pid})", "command": describe(request), "changes": changes}
            async with self._trace_lock:
                answer["trace"] = await asyncio.to_thread(append_trace, self.run_dir, entry)
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
