"""Local faults of a run (storage, file descriptors), each turned into one readable line and an exit code.

A full disk, a deleted run folder or a read-only one cannot be fixed by retrying a job: the
sweep must stop at the first failed write (so nothing is claimed as done that was not saved)
and say in one line what to do. Incomplete runs exit 3 (free space or restore, then rerun);
a run folder that cannot be written at all exits 2 (nothing ran).
"""

from __future__ import annotations

import errno
import logging
import os
import resource
from pathlib import Path
from typing import Any

from fasteval.core.errors import DESCRIPTOR_ERRNOS
from fasteval.core.errors import RunDirUnwritable as RunDirUnwritable
from fasteval.core.exitcodes import RunIncomplete
from fasteval.core.redact import RedactingFilter
from fasteval.runfolder.names import RUN_LOG
from fasteval.runfolder.safe_open import open_nofollow

_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_GONE = frozenset({errno.ENOENT, errno.ESTALE, errno.ENOTDIR})
FATAL_ERRNOS = _FULL | _UNWRITABLE | _GONE | DESCRIPTOR_ERRNOS | {errno.EIO}
"""Errors of a write into the run folder that no retry of the job can fix."""


def shown(path: Path) -> str:
    """A path as the user typed it: relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def is_fatal(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in FATAL_ERRNOS


def unwritable_run_dir(exc: OSError, run_dir: Path) -> RunDirUnwritable:
    """The one-line error for a run folder that cannot be created or take its run.log (exit 2)."""
    return RunDirUnwritable(f"cannot write the run folder {shown(run_dir)} ({exc.strerror or exc}): "
                            "use a writable --run-dir")


def write_failure(exc: OSError, path: Path, run_dir: Path | None = None) -> RuntimeError:
    """The one-line error for a failed write of ``path`` inside the run folder ``run_dir``.

    A RunIncomplete (exit 3) when a rerun can finish the sweep, RunDirUnwritable (exit 2) when
    the folder cannot be written at all.
    """
    where = shown(path)
    if exc.errno in DESCRIPTOR_ERRNOS:
        return out_of_descriptors(exc)
    if exc.errno in _FULL:
        return RunIncomplete(f"disk full writing {where}: free space, then rerun")
    if exc.errno in _UNWRITABLE:
        return RunDirUnwritable(f"cannot write {where} ({os.strerror(exc.errno or 0)}): "
                                "use a writable --run-dir")
    if exc.errno in _GONE:
        return vanished(run_dir or path.parent, path)
    return RunIncomplete(f"cannot write {where} ({exc.strerror or exc}): fix the disk, then rerun")


def out_of_descriptors(exc: OSError) -> RunIncomplete:
    """The one-line error for a process (or system) out of file descriptors: exit 3, as a full disk.

    Wherever it struck (a socket, an image, a record), no job is to blame and a rerun with a
    higher limit (or fewer jobs in flight) finishes the plan.
    """
    if exc.errno == errno.ENFILE:
        what = "the system's table is full (fs.file-max)"
    else:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        what = f"this process may open {soft} (ulimit -n)"
    return RunIncomplete(f"out of file descriptors: {what}; nothing after that was saved: raise `ulimit -n` "
                         "or lower run.max_concurrency, then rerun")


def database_failure(exc: Exception, path: Path, run_dir: Path) -> RuntimeError | None:
    """The one-line error for a failed SQLite write (the run index) in the run folder.

    None when the error is not a storage fault (the caller decides what the database is worth).
    """
    if isinstance(exc, OSError):
        return write_failure(exc, path, run_dir)
    text = str(exc).lower()
    if "full" in text:
        return write_failure(OSError(errno.ENOSPC, "No space left on device"), path, run_dir)
    if "readonly" in text or "read-only" in text:
        return write_failure(OSError(errno.EROFS, "Read-only file system"), path, run_dir)
    if "disk i/o" in text:
        return write_failure(OSError(errno.EIO, "I/O error"), path, run_dir)
    return None


def vanished(run_dir: Path, gone: Path) -> RunIncomplete:
    """The run folder (or a file in it) was deleted or moved while the sweep ran."""
    return RunIncomplete(f"run folder {shown(run_dir)} was deleted or moved while running "
                         f"({shown(gone)} is gone): nothing after that was saved; rerun to start again")


class RunLogHandler(logging.FileHandler):
    """``run.log``: secrets scrubbed, and a full disk silences it instead of printing tracebacks.

    When the disk is full the sweep already stops with one line; a logging traceback on stderr
    for every later log call would only bury that line.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8")
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.addFilter(RedactingFilter())
        self.failed = False

    def _open(self) -> Any:
        # O_NOFOLLOW: a run.log planted as a link never makes the sweep append to another file.
        fd = open_nofollow(Path(self.baseFilename), os.O_WRONLY | os.O_APPEND | os.O_CREAT, RUN_LOG)
        return os.fdopen(fd, "a", encoding=self.encoding)

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's API name)
        self.failed = True

    def flush(self) -> None:
        try:
            super().flush()
        except OSError:
            self.failed = True

    def close(self) -> None:
        try:
            super().close()
        except OSError:
            self.failed = True
