"""Opening run folder files without following symbolic links.

A run folder is shared (a cluster's filesystem, an e-mailed tarball), so its files are input we
did not write. A ``records.jsonl`` planted as a link would make a resume truncate and append to
the file it points at, a dangling one would create a file outside the folder, and a linked blob
would put any readable file into a shared report. Every file of the folder is opened with
``O_NOFOLLOW`` (or checked first, where a library opens it), and a link is refused by name.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from fasteval.core.errors import UnsafeRunFolder

FILE_MODE = 0o666
"""Files are created as the process umask allows: ``fasteval run`` sets 0077 (files 0600, folders
0700) unless ``--shared-run-dir``; see docs/run-folder.md."""


def refused(path: Path, what: str) -> UnsafeRunFolder:
    return UnsafeRunFolder(f"{path} is a symbolic link: refusing to open it ({what} is never followed "
                           "out of the run folder; remove the link, or copy the file in its place)")


def refuse_symlink(path: Path, what: str) -> None:
    """Raise ``UnsafeRunFolder`` when ``path`` is a symbolic link (dangling ones included)."""
    if path.is_symlink():
        raise refused(path, what)


def open_nofollow(path: Path, flags: int, what: str, mode: int = FILE_MODE) -> int:
    """``os.open`` that refuses a symbolic link at ``path`` (ELOOP becomes ``UnsafeRunFolder``)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise refused(path, what) from None
        raise
