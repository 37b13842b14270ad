"""A hub dataset as a task source: ``hf://datasets/ORG/NAME``, a revision, a split (and a subset).

The revision is resolved to a commit once per load (``refs/<revision>`` in the cache remembers it,
so ``HF_HUB_OFFLINE=1``, or a hub that cannot be reached, runs on the last commit fetched); the
split's data files (.parquet, .jsonl, .json, .csv, .tsv) are downloaded into
``<data cache>/datasets/ORG/NAME/<commit>/`` with the lock file beside them, and files the rows
name (images by path) are fetched from the same commit when a row first asks for them.

A split is found as the hub's own data-file conventions lay it out: a file or folder named for
it (``test.parquet``, ``data/test-00000-of-00001.parquet``, ``test/0000.parquet``,
``default/test/0000.parquet`` on the ``refs/convert/parquet`` branch); a subset is the first
folder of the path. ``data_files`` globs pick files explicitly instead.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from fasteval.suites.hub.client import HubClient, RemoteFile, safe_repo_path
from fasteval.suites.hub.fetcher import folder_lock
from fasteval.suites.hub.lock import LOCK_NAME, DataLock, LockedFile, LockedRepo, read_lock, write_lock
from fasteval.suites.hub.loop_thread import LoopThread
from fasteval.suites.hub.settings import HubError, HubSettings, HubUnreachable

PREFIX = "hf://datasets/"
DATA_SUFFIXES = (".parquet", ".jsonl", ".ndjson", ".json", ".csv", ".tsv")
SPLIT_NAMES = frozenset({"train", "test", "validation", "val", "valid", "dev", "eval", "evaluation"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_TOKENS = re.compile(r"[-_. ]")


@dataclass(frozen=True, slots=True)
class HubSource:
    repo: str
    revision: str | None = None


def is_hub_source(text: str) -> bool:
    return text.startswith("hf://")


def parse_source(text: str) -> HubSource:
    """``hf://datasets/ORG/NAME`` or ``...NAME@REVISION``; ValueError for anything else."""
    if not text.startswith(PREFIX):
        raise ValueError(f"a hub source is hf://datasets/ORG/NAME (models and spaces are not task sources), "
                         f"got {text[:100]!r}")
    rest, _, revision = text[len(PREFIX):].partition("@")
    parts = rest.strip("/").split("/")
    if len(parts) != 2 or not all(_NAME.fullmatch(p) for p in parts):
        raise ValueError(f"a hub source is hf://datasets/ORG/NAME[@REVISION], got {text[:100]!r}")
    return HubSource("/".join(parts), revision or None)


def _split_tokens(path: str) -> set[str]:
    parts = path.split("/")
    stem = parts[-1].split(".", 1)[0]
    return {*parts[:-1], *_TOKENS.split(stem)}


def split_files(paths: list[str], split: str | None, subset: str | None = None,
                patterns: tuple[str, ...] = ()) -> list[str]:
    """The data files of a split (or those ``patterns`` match); ValueError naming what exists."""
    data = sorted(p for p in paths if p.lower().endswith(DATA_SUFFIXES)
                  and not any(part.startswith(".") for part in p.split("/")))
    if patterns:
        chosen = [p for p in data if any(fnmatch.fnmatchcase(p, pat) for pat in patterns)]
        if not chosen:
            raise ValueError(f"no data file matches {', '.join(patterns)} (data files: {_some(data)})")
        return chosen
    if subset:
        data = [p for p in data if p.split("/")[0] == subset]
        if not data:
            raise ValueError(f"no data file under the subset folder {subset!r}/")
    if split is None:
        found = sorted({t for p in data for t in _split_tokens(p) if t in SPLIT_NAMES})
        if len(found) > 1:
            raise ValueError(f"the dataset has several splits ({', '.join(found)}): choose one with the option 'split'")
        if not data:
            raise ValueError(f"the dataset has no data file ({', '.join(DATA_SUFFIXES)})")
        return data
    chosen = [p for p in data if split in _split_tokens(p)]
    if not chosen:
        raise ValueError(f"no data file of split {split!r} (data files: {_some(data)})")
    return chosen


def _some(paths: list[str]) -> str:
    return ", ".join(paths[:6]) + (f", … ({len(paths)} in all)" if len(paths) > 6 else "") if paths else "none"


