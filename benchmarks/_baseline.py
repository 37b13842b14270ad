"""``--baseline-ref REF``: the same measurement on an earlier commit, in the same run.

A benchmark that compares against itself only across runs cannot tell a regression from a
busier machine. With ``--baseline-ref`` the measuring script stays the one you run; only the
code under test (``fasteval``, ``providers``, ``sandbox``, ``cache``) comes from ``REF``: its
tracked files are exported with ``git archive`` into a temporary folder (nothing is added to the
repository's worktree list, so a killed run leaves no stale entry; the folder is removed at the
end), and the measured child runs with that folder first on ``PYTHONPATH`` and as its working
directory. The venv is the current one: the editable install's import hook comes after
``sys.path`` in Python's search order, so the exported tree wins.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def resolve(ref: str) -> str:
    """The commit ``ref`` names (a clear error for a name git does not know)."""
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"--baseline-ref {ref!r}: not a commit of this repository")
    return out.stdout.strip()


@contextlib.contextmanager
def checkout(ref: str) -> Iterator[Path]:
    """``ref``'s tracked files in a temporary folder, removed on exit."""
    commit = resolve(ref)
    tmp = Path(tempfile.mkdtemp(prefix=f"fasteval-baseline-{commit[:9]}-"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def describe(ref: str) -> str:
    """``ref`` and its short hash, for the printed table."""
    commit = resolve(ref)
    return ref if ref.startswith(commit[:7]) else f"{ref} ({commit[:9]})"


def ratio(new: float, old: float) -> str:
    return f"{new / old:.2f}x" if old else "-"
