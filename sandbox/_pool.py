"""A pool of warm, confined Python workers that the event loop drives without blocking.

Each worker is a long-lived zygote with numpy/PIL/cv2/matplotlib already imported that runs each
call in a fresh forked child (``sandbox._zygote``, ``sandbox._forkserver``); a call is one frame down its stdin and one frame back
on its stdout, so a trivial call costs a pipe round trip and a fork instead of an interpreter
start. Every reply must echo the call's nonce and fit ``reply_bounds``; one that does not, a
worker that stops answering, or a cancelled call gets the worker killed (its PID namespace with
it) and replaced in the background. Calls that time out or crash only lose their own child.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from sandbox._caps import cap_reply, clock_marks, exit_reason, image_pixels, reply_bounds
from sandbox._ledger import SLOTS, clear_slot, create_ledger
from sandbox._protocol import UID_BLOCK, FrameError, blob_sizes, decode_header, encode, header_size
from sandbox._stale import clean_stale_roots, root_prefix

Isolation = Literal["auto", "jail", "process"]
RunStatus = Literal["ok", "error", "timeout", "crashed"]
Keep = Literal["state", "files"]

_STARTUP_TIMEOUT_S = 120.0
_MARKS = ("zygote_ready", "zygote_read", "zygote_write", "child_start", "child_done", "zygote_reply", "zygote_send")
_GRACE_S = 10.0
"""How long past a call's own timeout the pool waits before it kills the whole worker."""
# A block of UID_BLOCK uids per worker (calls and sessions), not reused for 1000 workers in this
# process, so a killed worker's leftovers never share a uid with its replacement.
_UID_BASE = 200_000 + (os.getpid() % 1000) * 1000 * UID_BLOCK
_uid_counter = itertools.count()


LEDGER_NAME = "disk-ledger"


def _ledger_slot(uid: int) -> int:
    return (uid - _UID_BASE) // UID_BLOCK % SLOTS


class SandboxStartError(RuntimeError):
    """A worker could not start (bad interpreter, refused namespaces...)."""


@dataclass(slots=True, frozen=True)
class SandboxLimits:
    """Per-call and per-worker limits; every one is enforced by the kernel, not by trust."""

    timeout_s: float = 30.0
    memory_bytes: int = 4 << 30
    cpu_s: int = 60
    max_procs: int = 32
    file_bytes: int = 256 << 20
    open_files: int = 256
    output_chars: int = 20_000
    """stdout and stderr (tracebacks included), each."""
    max_output_images: int = 16
    max_output_bytes: int = 64 << 20
    """All output images of one call together."""
    max_image_pixels: int = 50_000_000
    """Width x height of one output image (read from its header, never decoded to check)."""
    call_disk_bytes: int = 512 << 20
    """What one call may add to its working folder (input images included); sandbox/_quota.py."""
    call_disk_inodes: int = 10_000
    trajectory_disk_bytes: int = 1 << 30
    """What a session's or kept work folder's files may hold in all, over the trajectory's calls."""
    trajectory_disk_inodes: int = 20_000
    pool_disk_bytes: int = 4 << 30
    """What all working folders of the pool may hold together: in the jail they are tmpfs, so
    this is memory; each call's allowance is capped by what is left (sandbox/_ledger.py)."""

    def __post_init__(self) -> None:
        """A zero or negative limit would forbid every call (or, for some, mean "none"): refused here."""
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"sandbox limit {name} must be a positive number, got {value!r}")


@dataclass(slots=True)
class OutputImage:
    name: str
    path: str
    """Where the code saved it, as the code sees the file system."""
    data: bytes


