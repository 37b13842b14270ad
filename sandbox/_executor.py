"""What a worker does per call: prepare the working folder, run the code, collect outputs.

Runs inside the (jailed) worker process. Stateless calls get a fresh ``work`` folder and a fresh
namespace; a session keeps both between calls. The working folder always sits at the same path
(``<home>/work``) so file names shown to the model stay stable: a session's folder is parked in
``<home>/sessions/<key>`` while another call uses the worker and renamed back when it returns.
"""

from __future__ import annotations

import io
import os
import re
import resource
import shutil
import signal
import stat
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from sandbox._namespaces import fixed_namespace, reference_namespace

CODE_FILENAME = "<llm_code>"
TRANSFORMED_RE = re.compile(r"^transformed_image_(\d+)\.png$", re.IGNORECASE)
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff"})


class CappedText(io.TextIOBase):
    """A text sink that keeps the first ``limit`` characters and only counts the rest.

    Capping while writing is what keeps a model that prints 1 GB from costing 1 GB here.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._kept = 0
        self._parts: list[str] = []

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.total += len(s)
        room = self.limit - self._kept
        if room > 0:
            part = s[:room]
            self._parts.append(part)
            self._kept += len(part)
        return len(s)

    def getvalue(self) -> str:
        text = "".join(self._parts)
        if self.total > self._kept:
            text += f"\n[... truncated: {self.total - self._kept} more characters not shown]"
        return text


@dataclass(slots=True)
class _Session:
    globals_: dict[str, Any]
    locals_: dict[str, Any] | None
    fidelity: str
    tool: str
    inputs: list[str] = field(default_factory=list)


def user_traceback(exc: BaseException) -> str:
    """The traceback from the model's code down, without the worker's own frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != CODE_FILENAME:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _snapshot(paths: list[Path]) -> dict[str, tuple[int, int]]:
    seen: dict[str, tuple[int, int]] = {}
    for folder in paths:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                seen[os.path.join(folder, entry.name)] = (st.st_mtime_ns, st.st_size)
    return seen


