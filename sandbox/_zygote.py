"""The worker's serving loop: a fresh child for every call, forked from a warm, pre-imported template.

Why a fork per call: model code is hostile by assumption, and anything it can reach in a
long-lived interpreter (threads it starts, patched classes, the reply pipe found through
``sys._getframe``) would outlive the call and touch the next one. The worker is two processes
that never run model code: the *template* (``sandbox._forkserver``) holds the imports and only
forks; the *manager* (``Zygote.serve``, a child of the template) talks to the pool, keeps two
spare children forked ahead, and runs each call in one. A call child:

- is forked with numpy/PIL/cv2/matplotlib already imported (copy-on-write keeps that cheap) from
  a process that never saw a request, so it holds nothing of earlier calls,
- closes every descriptor but its own private reply pipe (the pool's pipes and other sessions'
  pipes are gone before model code runs), drops to the call's uid, runs, replies, and is killed;
  every process of that uid is killed with it, so its threads and forks die too.

Its reply is read with a deadline and with every length bounded (``_protocol.Bounds``), capped
again, and forwarded to the pool with the pool's per-call nonce.

Sessions: ``keep="state"`` keeps one long-lived *session process* per trajectory on its own uid
that keeps the interpreter between that trajectory's calls; ``keep="files"`` keeps only the
trajectory's working folder (a fresh call child per call, on the trajectory's uid). Either way the
folder is parked under ``<home>/sessions`` (root-only) between calls and renamed back to
``<home>/work`` for the next one, so file names shown to the model stay stable.
"""

from __future__ import annotations

import array
import fcntl
import os
import resource
import secrets
import select
import shutil
import signal
import socket
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

from sandbox import _jail
from sandbox._caps import cap_reply, clock_marks, exit_reason, reply_bounds
from sandbox._executor import CallRunner
from sandbox._forkserver import ForkClient, serve_forks
from sandbox._ledger import DiskLedger
from sandbox._protocol import UID_BLOCK, Bounds, FrameBuffer, FrameError, encode, read_frame, write_frame
from sandbox._quota import FolderQuota

STATELESS_UIDS = 32
"""uids per worker: the first STATELESS_UIDS for stateless calls (in turn), the rest for sessions.
A uid comes back 32 stateless calls later: by then its last call's processes, killed at low
priority, have died and its folder is emptied (``_make_clean`` waits for them otherwise)."""
SPARES = 3
"""Children forked ahead per worker: back to back, each has about two calls' time to warm up."""
DYING_NICE = 19
"""Priority of a finished call child's exit (the kernel frees its memory then), which no call waits
for: it yields the CPU to the calls in flight and to the pool's event loop. (A spare's warm-up is
not lowered: on a busy machine a niced spare was still warming up when its call arrived.)"""
_PAUSE_S = 0.002
"""How long the manager leaves the CPU to the pool after a reply before forking replacements."""
_REQUEST_BOUNDS = Bounds(header=64 << 20, blobs=4096, blob_bytes=1 << 31, total_bytes=1 << 34)

Outcome = tuple[dict[str, Any], list[bytes]]


@dataclass(slots=True)
class _Child:
    """A forked child and its private pipes; it serves one call (``mode="call"``) or a session."""

    pid: int
    req_w: int
    resp_r: int
    pidfd: int


@dataclass(slots=True)
class _Session:
    uid: int
    keep: Literal["state", "files"]
    child: _Child | None = None
    """The session process (``keep="state"``); None for a files-only session."""