@dataclass(slots=True)
class RunResult:
    status: RunStatus
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    """One line: the exception, or why the worker was killed."""
    images: list[OutputImage] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    stdout_chars: int = 0
    duration_s: float = 0.0
    session_lost: bool = False
    """The session's state was lost with this call (it crashed or timed out)."""
    phases: dict[str, float] = field(default_factory=dict)
    """With ``SandboxPool(phase_times=True)``: when each hop happened (``time.monotonic()``, one
    clock for all processes): pool_send, zygote_ready, zygote_read, zygote_write, child_start, child_done,
    zygote_reply, zygote_send, pool_recv. Diagnostics only (benchmarks/sandbox.py --phases)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


_MAGIC = (
    (b"\x89PNG", ".png"), (b"\xff\xd8\xff", ".jpg"), (b"GIF8", ".gif"), (b"BM", ".bmp"),
    (b"II*\x00", ".tif"), (b"MM\x00*", ".tif"),
)  # fmt: skip


def input_name(index: int, data: bytes) -> str:
    """Stable, machine-independent file name of the index-th input, extension from its format."""
    ext = ".png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        ext = ".webp"
    for magic, suffix in _MAGIC:
        if data.startswith(magic):
            ext = suffix
    return f"input_{index}{ext}"


@dataclass(slots=True, eq=False)
class _Worker:
    proc: asyncio.subprocess.Process
    uid: int
    host_dir: Path
    home: str
    busy: bool = False
    calls: int = 0
    last_used: float = 0.0
    sessions: set[str] = field(default_factory=set)


class SandboxPool:
    """Warm workers that run model-written Python under limits; see docs/sandbox.md."""

    def __init__(
        self,
        size: int | None = None,
        *,
        limits: SandboxLimits | None = None,
        isolation: Isolation = "auto",
        root: str | os.PathLike[str] | None = None,
        max_calls_per_worker: int = 1000,
        phase_times: bool = False,
    ) -> None:
        self.size = size or os.cpu_count() or 1
        self.limits = limits or SandboxLimits()
        self.isolation: Isolation = isolation
        self._root_arg = root
        self.root = Path()
        self.max_calls_per_worker = max_calls_per_worker
        self.phase_times = phase_times
        self._slots: list[_Worker | None] = []
        self._cond = asyncio.Condition()
        self._session_slot: dict[str, int] = {}
        self._waiting = 0
        self._counts = {"calls": 0, "timeouts": 0, "crashes": 0, "restarts": 0}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._starting: asyncio.Task[None] | None = None
        self._limits_dict = asdict(self.limits)
        self._bounds = reply_bounds(self._limits_dict)

    # --- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Start all workers now; ``auto`` isolation falls back to ``process`` where namespaces are
        refused. Optional: the first ``run`` starts a pool that was not started (``start_soon``)."""
        self.start_soon()
        assert self._starting is not None
        await asyncio.shield(self._starting)

    def start_soon(self) -> None:
        """Begin starting the workers in the background, once (the import of numpy, PIL, OpenCV and
        matplotlib takes seconds per worker): a sweep does it when its first job that offers a
        Python tool opens, beside that job's first model request, and never when no such job is
        left to run. Calls wait for it; a start that failed fails every call with its reason."""
        if self._starting is None and not self._closed:
            self._starting = asyncio.ensure_future(self._start())
            self._starting.add_done_callback(lambda t: t.cancelled() or t.exception())  # read: no warning

    async def _started(self) -> None:
        """Wait for the start (begin it if nobody did); its failure, as a SandboxStartError."""
        self.start_soon()
        if self._closed or self._starting is None:
            raise RuntimeError("SandboxPool is closed")
        if not self._starting.done():
            await asyncio.wait([self._starting])  # a cancelled caller leaves the start running
        if self._starting.cancelled():
            raise RuntimeError("SandboxPool is closed")
        if (exc := self._starting.exception()) is not None:
            reason = str(exc) if isinstance(exc, SandboxStartError) else f"{type(exc).__name__}: {exc}"
            raise SandboxStartError(reason) from exc

    async def _start(self) -> None:
        if self._root_arg is None:
            # A sweep killed with -9 leaves its folder behind; remove those whose owner is dead.
            await asyncio.to_thread(clean_stale_roots, Path(tempfile.gettempdir()))
        self.root = Path(self._root_arg or tempfile.mkdtemp(prefix=root_prefix()))
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "jail").mkdir(exist_ok=True)
        create_ledger(self.root / LEDGER_NAME)
        self._slots = [None] * self.size
        if self.isolation == "auto":
            self.isolation = "jail" if os.geteuid() == 0 else "process"
            try:
                self._slots[0] = await self._spawn()
            except SandboxStartError:
                self.isolation = "process"
        free = [i for i, s in enumerate(self._slots) if s is None]
        results = await asyncio.gather(*(self._spawn() for _ in free), return_exceptions=True)
        for i, w in zip(free, results, strict=True):
            if isinstance(w, _Worker):
                self._slots[i] = w  # stopped by close() even when a sibling failed
        for w in results:
            if isinstance(w, BaseException):
                raise w

    async def close(self) -> None:
        self._closed = True
        if self._starting is None:  # never started: no worker, no folder
            return
        if not self._starting.done():
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(self._stop(w) for w in self._slots if w is not None))
        self._slots = []
        if self._root_arg is None and self.root != Path():
            await asyncio.to_thread(shutil.rmtree, self.root, True)

    async def __aenter__(self) -> SandboxPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def save_dir(self) -> str:
        """The output folder as model code sees it (stable across workers in jail mode)."""
        return "/sandbox/work/out" if self.isolation == "jail" else "out"

    def stats(self) -> dict[str, int]:
        """Counts for a progress display."""
        live = [w for w in self._slots if w is not None]
        return {
            "size": self.size,
            "ready": sum(not w.busy for w in live),
            "in_flight": sum(w.busy for w in live),
            "waiting": self._waiting,
            "starting": self.size - len(live),
            "sessions": len(self._session_slot),
            **self._counts,
        }

    # --- calls ----------------------------------------------------------------------------
    async def run(
        self,
        code: str,
        *,
        images: list[bytes] | None = None,
        session_id: str | None = None,
        keep: Keep = "state",
        fidelity: Literal["reference", "fixed"] = "fixed",
        tool: Literal["image", "interpreter"] = "image",
        timeout_s: float | None = None,
    ) -> RunResult:
        """Run ``code`` in a fresh child of a worker; waits for a free worker. Never raises for what the code does.

        Without ``session_id`` the call is stateless: nothing it does (files, threads, processes,
        patched modules) reaches any later call. With ``session_id`` (one per trajectory; end it
        with ``release``) later calls with the same id see what this one left, and no other id does:

        - ``keep="state"``: the interpreter (variables, imports) *and* the working folder persist;
        - ``keep="files"``: only the working folder persists (files written by one call are there
          for the next, under the same paths); every call starts a fresh interpreter.

        One id is one kind: a call with the other ``keep`` for a live id starts it afresh.
        """
        images = images or []
        names = [input_name(i, data) for i, data in enumerate(images)]
        key = _session_key(session_id) if session_id else None
        timeout = timeout_s or self.limits.timeout_s
        header = {
            "op": "run", "code": code, "fidelity": fidelity, "tool": tool, "session": key, "keep": keep,
            "inputs": names, "timeout_s": timeout,
        }  # fmt: skip
        t0 = time.perf_counter()
        slot, worker = await self._acquire(session_id)
        self._counts["calls"] += 1
        try:
            result = await self._call(slot, worker, header, images, timeout + _GRACE_S)
            if result.session_lost and session_id is not None:
                self._session_slot.pop(session_id, None)
                worker.sessions.discard(session_id)
        finally:
            await self._release_slot(worker)
        result.input_names = names
        result.duration_s = time.perf_counter() - t0
        return result

    async def release(self, session_id: str) -> None:
        """End a trajectory's session: forget its variables and delete its folder."""
        if session_id not in self._session_slot:
            return
        slot, worker = await self._acquire(session_id)
        try:
            self._session_slot.pop(session_id, None)
            worker.sessions.discard(session_id)
            await self._call(slot, worker, {"op": "release", "session": _session_key(session_id)}, [], _GRACE_S * 3)
        finally:
            await self._release_slot(worker)

    async def _acquire(self, session_id: str | None) -> tuple[int, _Worker]:
        await self._started()
        async with self._cond:
            self._waiting += 1
            try:
                await self._cond.wait_for(lambda: self._pick(session_id) is not None)
            finally:
                self._waiting -= 1
            slot = self._pick(session_id)
            assert slot is not None
            worker = self._slots[slot]
            assert worker is not None
            worker.busy = True
            worker.last_used = time.monotonic()
            if session_id is not None:
                self._session_slot[session_id] = slot
                worker.sessions.add(session_id)
            return slot, worker

    def _pick(self, session_id: str | None) -> int | None:
        if session_id is not None and session_id in self._session_slot:
            slot = self._session_slot[session_id]
            w = self._slots[slot]
            return slot if w is not None and not w.busy else None
        # Least recently used first: a worker that just answered is forking its next child.
        idle = [(len(w.sessions), w.last_used, i) for i, w in enumerate(self._slots) if w is not None and not w.busy]
        return min(idle)[2] if idle else None

    async def _release_slot(self, worker: _Worker) -> None:
        async with self._cond:
            worker.busy = False
            self._cond.notify_all()

    async def _call(
        self, slot: int, worker: _Worker, header: dict[str, Any], blobs: list[bytes], timeout_s: float
    ) -> RunResult:
        nonce = secrets.token_hex(16)
        frame = encode({**header, "nonce": nonce, "phases": self.phase_times}, blobs)
        sent = time.monotonic()
        try:
            reply, out = await asyncio.wait_for(self._roundtrip(worker, frame), timeout_s)
            if reply.get("nonce") != nonce:
                raise FrameError("a reply frame that does not answer this call (stray or forged)")
        except asyncio.CancelledError:
            self._retire(slot, worker)
            raise
        except TimeoutError:
            self._counts["timeouts"] += 1
            lost = self._retire(slot, worker)
            msg = f"TimeoutError: the worker did not answer within {timeout_s:g} s; it was killed{lost}"
            return RunResult(status="timeout", stderr=msg, error=msg)
        except FrameError as exc:
            self._counts["crashes"] += 1
            lost = self._retire(slot, worker)
            msg = f"SandboxCrash: the worker broke the reply protocol ({exc}); it was replaced{lost}"
            return RunResult(status="crashed", stderr=msg, error=msg[:2000])
        except (OSError, EOFError, asyncio.IncompleteReadError, ValueError):
            self._counts["crashes"] += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(worker.proc.wait(), 5)
            reason = exit_reason(worker.proc.returncode)
            lost = self._retire(slot, worker)
            msg = f"SandboxCrash: the worker process {reason}{lost}"
            return RunResult(status="crashed", stderr=msg, error=msg)
        worker.calls += 1
        if worker.calls >= self.max_calls_per_worker and not worker.sessions:
            self._retire(slot, worker)  # bound slow leaks of the long-lived zygote
        # The worker capped this already; capped again here because it is not trusted either.
        clean, images = cap_reply(reply, out, self._limits_dict, image_pixels)
        if clean["status"] == "timeout":
            self._counts["timeouts"] += 1
        elif clean["status"] == "crashed":
            self._counts["crashes"] += 1
        return RunResult(
            status=clean["status"],
            stdout=clean["stdout"],
            stderr=clean["stderr"],
            error=clean["error"],
            images=[OutputImage(name=o["name"], path=o["path"], data=d) for o, d in zip(clean["outputs"], images, strict=True)],
            stdout_chars=clean["stdout_chars"],
            session_lost=bool(clean.get("session_lost")),
            phases={"pool_send": sent, **clock_marks(reply.get("phases"), _MARKS), "pool_recv": time.monotonic()}
            if self.phase_times
            else {},
        )

    async def _roundtrip(self, worker: _Worker, frame: bytes) -> tuple[dict[str, Any], list[bytes]]:
        """Send a frame, read the reply; every length is checked before anything is allocated."""
        stdin, stdout = worker.proc.stdin, worker.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(frame)
        await stdin.drain()
        bounds = self._bounds
        reply, sizes = decode_header(await stdout.readexactly(header_size(await stdout.readexactly(4), bounds)), bounds)
        return reply, [await stdout.readexactly(n) for n in blob_sizes(sizes, bounds)]

    # --- workers --------------------------------------------------------------------------
    def _retire(self, slot: int, worker: _Worker) -> str:
        """Take the worker out now; stop it and start its successor in the background.

        Synchronous on purpose: it also runs when the caller is cancelled mid-call, where the
        worker's late reply would otherwise be read as the answer to the next request.
        """
        lost = sorted(worker.sessions)
        for s in lost:
            self._session_slot.pop(s, None)
        worker.sessions.clear()
        self._slots[slot] = None
        self._counts["restarts"] += 1
        with contextlib.suppress(ProcessLookupError):
            worker.proc.kill()
        task = asyncio.create_task(self._stop_and_respawn(slot, worker))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return "; the session's variables and files were lost" if lost else ""

    async def _stop_and_respawn(self, slot: int, worker: _Worker) -> None:
        await self._stop(worker, graceful=False)
        await self._respawn(slot)

    async def _respawn(self, slot: int) -> None:
        delay = 0.1
        while not self._closed:
            try:
                worker = await self._spawn()
            except SandboxStartError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            async with self._cond:
                self._slots[slot] = worker
                self._cond.notify_all()
            return

    async def _spawn(self) -> _Worker:
        uid = _UID_BASE + (next(_uid_counter) % 1000) * UID_BLOCK
        host_dir = self.root / f"w{uid}"
        host_dir.mkdir(mode=0o711)
        config = {
            "isolation": self.isolation,
            "host_dir": str(host_dir),
            "mount_point": str(self.root / "jail"),
            "uid": uid,
            "limits": asdict(self.limits),
            "ledger": str(self.root / LEDGER_NAME),
            "ledger_slot": _ledger_slot(uid),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-s", "-m", "sandbox._worker", json.dumps(config),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=self._worker_env(host_dir), cwd=str(host_dir),
        )  # fmt: skip
        worker = _Worker(proc=proc, uid=uid, host_dir=host_dir, home="")
        try:
            assert proc.stdout is not None
            prefix = await asyncio.wait_for(proc.stdout.readexactly(4), _STARTUP_TIMEOUT_S)
            hello, _ = decode_header(await proc.stdout.readexactly(header_size(prefix, self._bounds)), self._bounds)
        except (TimeoutError, asyncio.IncompleteReadError, FrameError) as exc:
            await self._stop(worker, graceful=False)
            raise SandboxStartError(f"worker did not start: it {exit_reason(proc.returncode)}") from exc
        except asyncio.CancelledError:  # the pool closed while this worker started
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            raise
        if hello.get("op") != "ready":
            await self._stop(worker, graceful=False)
            raise SandboxStartError(f"worker failed to start: {hello.get('error')}")
        worker.home = str(hello["home"])
        return worker

    def _worker_env(self, host_dir: Path) -> dict[str, str]:
        """Built from nothing: no API key of the parent can leak into model code."""
        home = "/sandbox/work" if self.isolation == "jail" else str(host_dir / "work")
        mpl = os.environ.get("MPLCONFIGDIR") or str(Path.home() / ".cache" / "matplotlib")
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "MPLBACKEND": "Agg",
            "MPLCONFIGDIR": mpl,
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            # Python objects in glibc's heap, which glibc asks to back with 2 MiB pages: a fork
            # then copies a few dozen page-table entries instead of ~14,000 and a call child's
            # exit frees as few (fork + exit: ~10 ms of CPU -> ~4 ms on the development VM).
            "PYTHONMALLOC": "malloc",
            "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
        }

    async def _stop(self, worker: _Worker, graceful: bool = True) -> None:
        proc = worker.proc
        if graceful and proc.returncode is None and proc.stdin is not None:
            proc.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 2.0)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()  # in jail mode the worker's PID namespace, and every call in it, died with it
        clear_slot(self.root / LEDGER_NAME, _ledger_slot(worker.uid))  # its tmpfs mounts died with it
        await asyncio.to_thread(shutil.rmtree, worker.host_dir, True)


def _session_key(session_id: str) -> str:
    """A file-name-safe key for the session's parked folder."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:24]