class HubDataset:
    """One dataset at one commit in the data cache; network calls run on the caller's LoopThread."""

    def __init__(self, source: HubSource, cache_root: Path, loop: LoopThread, *, revision: str | None = None,
                 settings: HubSettings | None = None, report: Callable[[str], None] | None = None) -> None:
        self.source = source
        self.revision = revision or source.revision or "main"
        self.settings = settings or HubSettings.from_env()
        self.loop = loop
        self.report = report or (lambda _: None)
        org, name = source.repo.split("/")
        self.root = cache_root / "datasets" / org / name
        self.commit = ""
        self.folder = self.root
        self._remote: dict[str, RemoteFile] = {}
        self._client: HubClient | None = None
        self._entry: LockedRepo | None = None
        self._fetched: dict[str, LockedFile] = {}

    @property
    def uri(self) -> str:
        return f"{PREFIX}{self.source.repo}@{self.commit or self.revision}"

    def _hub(self) -> HubClient:
        if self._client is None:
            client = HubClient(self.settings)
            self.loop.run(client.__aenter__())
            self._client = client
        return self._client

    def close(self) -> None:
        """Record files fetched for rows (images by path) in the lock, and close the session."""
        try:
            if self._fetched:
                with folder_lock(self.folder):
                    lock = read_lock(self.folder) or DataLock(PREFIX + self.source.repo)
                    entry = lock.find(self.source.repo, "") or self._new_entry()
                    entry.files.update(self._fetched)
                    lock.put(entry)
                    write_lock(self.folder, lock)
                self._fetched.clear()
        finally:
            if self._client is not None:
                self.loop.run(self._client.__aexit__(None, None, None))
                self._client = None

    def _new_entry(self) -> LockedRepo:
        return LockedRepo(self.source.repo, self.revision, self.commit, "", {}, sorted(self._remote))

    def _ref(self) -> Path:
        return self.root / "refs" / quote(self.revision, safe="")

    def resolve(self) -> list[str]:
        """Pin the revision to a commit; every path of the dataset at it."""
        cached = self._ref().read_text().strip() if self._ref().is_file() else None
        pinned = self.revision if _HEX40.fullmatch(self.revision) else None
        if not self.settings.offline:
            try:
                snap = self.loop.run(self._hub().snapshot(self.source.repo, self.revision))
            except HubUnreachable as e:
                if not (pinned or cached):
                    raise
                self.report(f"{self.source.repo}: {e}; using the cached commit {(pinned or cached or '')[:12]}")
            else:
                self.commit = snap.commit
                self._remote = {f.path: f for f in snap.files}
                self._ref().parent.mkdir(parents=True, exist_ok=True)
                self._ref().write_text(snap.commit + "\n")
                self.folder = self.root / self.commit
                return sorted(self._remote)
        commit = pinned or cached
        if commit is None:
            raise HubError(f"{self.source.repo}@{self.revision}: HF_HUB_OFFLINE is set and this revision was never "
                           "fetched here: unset HF_HUB_OFFLINE once to download it")
        self.commit, self.folder = commit, self.root / commit
        lock = read_lock(self.folder)
        entry = lock.find(self.source.repo, "") if lock else None
        if entry is None:
            raise HubError(f"{self.source.repo}@{commit[:12]}: nothing of this commit is in the cache ({self.folder})")
        return sorted(entry.listing or entry.files)

    def fetch(self, paths: list[str]) -> list[Path]:
        """The split's data files at the pinned commit, downloading (and checking) what is missing;
        the lock file is written once, with every file the cache holds."""
        with folder_lock(self.folder):
            lock = read_lock(self.folder) or DataLock(PREFIX + self.source.repo)
            entry = lock.find(self.source.repo, "") or self._new_entry()
            if self._remote:
                entry.listing = sorted(self._remote)
            self._entry = entry
            got = self._download([p for p in paths if not self._present(entry, p)])
            entry.files.update(got)
            if got or not (self.folder / LOCK_NAME).exists():
                lock.put(entry)
                write_lock(self.folder, lock)
        return [self.folder / p for p in paths]

    def _download(self, missing: list[str]) -> dict[str, LockedFile]:
        if missing and self.settings.offline:
            raise HubError(f"{self.source.repo}@{self.commit[:12]}: HF_HUB_OFFLINE is set and {len(missing)} "
                           f"file(s) are not in the cache, e.g. {missing[0]}")
        if missing and not self._remote:
            raise HubError(f"{self.source.repo}: the hub cannot be reached and {missing[0]} is not in the cache")
        got = {}
        for path in missing:
            remote = self._remote.get(path)
            if remote is None:
                raise HubError(f"{self.source.repo}@{self.commit[:12]}: no file {path!r}")
            self.report(f"{self.source.repo}: fetching {path}")
            local = self.folder / safe_repo_path(path)
            sha = self.loop.run(self._hub().download(self.source.repo, self.commit, remote, local))
            got[path] = LockedFile(local.stat().st_size, sha)
        return got

    def _one_file(self, path: str) -> Path:
        """A file a row names: from the cache, else downloaded now and locked when the load ends
        (one lock write for all of them, not one per image)."""
        if self._present(self._entry, path) or path in self._fetched:
            return self.folder / path
        with folder_lock(self.folder):
            self._fetched.update(self._download([path]))
        return self.folder / path

    def _present(self, entry: LockedRepo | None, path: str) -> bool:
        """Fetched before (in the lock, same size on disk): its checksum was checked when it came."""
        locked = entry.files.get(path) if entry is not None else None
        local = self.folder / safe_repo_path(path)
        return locked is not None and local.is_file() and local.stat().st_size == locked.size

    def repo_file(self, data_file: str, name: str) -> Path | None:
        """A file a row names (relative to its data file's folder, else to the dataset's root); None
        when the dataset has no such file; ValueError when it has one that cannot be fetched now."""
        base = posixpath.dirname(data_file)
        known = set(self._remote) if self._remote else None
        failed: HubError | None = None
        for candidate in (posixpath.normpath(posixpath.join(base, name)), posixpath.normpath(name)):
            if candidate.startswith(("../", "/")) or candidate == ".." or (known is not None and candidate not in known):
                continue
            try:
                return self._one_file(candidate)
            except HubError as e:
                failed = failed or e
        if failed is not None:
            raise ValueError(str(failed))
        return None
