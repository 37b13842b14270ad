"""A results store's files: segments of records, each written by one process only.

A store is a folder anyone may write at once (Slurm shards on many nodes, on NFS), so nothing in
it is ever written by two processes and nothing relies on a file lock:

    STORE/store.json                       what this folder is (format, version)
    STORE/segments/<name>.jsonl            one writer's records, one envelope per line, appended
    STORE/segments/<name>.fps              a fixed-size entry per line, appended after the line
    STORE/segments/<name>.sealed           its writer closed it (``gc`` may compact it)
    STORE/blobs/ab/ab…                     the images the records refer to, by sha256

A segment's name is unique per writer (UTC time, host, pid, random), so a restarted writer
never appends after a line its killed predecessor tore. An entry (``ENTRY``: fingerprint,
component fingerprints, offset, length, ok) lets a reader match a million fingerprints without
parsing a record; lines a writer wrote but could not index before it died are parsed on read.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from fasteval.runfolder.safe_open import open_nofollow

FORMAT = {"format": "fasteval-store", "version": 1}
SEGMENTS = "segments"
BLOBS = "blobs"
MARKER = "store.json"

ENTRY = np.dtype([("fp", "S16"), ("model", "S8"), ("suite", "S8"), ("setting", "S8"), ("offset", "<u8"),
                  ("length", "<u4"), ("ok", "u1"), ("pad", "V3")])
"""One line of a segment: its job fingerprint and component fingerprints (binary), where the line is."""
COMPONENTS_AT = 16
"""Where an entry's model, suite and setting fingerprints lie: 24 bytes (compared as bytes: numpy
drops an ``S`` value's trailing zero bytes when it is read out)."""

_HOST = re.compile(r"[^A-Za-z0-9.-]+")
_PREFIX = b'{"fingerprint":"'


def this_host() -> str:
    """This machine's name as segment names carry it."""
    return _HOST.sub("_", socket.gethostname())[:40] or "host"


def segment_name(now: float | None = None) -> str:
    """A name no other writer can have: time (to the microsecond), host, pid and 48 random bits;
    segments sort by when they were started, so "first wins" is roughly "oldest wins"."""
    t = now if now is not None else time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(t)) + f"{int(t * 1e6) % 1_000_000:06d}"
    return f"{stamp}-{this_host()}-{os.getpid()}-{secrets.token_hex(6)}"


def writer_of(name: str) -> tuple[str, int] | None:
    """(host, pid) of the writer a segment's name gives (None for a compacted one)."""
    parts = name.split("-")
    if len(parts) < 4 or not parts[-2].isdigit() or "~" in name:
        return None
    return "-".join(parts[1:-2]), int(parts[-2])


def envelope(fingerprint: str, ok: bool, stored: Mapping[str, Any], record_json: bytes) -> bytes:
    """One store line: the fingerprint first (readers check it), the provenance, the record as written."""
    return (_PREFIX + fingerprint.encode() + b'","status":"' + (b"ok" if ok else b"error") + b'","stored":'
            + orjson.dumps(stored) + b',"record":' + record_json.rstrip(b"\n") + b"}\n")


def _hex8(value: Any) -> bytes:
    if isinstance(value, str) and len(value) == 16:
        try:
            return bytes.fromhex(value)
        except ValueError:
            pass
    return b"\0" * 8


def entry_of(fingerprint: str, components: Any, ok: bool, offset: int, length: int) -> np.void:
    """The entry of a line (``ENTRY``); components a record's ``components`` mapping."""
    comp = components if isinstance(components, Mapping) else {}
    out = np.zeros(1, dtype=ENTRY)
    out["fp"] = bytes.fromhex(fingerprint)
    out["model"], out["suite"], out["setting"] = (_hex8(comp.get(k)) for k in ("model", "suite", "setting"))
    out["offset"], out["length"], out["ok"] = offset, length, int(ok)
    entry: np.void = out[0]
    return entry


def parse_line(line: bytes) -> dict[str, Any] | None:
    """A store line's envelope, or None for a line that is not one (torn, foreign, hand-edited)."""
    if not line.startswith(_PREFIX) or not line.endswith(b"\n"):
        return None
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("record"), dict) or not is_fingerprint(doc.get("fingerprint")):
        return None
    return doc


def is_fingerprint(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class SegmentWriter:
    """Appends store lines and their entries to a segment of its own (one process, one thread).

    Each batch: the lines (one ``write`` each), fsync, then their entries: an entry never points at
    bytes that a crash could lose. A failed write cuts the segment back to its last whole line.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written = 0
        self._open()

    def _open(self) -> None:
        seg = self.root / SEGMENTS
        seg.mkdir(parents=True, exist_ok=True)
        self.name = segment_name()
        self.path = seg / f"{self.name}.jsonl"
        self._fd = open_nofollow(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, "a store segment")
        self._fps = open_nofollow(seg / f"{self.name}.fps", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL,
                                  "a store segment")
        self._size = 0

    def write(self, lines: list[tuple[bytes, np.void]]) -> None:
        """Append ``(line, entry)`` pairs (the entry's offset and length are filled in here)."""
        if not lines:
            return
        if not self.path.exists():
            # a gc took this segment for abandoned (a run idle past --stale-hours, waiting on its
            # batches): what it held is compacted; what comes now goes into a segment of its own
            for fd in (self._fd, self._fps):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._open()
        entries = np.zeros(len(lines), dtype=ENTRY)
        start = self._size
        try:
            for i, (line, entry) in enumerate(lines):
                _write_all(self._fd, line)
                entries[i] = entry
                entries["offset"][i], entries["length"][i] = self._size, len(line)
                self._size += len(line)
            os.fsync(self._fd)
        except OSError:
            self._size = start
            try:
                os.ftruncate(self._fd, start)
            except OSError:
                pass  # readers skip a torn last line; nothing indexes it
            raise
        # Entries cover a prefix of the lines: after a failure here the caller stops writing this
        # segment, and readers parse the lines past the last entry.
        _write_all(self._fps, entries.tobytes())
        self.written += len(lines)

    def close(self) -> None:
        """Close and seal the segment (``gc`` may then compact it)."""
        for fd in (self._fd, self._fps):
            try:
                os.close(fd)
            except OSError:
                pass
        self._fd = self._fps = -1
        seal = self.path.with_suffix(".sealed")
        try:
            os.close(open_nofollow(seal, os.O_WRONLY | os.O_CREAT, "a store segment"))
        except OSError:
            pass  # unsealed: gc treats it as abandoned once its writer is gone


def ensure_store(root: Path) -> None:
    """Create the store's folder and marker (racing creators agree: the content is the same)."""
    (root / SEGMENTS).mkdir(parents=True, exist_ok=True)
    (root / BLOBS).mkdir(parents=True, exist_ok=True)
    marker = root / MARKER
    if not marker.exists():
        tmp = root / f".{MARKER}.{secrets.token_hex(6)}"
        tmp.write_bytes(orjson.dumps(FORMAT))
        os.replace(tmp, marker)
