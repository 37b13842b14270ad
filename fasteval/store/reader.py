"""Reading a results store: every segment's entries merged, one record per fingerprint.

A snapshot loads each segment's fixed-size entries (``segments.ENTRY``: 56 bytes a line, no
record parsed) and parses only the lines a killed writer left without one. Entries are merged in
store order (segments by name, lines by offset) and one wins per fingerprint: the first ok one,
else the first one; the same rule in every reader, so many readers agree without talking.
Matching a plan is one sort of the store and a binary search per fingerprint (numpy).

A winner's line is read (``record``) only when it is used, and checked then: the line must parse
and name the fingerprint its entry does, or it counts as absent (the job runs). A bad or partly
visible line on a network filesystem can cost a rerun, never a wrong result.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fasteval.core.errors import UsageError
from fasteval.runfolder.safe_open import open_nofollow, refuse_symlink
from fasteval.store.segments import ENTRY, MARKER, SEGMENTS, entry_of, is_fingerprint, parse_line

_TAIL_CHUNK = 1 << 20


class StoreError(RuntimeError, UsageError):
    """A folder that is not a results store, or one that cannot be read (the user can fix it: exit 2)."""


@dataclass(slots=True)
class Segment:
    name: str
    path: Path
    size: int
    sealed: bool
    mtime: float


def list_segments(root: Path) -> list[Segment]:
    """The store's segments in store order (by name); hidden files (a gc in progress) left out."""
    folder = root / SEGMENTS
    refuse_symlink(folder, "a store's segments")
    out = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".jsonl") and not n.startswith("."))
    except FileNotFoundError:
        return []
    for n in names:
        path = folder / n
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue  # compacted away since the listing
        out.append(Segment(n[:-6], path, st.st_size, path.with_suffix(".sealed").exists(), st.st_mtime))
    return out


def _entries(seg: Segment) -> np.ndarray:
    """A segment's entries: those its writer wrote (within the bytes we saw), then its unindexed tail."""
    fps = seg.path.with_suffix(".fps")
    try:
        fd = open_nofollow(fps, os.O_RDONLY, "a store segment")
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        data = b""
    n = len(data) // ENTRY.itemsize
    entries = np.frombuffer(data, dtype=ENTRY, count=n).copy() if n else np.zeros(0, dtype=ENTRY)
    # An entry past the bytes we saw (a network filesystem shows the entries first) waits for the next read.
    entries = entries[entries["offset"] + entries["length"] <= seg.size]
    covered = int((entries["offset"] + entries["length"]).max()) if len(entries) else 0
    if covered < seg.size:
        tail = list(_tail(seg, covered))
        if tail:
            entries = np.concatenate([entries, np.array(tail, dtype=ENTRY)])
    return entries


def _tail(seg: Segment, start: int) -> Iterator[np.void]:
    """Entries of the whole lines from ``start`` to the end we saw (a writer killed before indexing them)."""
    fd = open_nofollow(seg.path, os.O_RDONLY, "a store segment")
    with os.fdopen(fd, "rb") as f:
        f.seek(start)
        pos = start
        while pos < seg.size:
            line = f.readline(seg.size - pos)
            if not line.endswith(b"\n"):
                return  # a torn last line: its writer died in it
            doc = parse_line(line)
            if doc is not None:
                yield entry_of(doc["fingerprint"], doc["record"].get("components"), doc.get("status") == "ok",
                               pos, len(line))
            pos += len(line)