def _read_regular(path: str, max_bytes: int) -> bytes | None:
    """Read a file the code wrote, refusing symlinks (they could point anywhere)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(max_bytes + 1)
    return data if len(data) <= max_bytes else None


class Executor:
    """Runs calls for one worker; holds its session namespaces."""

    def __init__(self, home: str, limits: dict[str, Any], reap_uid: bool) -> None:
        self.home = Path(home)
        self.work = self.home / "work"
        self.out = self.work / "out"
        self.parked = self.home / "sessions"
        self.limits = limits
        self.reap_uid = reap_uid
        self.sessions: dict[str, _Session] = {}
        self.current: str | None = None  # session whose folder is at ``work`` now (None: stateless)
        self.pid = os.getpid()
        self.parked.mkdir(exist_ok=True)

    # --- working folder -------------------------------------------------------------------
    def _enter_folder(self, session: str | None) -> None:
        if session is not None and session == self.current and self.work.exists():
            return
        if self.current is not None and self.work.exists():
            os.replace(self.work, self.parked / self.current)
        elif self.work.exists():
            shutil.rmtree(self.work, ignore_errors=True)
        parked = self.parked / session if session else None
        if parked is not None and parked.exists():
            os.replace(parked, self.work)
        else:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work.mkdir()
        self.out.mkdir(exist_ok=True)
        self.current = session

    def release(self, session: str) -> None:
        self.sessions.pop(session, None)
        if self.current == session:
            shutil.rmtree(self.work, ignore_errors=True)
            self.current = None
        shutil.rmtree(self.parked / session, ignore_errors=True)

    # --- one call -------------------------------------------------------------------------
    def run(self, req: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        session: str | None = req.get("session")
        fidelity, tool = req["fidelity"], req["tool"]
        self._enter_folder(session)
        os.chdir(self.work)
        names: list[str] = req["inputs"]
        for name, data in zip(names, blobs, strict=True):
            (self.work / name).write_bytes(data)
        state = self.sessions.get(session) if session else None
        if state is None or (state.fidelity, state.tool) != (fidelity, tool):
            state = self._new_state(fidelity, tool)
            if session:
                self.sessions[session] = state
        state.inputs = sorted(set(state.inputs) | set(names))
        if fidelity == "fixed":
            state.globals_["INPUT_IMAGES"] = list(state.inputs)
        watched = [self.out] if fidelity == "reference" else [self.out, self.work]
        before = _snapshot(watched)
        stdout, stderr = CappedText(int(self.limits["output_chars"])), CappedText(int(self.limits["output_chars"]))
        error = self._exec(req["code"], state, stdout, stderr)
        self._reap()
        plt.close("all")
        outputs = self._new_images(before, _snapshot(watched), fidelity)
        blobs_out: list[bytes] = []
        listed: list[dict[str, Any]] = []
        for path in outputs[: int(self.limits["max_output_images"])]:
            image = _read_regular(path, int(self.limits["file_bytes"]))
            if image is not None:
                listed.append({"name": os.path.basename(path), "path": path})
                blobs_out.append(image)
        reply = {
            "status": "error" if error else "ok",
            "error": error,
            "stdout": stdout.getvalue(),
            "stderr": stderr.getvalue(),
            "stdout_chars": stdout.total,
            "outputs": listed,
        }
        return reply, blobs_out

    def _new_state(self, fidelity: str, tool: str) -> _Session:
        if fidelity == "reference":
            g, loc = reference_namespace(tool, self.out)
            return _Session(g, loc, fidelity, tool)
        return _Session(fixed_namespace(self.out, []), None, fidelity, tool)

    def _exec(self, code: str, state: _Session, stdout: CappedText, stderr: CappedText) -> str | None:
        """Run the code; returns a one-line error summary or None. Forked children never return."""
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu_soft = int(used.ru_utime + used.ru_stime) + int(self.limits["cpu_s"]) + 1
        _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
        if cpu_hard != resource.RLIM_INFINITY:
            cpu_soft = min(cpu_soft, cpu_hard)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_soft, cpu_hard))
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = stdout, stderr
        error: str | None = None
        try:
            compiled = compile(code, CODE_FILENAME, "exec")
            exec(compiled, state.globals_, state.locals_)
        except BaseException as exc:  # the model's exception is a result, not our failure
            if os.getpid() != self.pid:
                os._exit(1)
            stderr.write(user_traceback(exc))
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
        finally:
            if os.getpid() != self.pid:  # a fork of the model's code must not answer the pool
                os._exit(0)
            sys.stdout, sys.stderr = saved
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_hard, cpu_hard))
        return error

    def _reap(self) -> None:
        """Kill whatever the code left running (only our uid has it) and collect the zombies."""
        if self.reap_uid:
            try:
                os.kill(-1, signal.SIGKILL)  # as a jailed uid this reaches only our own children
            except OSError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, 0 if self.reap_uid else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    def _new_images(self, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], fidelity: str) -> list[str]:
        """New images in a deterministic order.

        reference: only ``transformed_image_N.png`` in the save dir whose name is new (an
        overwrite is not detected, as in the harness); the harness returns them in set order,
        which is arbitrary, so we sort by N. fixed: any new or modified image in the output folder,
        plus ``transformed_image_N.png`` written to the working folder; numbered ones first by N.
        """
        picked: list[tuple[int, int, str, str]] = []
        for path, sig in after.items():
            name = os.path.basename(path)
            m = TRANSFORMED_RE.match(name)
            in_out = os.path.dirname(path) == str(self.out)
            if fidelity == "reference":
                if m and path not in before:
                    picked.append((0, int(m.group(1)), name, path))
                continue
            if before.get(path) == sig:
                continue
            if m:
                picked.append((0, int(m.group(1)), name, path))
            elif in_out and os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES:
                picked.append((1, 0, name, path))
        return [p[3] for p in sorted(picked)]
