"""The template: the worker's process that only forks call children, apart from the one that serves calls.

Why apart: a forked child shares its parent's memory copy-on-write, so every page the parent
writes after a fork is copied. A zygote that also served calls (frames, folders, /proc scans)
wrote ~430 such pages per call, ~1.3 ms of CPU on the development VM, and its children could
find remnants of earlier requests in its heap. The template, with numpy/PIL/cv2/matplotlib
imported, only waits for a command and forks: a few pages per fork, and it never sees a request.
The *manager* (``sandbox._zygote``, a child of the template) serves the pool and asks for forks.

Commands from the manager, one SOCK_SEQPACKET message each, answered in order:

- ``F``: fork a spare child; answer ``S <pid>`` with three descriptors attached (SCM_RIGHTS):
  the write end of its request pipe, the read end of its reply pipe, a pidfd.
- ``W <pid>``: wait for child ``pid`` (the manager saw it exit, or killed it); answer
  ``X <pid> <exit code>``, or ``X`` if it was already collected.
- ``R``: collect every exited child and orphan (the template is PID 1 of the worker's PID
  namespace, or its subreaper); answer ``X`` and ``<pid> <exit code>`` pairs.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import NoReturn

_MAX_PAIRS = 2000  # exit codes per ``R`` answer; the rest wait for the next one


def serve_forks(sock: socket.socket, start_child: Callable[[int, int], NoReturn]) -> NoReturn:
    """The template's loop; ``start_child(req_r, resp_w)`` runs in each forked child and never returns."""
    while True:
        try:
            msg = sock.recv(64)
        except OSError:
            msg = b""
        if not msg:
            os._exit(0)  # the manager is gone, so is the worker (and its PID namespace with us)
        if msg == b"F":
            _fork(sock, start_child)
        elif msg.startswith(b"W "):
            try:
                _, status = os.waitpid(int(msg[2:]), 0)
                sock.send(b"X %d %d" % (int(msg[2:]), os.waitstatus_to_exitcode(status)))
            except ChildProcessError:
                sock.send(b"X")
        elif msg == b"R":
            pairs = [b"X"]
            while len(pairs) <= _MAX_PAIRS:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                pairs.append(b"%d %d" % (pid, os.waitstatus_to_exitcode(status)))
            sock.send(b" ".join(pairs))


def _fork(sock: socket.socket, start_child: Callable[[int, int], NoReturn]) -> None:
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        sock.close()
        start_child(req_r, resp_w)
    os.close(req_r)
    os.close(resp_w)
    pidfd = os.pidfd_open(pid)  # opened before anyone can collect it: never a recycled pid
    socket.send_fds(sock, [b"S %d" % pid], [req_w, resp_r, pidfd])
    for fd in (req_w, resp_r, pidfd):
        os.close(fd)


class ForkClient:
    """The manager's side: asks for spares and exit codes; answers arrive in the order asked."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.spares: list[tuple[int, int, int, int]] = []  # (pid, req_w, resp_r, pidfd) not yet taken
        self.forking = 0  # ``F`` asked, ``S`` not yet read
        self.codes: dict[int, int] = {}  # exit codes read so far, for the pids in ``keep``
        self.keep: set[int] = set()
        self._asked = 0  # ``W`` and ``R`` sent so far
        self._answers = 0  # ``X`` answers read so far

    def ask_fork(self) -> None:
        self.sock.send(b"F")
        self.forking += 1

    def top_up(self, n: int) -> None:
        """Ask for forks until ``n`` spares are forked or being forked."""
        while len(self.spares) + self.forking < n:
            self.ask_fork()

    def take(self) -> tuple[int, int, int, int]:
        """A forked spare: (pid, request pipe write end, reply pipe read end, pidfd)."""
        if not self.spares and not self.forking:
            self.ask_fork()
        while not self.spares:
            self._read()
        return self.spares.pop(0)

    def wait(self, pid: int) -> int | None:
        """The exit code of our child ``pid`` (it has exited or was killed); None if not known."""
        if pid not in self.codes:
            self.sock.send(b"W %d" % pid)
            self._asked += 1
            while self._answers < self._asked:
                self._read()
        return self.codes.pop(pid, None)

    def reap(self) -> None:
        """Have every exited child and orphan collected, without waiting for the answer (the
        template may be busy forking); the codes of the pids in ``keep`` are read with later answers."""
        if self._answers == self._asked:  # one at a time
            self.sock.send(b"R")
            self._asked += 1

    def _read(self) -> None:
        msg, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 3)
        if not msg:
            raise EOFError("the template process is gone")
        if msg.startswith(b"S "):
            self.forking -= 1
            self.spares.append((int(msg[2:]), fds[0], fds[1], fds[2]))
            self.keep.add(int(msg[2:]))
            return
        for fd in fds:  # none expected; never leak one
            os.close(fd)
        numbers = [int(x) for x in msg[1:].split()]
        for pid, code in zip(numbers[::2], numbers[1::2], strict=True):
            if pid in self.keep:
                self.codes[pid] = code
        self._answers += 1