@dataclass(slots=True)
class StoreView:
    """One consistent reading of a store: the winner of every fingerprint, in store order."""

    root: Path
    segments: list[Segment]
    winners: np.ndarray
    """ENTRY rows of the winners, sorted by fingerprint (searchable)."""
    seg_of: np.ndarray
    """Each winner's segment (index into ``segments``)."""
    lines: int
    """Entries read (every copy, before dedupe)."""
    _split: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.winners)

    @property
    def ok(self) -> int:
        return int(self.winners["ok"].sum())

    def match(self, fingerprints: Sequence[str]) -> np.ndarray:
        """For each fingerprint (32 hex), the index of its ok winner, or -1 (no ok record here).

        A binary search on the fingerprints' first 8 bytes as integers (twice as fast as on 16-byte
        strings), confirmed on the other 8; the rare winners sharing a first half are walked.
        """
        n = len(self.winners)
        if not n or not fingerprints:
            return np.full(len(fingerprints), -1, dtype=np.int64)
        hi, lo = self._halves()
        q = np.frombuffer(bytes.fromhex("".join(fingerprints)), dtype=">u8").reshape(-1, 2).astype(np.uint64)
        at = np.searchsorted(hi, q[:, 0])
        at[at >= n] = n - 1
        same = hi[at] == q[:, 0]
        hit = same & (lo[at] == q[:, 1])
        for k in np.nonzero(same & ~hit)[0].tolist():  # first halves equal, second not: rare
            j = int(at[k]) + 1
            while j < n and hi[j] == q[k, 0]:
                if lo[j] == q[k, 1]:
                    at[k], hit[k] = j, True
                    break
                j += 1
        hit &= self.winners["ok"][at] == 1
        return np.where(hit, at, -1)

    def _halves(self) -> tuple[np.ndarray, np.ndarray]:
        """The winners' fingerprints as two integer arrays, in their (byte) order."""
        if self._split is None:
            both = np.frombuffer(self.winners["fp"].tobytes(), dtype=">u8").reshape(-1, 2).astype(np.uint64)
            self._split = (both[:, 0].copy(), both[:, 1].copy())
        return self._split

    def in_store_order(self) -> np.ndarray:
        """Winner indexes in store order (segment, offset): how ``ls`` and ``gc`` walk them."""
        return np.lexsort((self.winners["offset"], self.seg_of))

    def read(self, i: int) -> dict[str, Any] | None:
        """Winner ``i``'s envelope ({fingerprint, status, stored, record}), or None if its line is
        not (or no longer) the one its entry names."""
        e = self.winners[i]
        seg = self.segments[int(self.seg_of[i])]
        try:
            fd = open_nofollow(seg.path, os.O_RDONLY, "a store segment")
        except FileNotFoundError:
            return None  # compacted since this view was taken: the next view has it
        try:
            line = os.pread(fd, int(e["length"]), int(e["offset"]))
        finally:
            os.close(fd)
        doc = parse_line(line)
        # numpy drops an S16 value's trailing zero bytes when it is read out: pad them back
        if doc is None or doc["fingerprint"] != bytes(e["fp"]).ljust(16, b"\0").hex():
            return None
        return doc


def open_view(root: Path | str, *, segments: list[Segment] | None = None) -> StoreView:
    """A view of the store at ``root`` (every segment, or the ones given)."""
    root = Path(root)
    if not (root / MARKER).exists():
        raise StoreError(f"{root} is not a results store (no {MARKER}); `fasteval run` with store: {root} makes one")
    for _ in range(3):
        segs = list_segments(root) if segments is None else segments
        try:
            parts = [_entries(s) for s in segs]
            break
        except FileNotFoundError:
            if segments is not None:
                raise
            continue  # a gc replaced segments under us: list again
    else:
        raise StoreError(f"{root}: segments kept changing while being read (a gc running?); try again")
    counts = [len(p) for p in parts]
    allv = np.concatenate(parts) if parts else np.zeros(0, dtype=ENTRY)
    seg_of = np.repeat(np.arange(len(segs), dtype=np.int64), counts)
    # Store order is (segment, offset); a stable sort by (fingerprint, not ok) keeps it within
    # each fingerprint, so the first row of a run of equal fingerprints is the winner.
    order = np.argsort(1 - allv["ok"].astype(np.int8), kind="stable")
    order = order[np.argsort(allv["fp"][order], kind="stable")]
    fps = allv["fp"][order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = fps[1:] != fps[:-1]
    keep = order[first]
    return StoreView(root, segs, allv[keep], seg_of[keep], len(allv))


def fingerprints_valid(values: Sequence[str]) -> bool:
    return all(is_fingerprint(v) for v in values)
