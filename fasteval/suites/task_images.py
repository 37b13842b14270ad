"""A dataset's image values as blob references: paths, URLs, data URLs, base64, or the hub's
``Image`` feature (``{"bytes", "path"}``, as a Parquet export stores it).

Every image goes into the run folder's blob store once (the suites' lazy image path: a task holds
hashes, and bytes are encoded per request through the bounded encoder). A path must stay inside
the dataset's folder, or a folder the suite option ``allow_image_root`` names; a hub dataset's
path is fetched from the same commit. Rows that name a file a recent row named cost one ``stat``.
What cannot become an image raises ValueError with the reason, which becomes that row's error.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.row_checks import PathOutsideRoot, confine, type_name

_RECENT_IMAGES = 8
_PATH_MEMO = 4096
MAX_PATH = 4096
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s_-]+")
_MAGIC = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM", b"II*\x00", b"MM\x00*", b"RIFF")
"""Image formats a bare base64 string is recognised by (PNG, JPEG, GIF, BMP, TIFF, WebP)."""


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class ImageReader:
    """Turns image values into blob refs for one dataset.

    ``urls`` fetches an http(s) URL (None: URLs are refused); ``repo_file`` finds a path in a hub
    dataset (the data file's repository path and the name; None when it is not there).
    """

    def __init__(self, blobs: BlobStore, roots: tuple[Path, ...], *, urls: Callable[[str], bytes] | None = None,
                 repo_file: Callable[[str, str], Path | None] | None = None) -> None:
        self.blobs = blobs
        self.roots = roots
        self.urls = urls
        self.repo_file = repo_file
        self._recent: OrderedDict[tuple[int, bytes, bytes], tuple[bytes, str]] = OrderedDict()
        self._by_path: OrderedDict[tuple[Path, str], tuple[Path, tuple[int, int, int, int], str]] = OrderedDict()

    def refs(self, value: Any, base: Path, repo_path: str | None, field: str) -> list[str]:
        """Refs of an image field holding one image or a list of them (None and "" hold none)."""
        if value is None or value == "":
            return []
        items = value if isinstance(value, list) else [value]
        return [self.ref(item, base, repo_path, f"{field}[{i}]" if isinstance(value, list) else field)
                for i, item in enumerate(items)]

    def ref(self, value: Any, base: Path, repo_path: str | None, field: str) -> str:
        """The blob ref of one image value; ValueError naming ``field`` and the reason."""
        if isinstance(value, str) and repo_path is None:
            hit = self._remembered(base, value)
            if hit is not None:
                return hit
        try:
            return self._put(self._bytes(value, base, repo_path))
        except _FileRef as f:
            return self._file_ref(base, f.name, field)
        except _Unreadable as e:
            raise ValueError(f"'{field}': {e}") from None

    def _bytes(self, value: Any, base: Path, repo_path: str | None) -> bytes:
        if isinstance(value, dict):  # the hub's Image feature
            data, path = value.get("bytes"), value.get("path")
            if data:
                return bytes(data) if isinstance(data, bytes | bytearray) else self._bytes(data, base, repo_path)
            if isinstance(path, str) and path:
                return self._bytes(path, base, repo_path)
            raise _Unreadable("an image object with neither bytes nor a path")
        if isinstance(value, bytes | bytearray):
            if not value:
                raise _Unreadable("empty image bytes")
            return bytes(value)
        if not isinstance(value, str) or not value.strip():
            raise _Unreadable(f"expected a path, URL, base64 text or image object, got {type_name(value)}")
        text = value.strip()
        if text.startswith("data:"):
            return _data_url(text)
        if text.startswith(("http://", "https://")):
            if self.urls is None:
                raise _Unreadable("image URLs are not fetched here")
            try:
                return self.urls(text)
            except ValueError as e:
                raise _Unreadable(f"{text[:120]!r} cannot be fetched ({e})") from None
        if len(text) <= MAX_PATH and "\n" not in text:
            if repo_path is not None and self.repo_file is not None:
                try:
                    local = self.repo_file(repo_path, text)
                except ValueError as e:
                    raise _Unreadable(f"{text[:120]!r}: {e}") from None
                if local is not None:
                    return local.read_bytes()
            if repo_path is None and (base / text).exists() or not _looks_base64(text):
                raise _FileRef(text)
        return _base64_image(text)

    def _remembered(self, base: Path, name: str) -> str | None:
        """The ref of a file a recent row named, if it is unchanged: one stat, no resolve, read or hash."""
        key = (base, name)
        hit = self._by_path.get(key)
        if hit is None:
            return None
        resolved, ident, ref = hit
        try:
            if _identity(os.stat(resolved)) == ident:
                self._by_path.move_to_end(key)
                return ref
        except OSError:
            pass  # gone or changed since: resolve and read it again, which reports why
        return None

    def _file_ref(self, base: Path, name: str, field: str) -> str:
        """A file's ref (remembered for the rows after it)."""
        key = (base, name)
        hit = self._remembered(base, name)
        if hit is not None:
            return hit
        try:
            resolved = confine(base / name, self.roots)
        except PathOutsideRoot as e:
            raise ValueError(f"'{field}': {e}") from None
        try:
            with resolved.open("rb") as f:
                ident = _identity(os.fstat(f.fileno()))
                data = f.read()
        except OSError as e:
            raise ValueError(f"'{field}' {name[:200]!r} cannot be read ({e.strerror or type(e).__name__})") from None
        ref = self._put(data)  # a failure here is the run folder's disk, not the row's
        self._by_path[key] = (resolved, ident, ref)
        if len(self._by_path) > _PATH_MEMO:
            self._by_path.popitem(last=False)
        return ref

    def _put(self, data: bytes) -> str:
        """Store bytes, skipping the hash and the write when a recent row had the same image."""
        key = (len(data), data[:256], data[-256:])
        hit = self._recent.get(key)
        if hit is not None and hit[0] == data:
            return hit[1]
        ref = self.blobs.put(data)
        self._recent[key] = (data, ref)
        if len(self._recent) > _RECENT_IMAGES:
            self._recent.popitem(last=False)
        return ref


class _FileRef(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Unreadable(Exception):
    pass


def _looks_base64(text: str) -> bool:
    return len(text) >= 64 and _BASE64.fullmatch(text[:4096]) is not None


def _data_url(text: str) -> bytes:
    head, sep, payload = text.partition(",")
    if not sep or not head.endswith(";base64"):
        raise _Unreadable("a data URL must be base64 (data:image/png;base64,...)")
    return _decode(payload)


def _decode(payload: str) -> bytes:
    try:
        data = base64.b64decode("".join(payload.split()) + "==", altchars=b"-_" if "-" in payload or "_" in payload
                                else None)
    except (binascii.Error, ValueError):
        raise _Unreadable("not valid base64") from None
    if not data:
        raise _Unreadable("empty image data")
    return data


def _base64_image(text: str) -> bytes:
    data = _decode(text)
    if not data.startswith(_MAGIC):
        raise _Unreadable(f"{text[:60]!r} is neither a file here nor base64 of an image")
    return data
