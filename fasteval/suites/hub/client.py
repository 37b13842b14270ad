"""The hub's download API, spoken directly over aiohttp (no huggingface_hub dependency).

Two endpoints, as the hub documents them and its own client uses them:

- ``GET {endpoint}/api/datasets/{repo}/revision/{revision}?blobs=true``: the commit a branch,
  tag or commit names (``sha``) and its files (``siblings``: ``rfilename``, ``size``, ``blobId``
  (the git blob id) and, for Git LFS files, ``lfs.sha256``).
- ``HEAD`` / ``GET {endpoint}/datasets/{repo}/resolve/{commit}/{path}``: a file. ``X-Repo-Commit``
  names the commit served; ``X-Linked-Etag`` (LFS: the sha256) or ``ETag`` (the git blob id) and
  ``X-Linked-Size`` say what the bytes must be; an LFS file answers with a redirect to a content
  host. Relative redirects (a renamed repository) are followed on the hub; the content host gets
  no token.

A download goes to a hidden ``.NAME.part`` file beside its target and resumes it with ``Range``
(after a dropped connection, or in a later run); it becomes the target only once its checksum is
the one the hub (and the lock file, when there is one) vouches for.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import aiohttp
import orjson

from fasteval.suites.hub.settings import ChecksumMismatch, HubError, HubSettings, HubUnreachable, offline_hint

_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20
_WRITE_BATCH = 4 << 20
MAX_LISTING_BYTES = 64 << 20
MAX_REDIRECTS = 5
CONNECT_ATTEMPTS = 3
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """A file of a repository at one commit, with what its bytes must hash to (when known)."""

    path: str
    size: int | None = None
    sha256: str | None = None
    git_oid: str | None = None


@dataclass(frozen=True, slots=True)
class RepoSnapshot:
    repo: str
    commit: str
    files: tuple[RemoteFile, ...]


@dataclass(frozen=True, slots=True)
class _Head:
    location: str
    commit: str | None
    etag: str | None
    size: int | None


def safe_repo_path(path: str) -> str:
    """A repository path that stays inside the folder it is written to; ValueError otherwise."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or "\x00" in path or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"unsafe path in the repository listing: {path[:120]!r}")
    return path


def git_blob_id(path: Path) -> str:
    """The git blob id of a file (sha1 of ``blob <size>\\0`` and the bytes): the hub's ETag of a non-LFS file."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _size(path: Path) -> int:
    """Bytes a part file holds (0 when there is none)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _discard(path: Path) -> None:
    path.unlink(missing_ok=True)


def _etag(value: str | None) -> str | None:
    if value is None:
        return None
    return value.removeprefix("W/").strip('"').lower() or None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _sibling(item: Any) -> RemoteFile:
    if not isinstance(item, dict) or not isinstance(item.get("rfilename"), str):
        raise HubError("the hub's listing has an entry without a file name")
    raw_lfs = item.get("lfs")
    lfs: dict[str, Any] = raw_lfs if isinstance(raw_lfs, dict) else {}
    sha = lfs.get("sha256") if isinstance(lfs.get("sha256"), str) else None
    oid = item.get("blobId") if isinstance(item.get("blobId"), str) else None
    size = item.get("size") if isinstance(item.get("size"), int) else None
    return RemoteFile(item["rfilename"], size, sha.lower() if sha else None, oid.lower() if oid else None)