class Zygote:
    """Serves frames from the pool on ``req_fd``/``resp_fd``; see the module docstring."""

    def __init__(self, req_fd: int, resp_fd: int, home: str, limits: dict[str, Any], jailed: bool, uid: int,
                 ledger: DiskLedger | None = None) -> None:
        self.req_fd, self.resp_fd = req_fd, resp_fd
        self.home = home
        self.work = Path(home) / "work"
        self.parked = Path(home) / "sessions"
        self.limits = limits
        self.jailed = jailed
        self.uid = uid
        self.free_uids = list(range(uid + UID_BLOCK - 1, uid + STATELESS_UIDS - 1, -1))
        self.turn = 0  # stateless calls take uids in turn: a dying call never shares one with the next
        self.sessions: dict[str, _Session] = {}
        self.current: str | None = None  # whose folder sits at ``work`` now (None: a stateless call's)
        self.bounds = reply_bounds(limits)
        self.forks: ForkClient | None = None  # the manager's line to the template
        self._after: list[tuple[int, _Child]] = []  # (uid, child) to kill once the reply is sent
        self._dirty: set[int] = set()  # uids whose processes must all be dead before the uid is used again
        self._trash = 0
        self._used: set[int] = set()  # stateless uids whose parked folder still holds their last call's files
        self._last_stateless = uid
        self._ready_at = 0.0  # when the tidying between calls ended (phase timestamps, on request)
        self._child_marks: dict[str, float] = {}
        self._chores: list[Callable[[], None]] = []  # tidying left over from the last call
        self.quota = FolderQuota(limits, mounts=jailed, ledger=ledger)  # each working folder its own sized tmpfs in the jail
        self.parked.mkdir(mode=0o700, exist_ok=True)

    def start(self) -> None:
        """Split: this process becomes the template (``sandbox._forkserver``), a child serves calls."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if os.fork() == 0:
            theirs.close()
            try:
                _jail.set_parent_death_signal()  # the template gone, the worker is gone
                self.forks = ForkClient(mine)
                self.serve()
            finally:
                os._exit(0)
        mine.close()
        os.close(self.req_fd)  # only the manager talks to the pool
        os.close(self.resp_fd)
        serve_forks(theirs, self._child_main)

    def serve(self) -> None:
        """Answer frames until the pool closes the pipe (the manager).

        Between calls, in order of need: the template forks replacements for the spares used.
        The chores (killing what is left of finished calls, collecting exited children, emptying
        the trash) give way to a request that is already waiting; what is left of them is done while the next call's child runs (``_await``), and
        a uid is swept before it is reused.
        """
        assert self.forks is not None
        while True:
            # Two spares are kept ready for calls back to back; the third is forked only once no
            # request came for a moment: the pool is reading the last reply, and a fork now would
            # compete with it for the CPU.
            ready = len(self.forks.spares) + self.forks.forking
            if ready < SPARES - 1 or (ready < SPARES and not _readable(self.req_fd, _PAUSE_S)):
                self.forks.top_up(SPARES)
            while self._chores and not _readable(self.req_fd):
                self._chores.pop(0)()
            self._await_parked()
            self._ready_at = time.monotonic()
            if not self._serve_one():
                return

    def _await_parked(self) -> None:
        """While no request comes: sweep again until the stateless folders parked after their
        calls can be emptied (their uids' processes were still dying at the first sweep), so an
        idle worker does not sit on what they hold."""
        wait_s = 0.002
        while self._used and not self._chores and not _readable(self.req_fd, wait_s):
            self._sweep()
            self._tidy_folders()
            wait_s = min(wait_s * 2, 1.0)

    def _serve_one(self) -> bool:
        """One request and its answer; False once the pool has gone.

        Its own frame, so that nothing of this request (code, images, reply) is still referenced
        from a stack frame when the next spare is forked and model code walks ``sys._getframe``.
        """
        try:
            req, blobs = read_frame(self.req_fd, _REQUEST_BOUNDS)
        except EOFError:
            return False
        read_at = time.monotonic()
        if req.get("op") == "run":
            reply, out = self.run(req, blobs)
        elif req.get("op") == "release":
            self.release(str(req["session"]))
            reply, out = {"status": "ok"}, []
        else:
            reply, out = {"status": "ok"}, []
        if req.get("phases"):  # timestamps for benchmarks/sandbox.py --phases
            marks = {"zygote_ready": self._ready_at, "zygote_read": read_at, "zygote_send": time.monotonic()}
            reply = {**reply, "phases": {**self._child_marks, **marks}}
        write_frame(self.resp_fd, {**reply, "nonce": req.get("nonce")}, out)
        for uid, child in self._after:  # the answered calls' children die now; their uids are swept later
            self._end(uid, child, wait=False)
        self._after.clear()
        if req.get("op") == "run":  # now, not as a chore: a chore left over runs during the next call
            self._retire_stateless()
        self._chores = [self._sweep, self._reap, self._tidy_folders]
        return True

    # --- calls ----------------------------------------------------------------------------
    def run(self, req: dict[str, Any], blobs: list[bytes]) -> Outcome:
        key: str | None = req.get("session")
        keep: Literal["state", "files"] = "files" if req.get("keep") == "files" else "state"
        deadline = time.monotonic() + float(req["timeout_s"])
        if key is None:
            self.turn = (self.turn + 1) % STATELESS_UIDS
            uid = self.uid + self.turn
            self._make_clean(uid)  # leftovers of its last call: usually swept long ago
            self._enter_folder(None, uid)
            self._last_stateless = uid
            self.quota.before_call(self.work, None, _held_as(uid))  # within what the pool's budget has left
            reply, out = self._one_call(uid, req, blobs, deadline)
            self._disk_note(reply, None, _held_as(uid))
        else:
            session = self.sessions.get(key)
            if session is not None and session.keep != keep:
                self._drop(key)
                session = None
            if session is None:
                if not self.free_uids:
                    msg = f"SandboxError: more than {UID_BLOCK - STATELESS_UIDS} open sessions on one worker"
                    return _failure("error", msg), []
                session = self.sessions[key] = _Session(self.free_uids.pop(), keep)
            self._enter_folder(key, session.uid)
            self.quota.before_call(self.work, key)
            if keep == "files":
                self._make_clean(session.uid)
                reply, out = self._one_call(session.uid, req, blobs, deadline)
            else:
                if session.child is None:
                    session.child = self._take_spare()
                    mode = "session"
                else:
                    mode = "next"
                reply, out = self._call_in(session.child, session.uid, mode, req, blobs, deadline)
                if reply["status"] in ("timeout", "crashed"):
                    self._drop(key)
                    reply["session_lost"] = True
                    reply["error"] += "; the session's variables and files were lost"
                    reply["stderr"] += "; the session's variables and files were lost"
            self._disk_note(reply, key)
        return cap_reply(reply, out, self.limits)

    def _disk_note(self, reply: dict[str, Any], key: str | None, held_as: str | None = None) -> None:
        """Say so when the call's folder hit its disk quota (the code saw ENOSPC or lost its files)."""
        if reply.get("status") not in ("ok", "error") or not self.quota.occupied(self.work):
            return
        note = self.quota.after_call(self.work, key, _remove, held_as)
        if note is None:
            return
        reply["stderr"] = f"{reply.get('stderr') or ''}\n{note}".lstrip("\n")
        reply["error"] = note if reply["status"] == "ok" or not reply.get("error") else f"{reply['error']}; {note}"
        reply["status"] = "error"

    def _one_call(self, uid: int, req: dict[str, Any], blobs: list[bytes], deadline: float) -> Outcome:
        """One call in a fresh child that is discarded afterwards, with every process of its uid."""
        child = self._take_spare()
        self._after.append((uid, child))
        return self._call_in(child, uid, "call", req, blobs, deadline)

    def _take_spare(self) -> _Child:
        """A spare child that is alive and whose pipes hold nothing (see ``_untouched``)."""
        assert self.forks is not None
        while True:
            child = _Child(*self.forks.take())
            if _untouched(child):
                return child
            self._discard(child)

    def _discard(self, spare: _Child) -> None:
        """Kill a spare that never ran a call (still root: no uid of its own to sweep)."""
        try:
            signal.pidfd_send_signal(spare.pidfd, signal.SIGKILL)
        except OSError:
            pass
        self._wait(spare.pid)
        assert self.forks is not None
        self.forks.keep.discard(spare.pid)
        for fd in (spare.req_w, spare.resp_r, spare.pidfd):
            os.close(fd)



    def _call_in(
        self, child: _Child, uid: int, mode: str, req: dict[str, Any], blobs: list[bytes], deadline: float
    ) -> Outcome:
        if _readable(child.resp_r):  # a session's threads wrote between calls: it is no longer trusted
            return _failure("crashed", "SandboxCrash: the session wrote to its reply pipe between calls"), []
        nonce = secrets.token_hex(8)
        frame = encode({**req, "nonce": nonce, "uid": uid, "mode": mode}, blobs)
        if not _write_until(child.req_w, frame, deadline):
            return _failure("timeout", _timeout_msg(req)), []
        written = time.monotonic()
        reply, out = self._await(child, deadline, nonce, _timeout_msg(req))
        if req.get("phases"):
            marks = clock_marks(reply.get("phases"), ("child_start", "child_done"))
            self._child_marks = {**marks, "zygote_write": written, "zygote_reply": time.monotonic()}
        return reply, out

    def _child_main(self, req_r: int, resp_w: int) -> NoReturn:
        """A forked child: waits (still privileged, running nothing) for its first call, then
        loses every other descriptor and its privileges before any model code runs."""
        try:
            lo, hi = sorted((req_r, resp_w))
            os.closerange(3, lo)
            os.closerange(lo + 1, hi)
            os.closerange(hi + 1, _max_fd())
            if not self.jailed:
                os.setpgid(0, 0)
                _jail.set_parent_death_signal()
            runner = CallRunner(self.home, self.limits, self.jailed)
            if not _readable(req_r):  # a call already waiting touches those pages itself, sooner
                runner.warm()
                encode({"warm": True}, [])
            req, blobs = read_frame(req_r, _REQUEST_BOUNDS)
            start = time.monotonic()
            mode = req["mode"]
            cpu = int(self.limits["cpu_s"])
            # A session's calls each get cpu_s (set per call); the hard cap bounds its whole life.
            used = resource.getrusage(resource.RUSAGE_SELF)  # the warm-up counts; the call must not pay it
            hard = int(used.ru_utime + used.ru_stime) + (cpu * 100 if mode == "session" else cpu + 2)
            resource.setrlimit(resource.RLIMIT_CPU, (hard - 1, hard))
            if self.jailed:
                _jail.drop_to(int(req["uid"]))
            else:
                _jail.install_process_guards()
            while True:
                reply, out = runner.run(req, blobs)
                if req.get("phases"):
                    reply["phases"] = {"child_start": start, "child_done": time.monotonic()}
                write_frame(resp_w, {**reply, "nonce": req["nonce"]}, out)
                if mode == "call":
                    # Its exit (~1.5 ms of the kernel freeing its memory) at low priority, from now:
                    # the manager it just woke often waited for it on the same core.
                    _renice(0, DYING_NICE)
                    break
                req, blobs = read_frame(req_r, _REQUEST_BOUNDS)
                start = time.monotonic()
        finally:
            os._exit(0)

    def _await(self, child: _Child, deadline: float, nonce: str, timeout_msg: str) -> Outcome:
        """The child's reply frame, or why there is none (timeout, exit, broken protocol)."""
        fd = child.resp_r
        buf = FrameBuffer(self.bounds)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(child.pidfd, select.POLLIN)
        poller.register(self.req_fd, 0)  # POLLHUP only: the pool went away
        os.set_blocking(fd, False)
        exited = False
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return _failure("timeout", timeout_msg), []
                events = poller.poll(0 if self._chores else left * 1000)
                if not events and self._chores:  # the child is working: our chores meanwhile
                    self._chores.pop(0)()
                    continue
                for efd, ev in events:
                    if efd == self.req_fd and ev & (select.POLLHUP | select.POLLERR):
                        os._exit(0)  # nobody will read the answer; the namespace dies with us
                    exited |= efd == child.pidfd
                if _drain(fd, buf):
                    header, blobs = buf.frame()
                    if header.get("nonce") != nonce:
                        return _failure("crashed", "SandboxCrash: a reply frame that is not this call's answer"), []
                    return header, blobs
                if exited:
                    reason = exit_reason(self._wait(child.pid))
                    return _failure("crashed", f"SandboxCrash: the Python process {reason}"), []
        except FrameError as exc:
            return _failure("crashed", f"SandboxCrash: the call broke the reply protocol: {exc}"), []
        finally:
            os.set_blocking(fd, True)

    # --- folders and processes ------------------------------------------------------------
    def _enter_folder(self, key: str | None, uid: int) -> None:
        """Put the call's folder at ``work`` with renames only; emptying, removal and creation
        happen between calls, as a rule.

        A stateless uid keeps one folder of its own, parked between its calls and emptied for
        the next one once every process of the uid is gone (``_recycle``), so a stateless call
        costs two moves of a mount and no mount or unmount; a folder that cannot be made as good
        as new goes to the trash and the call gets a fresh one.
        """
        here = self.quota.occupied(self.work)
        if key is not None and key == self.current and here:
            return
        if self.current is not None and here:
            self.quota.move(self.work, self.parked / self.current, keep_src=True)
        elif here:
            self._to_trash(self.work)
        if key is None:
            source = self._stateless(uid)
            if uid in self._used:
                self._recycle(uid)  # ``_make_clean`` has just swept the uid
        else:
            source = self.parked / key
        if self.quota.occupied(source):
            self.quota.move(source, self.work, keep_src=key is None)
        else:
            self._new_folder(self.work, uid)
        self.current = key

    def _stateless(self, uid: int) -> Path:
        return self.parked / f".stateless-{uid}"

    def _retire_stateless(self) -> None:
        """A stateless call's folder is nobody's once the call answered: parked now, to be
        emptied as soon as its uid has no process left (its tmpfs is memory), not when this
        worker's next call comes, which may be never."""
        if self.current is None and self.quota.occupied(self.work):
            self.quota.move(self.work, self._stateless(self._last_stateless), keep_src=True)
            self._used.add(self._last_stateless)

    def _recycle(self, uid: int) -> None:
        """Empty the parked folder of ``uid`` (no process of it is left) for its next call, or
        trash it when it cannot be made as good as new."""
        self._used.discard(uid)
        folder = self._stateless(uid)
        if self.quota.occupied(folder) and not self.quota.recycle(folder, uid):
            self._to_trash(folder)
        self.quota.forget(_held_as(uid))

    def _to_trash(self, path: Path) -> None:
        self._trash += 1
        self.quota.move(path, self.parked / f".trash-{self._trash}", keep_src=True)

    def _new_folder(self, path: Path, uid: int) -> None:
        self.quota.create(path, uid, chown=self.jailed)

    def _tidy_folders(self) -> None:
        """Between calls: empty the folders parked after stateless calls whose uid has no process
        left (a live one could race the deletion), empty the trash, and make the folder of the
        next stateless call ready."""
        for uid in sorted(self._used - self._dirty):
            self._recycle(uid)
        for entry in os.scandir(self.parked):
            if entry.name.startswith(".trash-"):
                self.quota.remove(Path(entry.path), _remove)
        nxt = self.uid + (self.turn + 1) % STATELESS_UIDS
        if not self.quota.occupied(self._stateless(nxt)):
            self._new_folder(self._stateless(nxt), nxt)

    def release(self, key: str) -> None:
        if key in self.sessions:
            self._drop(key)
        else:
            self._remove_folder(key)

    def _drop(self, key: str) -> None:
        """End a session: its processes, its pipes, its folder; its uid becomes reusable."""
        s = self.sessions.pop(key)
        if s.child is not None:
            self._end(s.uid, s.child)
        else:
            self._kill(s.uid, 0)
        self._remove_folder(key)
        self._reap()
        self.free_uids.append(s.uid)

    def _end(self, uid: int, child: _Child, wait: bool = True) -> None:
        """Kill a child and every process of its uid; close its pipes.

        ``wait=False`` (a call that has answered) kills only the child now: the rest of its uid
        dies in the next ``_sweep``, and ``_make_clean`` guarantees it before the uid is reused.
        """
        if not wait:  # nobody waits for its exit (not reaped yet, so the pid is still its own)
            _renice(child.pid, DYING_NICE)
        try:
            signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)  # by pidfd: never a recycled pid
        except OSError:
            pass
        if not self.jailed:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass
        elif wait:
            self._make_clean(uid, force=True)
        else:
            self._dirty.add(uid)
        if wait:
            self._wait(child.pid)
        assert self.forks is not None
        self.forks.keep.discard(child.pid)
        self.forks.codes.pop(child.pid, None)
        for fd in (child.req_w, child.resp_r, child.pidfd):
            os.close(fd)

    def _remove_folder(self, key: str) -> None:
        if self.current == key:
            self.quota.remove(self.work, _remove, key)
            self.current = None
        self.quota.remove(self.parked / key, _remove, key)

    def _kill(self, uid: int, pid: int) -> None:
        if self.jailed:
            self._make_clean(uid, force=True)
        elif pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass

    def _make_clean(self, uid: int, force: bool = False) -> None:
        """Before ``uid`` runs a call: no process of its earlier calls is left (jail only)."""
        if self.jailed and (force or uid in self._dirty):
            _jail.kill_uids({uid}, skip=self._ours())
            self._dirty.discard(uid)

    def _sweep(self) -> None:
        """One scan of our /proc kills what is left of every finished call; uids found empty are clean."""
        if self._dirty:
            self._dirty &= _jail.kill_uids(frozenset(self._dirty), wait=False, skip=self._ours())

    def _ours(self) -> frozenset[int]:
        """Processes of the namespace that run as root and no model code: the template (PID 1),
        this manager and the spares no call has taken yet; a sweep need not read their status."""
        assert self.forks is not None
        return frozenset((1, os.getpid(), *(spare[0] for spare in self.forks.spares)))

    def _reap(self) -> None:
        """Have exited children and orphans collected (by the template, their parent or reaper)."""
        assert self.forks is not None
        self.forks.reap()

    def _wait(self, pid: int) -> int | None:
        """The exit code (negative: signal) of call child ``pid``; None if it was not ours to collect."""
        assert self.forks is not None
        return self.forks.wait(pid)


