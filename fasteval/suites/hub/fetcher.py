"""Bringing one hub repository's files into a folder, as its lock file says or as a revision names.

The rules, in order:

- A lock that pins the folder's repository is the target: files that match it are kept without
  asking the hub (so a complete folder needs no network, ``HF_HUB_OFFLINE`` or not); missing
  files are downloaded at the locked commit and must hash to the locked sha256; a file on disk
  that differs from the lock is reported, never overwritten.
- A ``revision`` that now names another commit than the locked one is refused unless ``update``.
- Without a lock (or with ``update``) the revision is resolved, the files matching the patterns
  are downloaded and checked against the hub's checksums, and a new lock entry records them.
"""

from __future__ import annotations

import asyncio
import fcntl
import fnmatch
import os
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from fasteval.suites.hub.client import HubClient, RemoteFile, file_sha256, git_blob_id, safe_repo_path
from fasteval.suites.hub.lock import LockedFile, LockedRepo
from fasteval.suites.hub.settings import ChecksumMismatch, HubError

T = TypeVar("T")
Report = Callable[[str], None]
CONCURRENT_FILES = 4


@dataclass(frozen=True, slots=True)
class FetchPlan:
    repo: str
    revision: str | None
    """None: the locked revision, else ``main``."""
    folder: Path
    folder_key: str
    """The folder relative to the lock file's (the lock entry's ``folder``)."""
    patterns: tuple[str, ...] = ()
    """Which files (fnmatch patterns on repository paths; empty: every file)."""
    update: bool = False


def _quiet(_: str) -> None:
    return None


async def _all(coros: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Every result, or the first failure with the others cancelled (not left downloading)."""
    try:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(c) for c in coros]
    except BaseExceptionGroup as group:
        first = group.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    return [t.result() for t in tasks]


def select(files: tuple[RemoteFile, ...], patterns: tuple[str, ...]) -> list[RemoteFile]:
    """The files whose path matches any pattern (every file when there are none)."""
    if not patterns:
        return list(files)
    return [f for f in files if any(fnmatch.fnmatchcase(f.path, p) for p in patterns)]


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """One fetcher per folder at a time (two Slurm shards filling one cache must not share a .part)."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".fasteval-fetch.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _matches_hub(path: Path, file: RemoteFile) -> bool:
    """A file already on disk is the hub's when its size and checksum say so (no checksum: no)."""
    if file.size is not None and path.stat().st_size != file.size:
        return False
    if file.sha256:
        return file_sha256(path) == file.sha256
    if file.git_oid:
        return git_blob_id(path) == file.git_oid
    return False


async def fetch_repo(hub: HubClient, plan: FetchPlan, locked: LockedRepo | None,
                     report: Report = _quiet) -> LockedRepo:
    """The repository's files in ``plan.folder``, checked; returns the lock entry that vouches for them."""
    if locked is not None and not plan.update and plan.revision not in (None, locked.revision, locked.commit):
        if hub.settings.offline:
            raise HubError(f"{plan.repo}: the lock file pins {locked.revision} (commit {locked.commit[:12]}); with "
                           f"HF_HUB_OFFLINE set, {plan.revision!r} cannot be looked up")
        snap = await hub.snapshot(plan.repo, plan.revision)
        if snap.commit != locked.commit:
            raise ChecksumMismatch(f"{plan.repo}: the lock file pins commit {locked.commit[:12]} ({locked.revision}); "
                                   f"{plan.revision!r} is commit {snap.commit[:12]}: pass --update to move the lock "
                                   "to it")
    if locked is not None and not plan.update:
        await _complete_locked(hub, plan, locked, report)
        return locked
    if hub.settings.offline:
        raise HubError(f"{plan.repo}: HF_HUB_OFFLINE is set and {plan.folder} holds no fetched copy (no lock file "
                       "beside it): unset HF_HUB_OFFLINE to download it")
    revision = plan.revision or (locked.revision if locked is not None else "main")
    snap = await hub.snapshot(plan.repo, revision)
    wanted = select(snap.files, plan.patterns)
    if not wanted:
        raise HubError(f"{plan.repo}@{snap.commit[:12]}: no file matches {', '.join(plan.patterns)}")
    report(f"{plan.repo}: {revision} is commit {snap.commit[:12]}; {len(wanted)} file(s)")
    sem = asyncio.Semaphore(CONCURRENT_FILES)

    async def one(file: RemoteFile) -> tuple[str, LockedFile]:
        local = plan.folder / safe_repo_path(file.path)
        async with sem:
            if await asyncio.to_thread(lambda: local.is_file() and _matches_hub(local, file)):
                sha = await asyncio.to_thread(file_sha256, local)
                report(f"  {file.path}: already here, checksum ok")
            else:
                sha = await hub.download(plan.repo, snap.commit, file, local)
                report(f"  {file.path}: downloaded, checksum ok")
        return file.path, LockedFile(await asyncio.to_thread(lambda: local.stat().st_size), sha)

    files = dict(await _all([one(f) for f in wanted]))
    return LockedRepo(plan.repo, revision, snap.commit, plan.folder_key, files,
                      [f.path for f in snap.files])


def _check_locked(folder: Path, locked: LockedRepo) -> tuple[list[str], list[str]]:
    """(files missing, files that differ from the lock) under ``folder``."""
    missing, changed = [], []
    for rel, entry in sorted(locked.files.items()):
        local = folder / safe_repo_path(rel)
        if not local.is_file():
            missing.append(rel)
        elif local.stat().st_size != entry.size or file_sha256(local) != entry.sha256:
            changed.append(rel)
    return missing, changed


async def _complete_locked(hub: HubClient, plan: FetchPlan, locked: LockedRepo, report: Report) -> None:
    missing, changed = await asyncio.to_thread(_check_locked, plan.folder, locked)
    if changed:
        raise ChecksumMismatch(f"{plan.repo}: {len(changed)} file(s) differ from the lock file, e.g. "
                               f"{plan.folder / changed[0]}: refusing to overwrite them; delete them to download the "
                               "locked version again, or pass --update to take the hub's current files")
    if not missing:
        report(f"{plan.repo}: {len(locked.files)} file(s) match the lock file (commit {locked.commit[:12]})")
        return
    if hub.settings.offline:
        raise HubError(f"{plan.repo}: HF_HUB_OFFLINE is set and {len(missing)} locked file(s) are missing, e.g. "
                       f"{missing[0]}: unset HF_HUB_OFFLINE to download them")
    report(f"{plan.repo}: {len(missing)} of {len(locked.files)} locked file(s) missing; fetching commit "
           f"{locked.commit[:12]}")
    sem = asyncio.Semaphore(CONCURRENT_FILES)

    async def one(rel: str) -> None:
        entry = locked.files[rel]
        async with sem:
            await hub.download(plan.repo, locked.commit, RemoteFile(rel, entry.size), plan.folder / rel,
                               expect_sha256=entry.sha256)
        report(f"  {rel}: downloaded, matches the lock file")

    await _all([one(rel) for rel in missing])