class HubClient:
    """One HTTP session to the hub; ``async with HubClient(settings) as hub: ...``."""

    def __init__(self, settings: HubSettings, *, attempts: int = 5, backoff_s: float = 0.5,
                 connect_timeout_s: float = 30.0, read_timeout_s: float = 120.0) -> None:
        self.settings = settings
        self.attempts = attempts
        self.backoff_s = backoff_s
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._host = urlsplit(settings.endpoint).netloc

    async def __aenter__(self) -> HubClient:
        from fasteval.core.version import fasteval_version

        self._session = aiohttp.ClientSession(timeout=self._timeout, auto_decompress=False, headers={
            "User-Agent": f"fasteval/{fasteval_version()}", "Accept-Encoding": "identity"})
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("HubClient used outside its async with block")
        return self._session

    def _headers(self, url: str) -> dict[str, str]:
        """The token goes to the endpoint's own host only, never to a content host or a stranger."""
        if self.settings.token and urlsplit(url).netloc == self._host:
            return {"Authorization": f"Bearer {self.settings.token}"}
        return {}

    def _unreachable(self, e: BaseException) -> HubUnreachable:
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        return HubUnreachable(offline_hint(f"cannot reach {self.settings.endpoint} ({reason})"))

    async def _retrying(self, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call`` again on a transient fault (5xx, 429, a dropped connection) with backoff.

        A host that refuses or cannot be found is asked twice more only: without a network the
        user hears so in about a second and a half, not after the whole backoff.
        """
        last: BaseException | None = None
        refused = 0
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                return await call()
            except _Transient as e:
                last = e.cause
            except aiohttp.ClientConnectorError as e:
                last, refused = e, refused + 1
                if refused >= CONNECT_ATTEMPTS:
                    break
            except (aiohttp.ClientError, TimeoutError) as e:
                last = e
        assert last is not None
        if isinstance(last, HubError):
            raise last
        if isinstance(last, aiohttp.ClientConnectorError | TimeoutError):
            raise self._unreachable(last)
        raise HubError(f"{self.settings.endpoint}: the connection kept breaking off ({type(last).__name__}: "
                       f"{' '.join(str(last).split())[:200]})")

    def _refused(self, status: int, headers: Any, what: str) -> HubError:
        code = headers.get("X-Error-Code", "")
        message = " ".join(str(headers.get("X-Error-Message", "")).split())[:200]
        if status in (401, 403) or code == "GatedRepo":
            return HubError(f"{what}: the hub refused access ({status}{', ' + message if message else ''}): a gated "
                            "or private dataset needs HF_TOKEN set to a token that has access (accept its terms "
                            "on the hub first)")
        if code == "RepoNotFound":
            return HubError(f"{what}: there is no such dataset at {self.settings.endpoint}")
        if code == "RevisionNotFound":
            return HubError(f"{what}: the dataset has no such revision (a branch, tag or commit)")
        if code == "EntryNotFound":
            return HubError(f"{what}: no such file at that commit")
        return HubError(f"{what}: the hub answered {status}{' (' + message + ')' if message else ''}")

    async def snapshot(self, repo: str, revision: str) -> RepoSnapshot:
        """The commit ``revision`` names and every file of the dataset at it."""
        url = f"{self.settings.endpoint}/api/datasets/{repo}/revision/{quote(revision, safe='')}"
        what = f"{repo}@{revision}"

        async def call() -> Any:
            async with self.session.get(url, params={"blobs": "true"}, headers=self._headers(url)) as r:
                if r.status in _RETRY_STATUS:
                    raise _Transient(HubError(f"{what}: the hub answered {r.status}"))
                if r.status != 200:
                    raise self._refused(r.status, r.headers, what)
                body = await r.content.read(MAX_LISTING_BYTES + 1)
                if len(body) > MAX_LISTING_BYTES:
                    raise HubError(f"{what}: the hub's listing is over {MAX_LISTING_BYTES:,} bytes")
                return orjson.loads(body)

        try:
            data = await self._retrying(call)
        except orjson.JSONDecodeError:
            raise HubError(f"{what}: the hub's listing is not JSON (is HF_ENDPOINT a hub?)") from None
        sha = data.get("sha") if isinstance(data, dict) else None
        siblings = data.get("siblings") if isinstance(data, dict) else None
        if not isinstance(sha, str) or not _HEX40.fullmatch(sha) or not isinstance(siblings, list):
            raise HubError(f"{what}: the hub's listing has no commit sha or file list (is HF_ENDPOINT a hub?)")
        return RepoSnapshot(repo, sha, tuple(_sibling(s) for s in siblings))

    async def _head(self, url: str, what: str) -> _Head:
        """Follow the hub's own (relative) redirects; stop at one to another host: that is the content."""
        async def call() -> _Head:
            target = url
            for _ in range(MAX_REDIRECTS):
                async with self.session.head(target, allow_redirects=False, headers=self._headers(target)) as r:
                    if r.status in _RETRY_STATUS:
                        raise _Transient(HubError(f"{what}: the hub answered {r.status}"))
                    h = r.headers
                    if 300 <= r.status < 400 and "Location" in h:
                        nxt = urljoin(target, h["Location"])
                        if urlsplit(nxt).netloc == urlsplit(target).netloc and not h.get("X-Linked-Etag"):
                            target = nxt
                            continue
                        return _Head(nxt, h.get("X-Repo-Commit"), _etag(h.get("X-Linked-Etag") or h.get("ETag")),
                                     _int(h.get("X-Linked-Size")))
                    if r.status != 200:
                        raise self._refused(r.status, h, what)
                    return _Head(target, h.get("X-Repo-Commit"), _etag(h.get("X-Linked-Etag") or h.get("ETag")),
                                 _int(h.get("X-Linked-Size") or h.get("Content-Length")))
            raise HubError(f"{what}: more than {MAX_REDIRECTS} redirects")

        head: _Head = await self._retrying(call)
        return head

    async def download(self, repo: str, commit: str, file: RemoteFile, target: Path, *,
                       expect_sha256: str | None = None) -> str:
        """Fetch one file into ``target`` (resuming a ``.part`` left beside it) and return its sha256.

        Raises ChecksumMismatch, keeping nothing, when the bytes are not the ones the hub's listing,
        its headers or ``expect_sha256`` (the lock file's) name.
        """
        path = safe_repo_path(file.path)
        what = f"{repo}: {path}"
        url = f"{self.settings.endpoint}/datasets/{repo}/resolve/{commit}/{quote(path)}"
        head = await self._head(url, what)
        if head.commit and head.commit != commit:
            raise HubError(f"{what}: asked for commit {commit[:12]}, the hub served {head.commit[:12]}")
        size = file.size if file.size is not None else head.size
        sha256 = file.sha256 or (head.etag if head.etag and _HEX64.fullmatch(head.etag) else None)
        oid = file.git_oid or (head.etag if head.etag and _HEX40.fullmatch(head.etag) else None)
        if file.sha256 and head.etag and _HEX64.fullmatch(head.etag) and head.etag != file.sha256:
            raise HubError(f"{what}: the hub's listing and its file headers name different checksums")
        if expect_sha256 and ((sha256 and sha256 != expect_sha256) or (
                file.size is not None and head.size is not None and head.size != file.size)):
            raise ChecksumMismatch(self._changed(what, sha256 or f"{head.size:,} bytes", expect_sha256))
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.parent / f".{target.name}.part"
        for fresh in (False, True):  # a corrupted transfer is tried once more from nothing
            if fresh:
                _discard(part)
            await self._transfer(head.location, part, size, what)
            got = await asyncio.to_thread(file_sha256, part)
            problem = None
            if sha256 and got != sha256:
                problem = f"its sha256 is {got[:16]}…, the hub says {sha256[:16]}…"
            elif not sha256 and oid and await asyncio.to_thread(git_blob_id, part) != oid:
                problem = f"its git blob id is not the hub's {oid[:16]}…"
            if problem is None:
                break
        else:
            _discard(part)
            raise ChecksumMismatch(f"{what}: the downloaded file is corrupt ({problem}); nothing was kept")
        if expect_sha256 and got != expect_sha256:
            _discard(part)
            raise ChecksumMismatch(self._changed(what, got, expect_sha256))
        os.replace(part, target)
        return got

    @staticmethod
    def _changed(what: str, now: str, locked: str) -> str:
        now = f"sha256 {now[:16]}…" if _HEX64.fullmatch(now) else now
        return (f"{what}: the hub now serves bytes with {now}, but the lock file recorded sha256 {locked[:16]}…; "
                "refusing the changed file (pass --update to accept the hub's current files)")

    async def _transfer(self, url: str, part: Path, size: int | None, what: str) -> None:
        """Bring ``part`` to ``size`` bytes, resuming it with Range after each dropped connection."""
        last: BaseException | None = None
        stalled = 0
        while stalled < self.attempts:
            have = _size(part)
            if size is not None and have > size:
                _discard(part)
                have = 0
            if size is not None and have == size:
                return
            try:
                done = await self._get(url, part, have, what)
            except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientConnectorError,
                    aiohttp.ClientOSError, TimeoutError) as e:
                last, done = e, False
            except _Transient as e:
                last, done = e.cause, False
            if done:  # the server sent all it promised: the checksum says whether it is the file
                return
            now = _size(part)
            stalled = 0 if now > have else stalled + 1
            await asyncio.sleep(self.backoff_s * 2 ** min(stalled, 6) if stalled else 0)
        if isinstance(last, HubError):
            raise last
        if last is not None:
            raise self._unreachable(last) if isinstance(last, aiohttp.ClientConnectorError) else HubError(
                f"{what}: the download kept breaking off ({type(last).__name__}); run the command again to resume")
        raise HubError(f"{what}: the download kept ending short of {size:,} bytes; run the command again to resume")

    async def _get(self, url: str, part: Path, have: int, what: str) -> bool:
        """One GET from byte ``have``; True when the server sent the whole rest."""
        target = url
        for _ in range(MAX_REDIRECTS):
            headers = self._headers(target) | ({"Range": f"bytes={have}-"} if have else {})
            async with self.session.get(target, allow_redirects=False, headers=headers) as r:
                if 300 <= r.status < 400 and "Location" in r.headers:
                    target = urljoin(target, r.headers["Location"])
                    continue
                if r.status == 416:  # nothing after ``have``: the part is whole or wrong; start again
                    _discard(part)
                    return False
                if r.status in _RETRY_STATUS:
                    raise _Transient(HubError(f"{what}: the content host answered {r.status}"))
                if r.status not in (200, 206):
                    raise self._refused(r.status, r.headers, what)
                if r.status == 206 and not r.headers.get("Content-Range", "").startswith(f"bytes {have}-"):
                    raise HubError(f"{what}: the server resumed at the wrong byte ({r.headers.get('Content-Range')})")
                mode = "ab" if r.status == 206 else "wb"  # 200: the server ignored Range, the part starts over
                expected = r.content_length
                written = await _stream_to(part, mode, r.content)
                return expected is None or written == expected
        raise HubError(f"{what}: more than {MAX_REDIRECTS} redirects")


