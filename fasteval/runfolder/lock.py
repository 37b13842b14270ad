"""One writer per run folder: an exclusive ``flock`` on ``<run>/run.lock``.

Two ``fasteval run`` on one folder both ran every job and paid for each twice (interactive and
batch alike), and ``report`` then counted both. ``run``, ``rescore``, ``merge`` (its sources),
``slurm merge`` and ``batches cancel`` take this lock before they write anything; a second one is
refused with one line naming the holder. The kernel drops the lock when the holder exits, however
it exits (``kill -9`` included), so a stale lock file never blocks: its text is only read to name
a holder that still has it. Slurm shards each run in their own folder (``RUN/shards/<i>``), so
they never contend.

On NFS, Linux emulates ``flock`` with byte-range locks the server arbitrates, so two nodes of a
cluster exclude each other too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from fasteval.core.errors import RunFolderBusy
from fasteval.core.redact import redact_text
from fasteval.core.terminal import clean
from fasteval.runfolder.safe_open import open_nofollow

LOCK = "run.lock"
_HOLDER_BYTES = 4096
"""The most of a lock file we read to name its holder (anyone who can write the folder wrote it)."""


def _open(path: Path) -> int | None:
    """The lock file, created if need be; None in a folder we may not write (nobody of ours writes it)."""
    try:
        return open_nofollow(path, os.O_RDWR | os.O_CREAT, "the run folder's lock")
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
    try:
        return open_nofollow(path, os.O_RDONLY, "the run folder's lock")
    except FileNotFoundError:
        return None


def _holder(fd: int) -> str:
    """Who holds the lock, from what it wrote: one cleaned line (a tampered file is only text)."""
    try:
        info = orjson.loads(os.pread(fd, _HOLDER_BYTES, 0))
    except (OSError, orjson.JSONDecodeError):
        return "another process"
    if not isinstance(info, dict):
        return "another process"
    since = info.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    return clean(f"pid {info.get('pid')} on {info.get('host')} ({info.get('command')}, since {when})")[:600]


def _arguments(command: str) -> list[str]:
    """The command line's arguments after ``command``'s words (none when this is not the CLI: the API)."""
    words = command.split()
    return sys.argv[1 + len(words):] if sys.argv[1:1 + len(words)] == words else []


@contextlib.contextmanager
def run_folder_lock(run_dir: Path, command: str) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the block, or raise ``RunFolderBusy`` having written nothing.

    ``command`` names what we are doing (``run``, ``rescore``...) in the holder text another
    process shows; the command line is redacted first (a key may sit in an argument).
    """
    fd = _open(run_dir / LOCK)
    if fd is None:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunFolderBusy(f"{clean(str(run_dir))} is in use by {_holder(fd)}: one command at a time "
                                f"may write a run folder (two would run and pay for the same jobs twice); "
                                f"wait for it to end, or stop it") from None
        with contextlib.suppress(OSError):  # the text only names us to a second command
            line = redact_text(" ".join(["fasteval", command, *_arguments(command)]))[:1000]
            info = orjson.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": line,
                                 "since": time.time()})
            os.ftruncate(fd, 0)
            os.pwrite(fd, info, 0)
        yield
    finally:
        os.close(fd)
