"""The lock file beside fetched data: which commit of which repository, and each file's sha256.

Written on the first fetch (``fasteval.lock.json`` in the data folder) and read on every later
one: a later fetch downloads the locked commit, refuses bytes whose sha256 is not the recorded
one, and reports a file changed on disk instead of overwriting it. Committing the lock file next
to a config pins the exact data a published number was computed on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

LOCK_NAME = "fasteval.lock.json"
LOCK_FORMAT = 1


@dataclass(frozen=True, slots=True)
class LockedFile:
    size: int
    sha256: str


@dataclass(slots=True)
class LockedRepo:
    """One hub repository fetched into ``folder`` (relative to the lock's folder)."""

    repo: str
    revision: str
    commit: str
    folder: str = ""
    files: dict[str, LockedFile] = field(default_factory=dict)
    listing: list[str] = field(default_factory=list)
    """Every file of the repository at the commit (an ``hf://`` source picks a split offline from it)."""

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "revision": self.revision, "commit": self.commit, "folder": self.folder,
                "files": {p: {"size": f.size, "sha256": f.sha256} for p, f in sorted(self.files.items())},
                **({"listing": sorted(self.listing)} if self.listing else {})}


@dataclass(slots=True)
class DataLock:
    name: str
    repos: list[LockedRepo] = field(default_factory=list)

    def find(self, repo: str, folder: str) -> LockedRepo | None:
        return next((r for r in self.repos if r.repo == repo and r.folder == folder), None)

    def put(self, entry: LockedRepo) -> None:
        self.repos = [r for r in self.repos if not (r.repo == entry.repo and r.folder == entry.folder)] + [entry]


class LockError(ValueError):
    """A lock file that cannot be read; the message says which and what to do."""


def _repo(item: Any, path: Path) -> LockedRepo:
    try:
        files = {str(p): LockedFile(int(f["size"]), str(f["sha256"])) for p, f in item["files"].items()}
        listing = [str(p) for p in item.get("listing", [])]
        return LockedRepo(str(item["repo"]), str(item["revision"]), str(item["commit"]), str(item.get("folder", "")),
                          files, listing)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise LockError(f"{path}: a repository entry is malformed ({type(e).__name__}: {e}); delete the lock file "
                        "to fetch anew") from None


def read_lock(folder: Path) -> DataLock | None:
    """The lock in ``folder``, or None when there is none."""
    path = folder / LOCK_NAME
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except orjson.JSONDecodeError as e:
        raise LockError(f"{path} is not valid JSON ({e}); delete it to fetch anew") from None
    if not isinstance(data, dict) or data.get("format") != LOCK_FORMAT or not isinstance(data.get("repos"), list):
        raise LockError(f"{path} is not a fasteval lock file of format {LOCK_FORMAT}; delete it to fetch anew")
    return DataLock(str(data.get("name", "")), [_repo(r, path) for r in data["repos"]])


def write_lock(folder: Path, lock: DataLock) -> None:
    """Write the lock atomically (a crash leaves the old one or the new one, never half of one)."""
    folder.mkdir(parents=True, exist_ok=True)
    body = orjson.dumps({"format": LOCK_FORMAT, "name": lock.name, "repos": [r.to_json() for r in lock.repos]},
                        option=orjson.OPT_INDENT_2) + b"\n"
    tmp = folder / f".{LOCK_NAME}.{os.getpid()}.tmp"
    tmp.write_bytes(body)
    os.replace(tmp, folder / LOCK_NAME)