async def _stream_to(part: Path, mode: str, content: aiohttp.StreamReader) -> int:
    """Bytes from the socket appended to ``part`` (returns how many), a disk write overlapping the
    next read.

    The socket gives small pieces; they are written a few MB at a time, off the loop, while the
    next ones arrive (one write at a time: writing in line with reading halved the rate over
    loopback). Whatever arrived before a dropped connection is written, in order: it is the prefix
    a resume continues from. A failed write (a full disk) is raised.
    """
    f = await asyncio.to_thread(part.open, mode)
    inflight: asyncio.Future[int] | None = None
    pending: list[bytes] = []
    size = written = 0
    try:
        async for chunk in content.iter_any():
            pending.append(chunk)
            size += len(chunk)
            if size >= _WRITE_BATCH:
                if inflight is not None:
                    await inflight
                inflight = asyncio.ensure_future(asyncio.to_thread(f.write, b"".join(pending)))
                written, pending, size = written + size, [], 0
    finally:
        try:
            if inflight is not None:
                await inflight
            if pending:
                await asyncio.to_thread(f.write, b"".join(pending))
                written += size
        finally:
            await asyncio.to_thread(f.close)
    return written


class _Transient(Exception):
    """A reply worth asking again (5xx, 429); ``cause`` is what to raise if it never clears."""

    def __init__(self, cause: HubError) -> None:
        super().__init__(str(cause))
        self.cause = cause
