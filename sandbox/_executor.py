"""What one call does inside its own process: write the inputs, run the code, collect outputs.

Runs in a call child forked from the worker for this call only (then discarded), or in a
session process that keeps one trajectory's interpreter between its calls. The worker owns the
folders: the call's working folder is always at ``<home>/work`` so names shown to the model stay
stable (see ``sandbox._zygote``).
"""

from __future__ import annotations

import io
import os
import re
import resource
import signal
import stat
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from sandbox._caps import cap_reply, image_pixels, one_line
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
class _State:
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


class CallRunner:
    """Runs calls in the current process: a fresh call child (one call) or a session process (many).

    The worker has already put the call's folder at ``<home>/work`` (owned by this process's
    uid) before the call arrives; a session's interpreter state is ``self.state``.
    """

    def __init__(self, home: str, limits: dict[str, Any], reap_uid: bool) -> None:
        self.work = Path(home) / "work"
        self.out = self.work / "out"
        self.limits = limits
        self.reap_uid = reap_uid
        self.state: _State | None = None
        self.pid = os.getpid()

    def run(self, req: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        fidelity, tool = req["fidelity"], req["tool"]
        os.chdir(self.work)
        self.out.mkdir(exist_ok=True)
        names: list[str] = req["inputs"]
        # A kept work folder holds the trajectory's saved files, not earlier turns' inputs: the
        # tools see exactly this call's images under the input names.
        with os.scandir(self.work) as entries:
            stale = [e.path for e in entries if e.name.startswith("input_") and e.name not in names and e.is_file(follow_symlinks=False)]
        for path in stale:
            os.unlink(path)
        for name, data in zip(names, blobs, strict=True):
            (self.work / name).write_bytes(data)
        state = self.state
        if state is None or (state.fidelity, state.tool) != (fidelity, tool):
            state = self.state = self._new_state(fidelity, tool)
        state.inputs = sorted(set(state.inputs) | set(names))
        if fidelity == "fixed":
            state.globals_["INPUT_IMAGES"] = list(state.inputs)
        watched = [self.out] if fidelity == "reference" else [self.out, self.work]
        before = _snapshot(watched)
        stdout, stderr = CappedText(int(self.limits["output_chars"])), CappedText(int(self.limits["output_chars"]))
        error = self._exec(req["code"], state, stdout, stderr)
        self._reap()
        if plt.get_fignums():
            plt.close("all")
        outputs = self._new_images(before, _snapshot(watched), fidelity)
        blobs_out: list[bytes] = []
        listed: list[dict[str, Any]] = []
        budget = int(self.limits["max_output_bytes"])
        for path in outputs[: int(self.limits["max_output_images"])]:
            image = _read_regular(path, min(int(self.limits["file_bytes"]), budget))
            if image is not None:
                budget -= len(image)
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
        # Capped here first, so an oversized field never even crosses the pipe.
        return cap_reply(reply, blobs_out, self.limits, image_pixels)

    def warm(self) -> None:
        """Touch once, ahead of the call, the memory a call touches.

        A forked child shares the zygote's pages copy-on-write; the first write to each costs a
        page fault, and on some VMs a few hundred of those cost tens of milliseconds. A spare
        child runs this while it waits, so the real call finds its pages already copied. Runs
        only our own code and touches no file.
        """
        for fidelity, tool in (("fixed", "image"), ("reference", "image"), ("reference", "interpreter")):
            state = self._new_state(fidelity, tool)
            out = CappedText(int(self.limits["output_chars"]))
            self._exec("pass", state, out, out)
            cap_reply({"status": "ok", "error": None, "stdout": out.getvalue(), "stderr": "", "outputs": []}, [], self.limits)
        _snapshot([])
        plt.close("all")

    def _new_state(self, fidelity: str, tool: str) -> _State:
        if fidelity == "reference":
            g, loc = reference_namespace(tool, self.out)
            return _State(g, loc, fidelity, tool)
        return _State(fixed_namespace(self.out, []), None, fidelity, tool)

    def _exec(self, code: str, state: _State, stdout: CappedText, stderr: CappedText) -> str | None:
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
            error = one_line(traceback.format_exception_only(type(exc), exc)[-1])
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