def _held_as(uid: int) -> str:
    """The name a stateless uid's folder goes by in the disk ledger's tally (session keys are hex)."""
    return f".stateless-{uid}"


def _failure(status: str, message: str) -> dict[str, Any]:
    return {"status": status, "error": message, "stdout": "", "stderr": message, "stdout_chars": 0, "outputs": []}


def _timeout_msg(req: dict[str, Any]) -> str:
    return f"TimeoutError: execution exceeded {float(req['timeout_s']):g} s; the call was killed"


def _drain(fd: int, buf: FrameBuffer) -> bool:
    """Read what is there without blocking; True once the frame is complete."""
    while True:
        try:
            data = os.read(fd, 1 << 20)
        except BlockingIOError:
            return False
        if not data:
            return False
        if buf.feed(data):
            return True


def _untouched(child: _Child) -> bool:
    """A spare is alive and nobody wrote into its pipes.

    Only the fallback ``process`` isolation lets a call (running as root) reach another process's
    pipes, through ``/proc/<pid>/fd`` of the template while it forks: such a spare is discarded
    instead of failing the innocent call that would have used it.
    """
    if _readable(child.resp_r) or _readable(child.pidfd):
        return False
    waiting = array.array("i", [0])
    fcntl.ioctl(child.req_w, termios.FIONREAD, waiting)  # bytes in the request pipe, read by nobody yet
    return waiting[0] == 0


def _renice(pid: int, nice: int) -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError:
        pass


def _readable(fd: int, timeout_s: float = 0.0) -> bool:
    return bool(select.select([fd], [], [], timeout_s)[0])


def _max_fd() -> int:
    return max(256, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _write_until(fd: int, data: bytes, deadline: float) -> bool:
    """Write all of ``data`` unless the deadline passes or the reader dies; a hostile session may stop reading."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _, w, _ = select.select([], [fd], [], left)
            if w:
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    return True  # it died; the reply wait reports how
        return True
    finally:
        os.set_blocking(fd, True)


def _remove(path: Path) -> None:
    """Remove a folder that model code owned, even if it made parts unreadable to its owner."""

    def fix(func: Any, p: str, exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    if path.is_dir() and not path.is_symlink():
        try:  # the folder of a call that saved nothing: two rmdirs instead of a tree walk
            for empty in (path / "out", path):
                os.rmdir(empty)
            return
        except OSError:
            pass
        shutil.rmtree(path, onerror=fix)
    elif path.exists() or path.is_symlink():
        path.unlink()

