"""The resume set: which job keys a run folder already holds, as one sorted array, not a set of strings.

Deciding what is left of a 10^6-job plan must not load 10^6 rows into Python. The run index keeps,
beside its rows, the keys of its counted jobs as a sorted array of 128-bit values with a state byte
each (``done_blob``, 17 bytes a job), written when it last *folded* the changes since. Every change
after that is found without a trigger on the hot path: a new or rerun job's row holds the byte
offset of its record, and every line before the fold's watermark (the index's contiguous offset
then) was already in the array, so the rows at or past the watermark are the changes. The rare
change that comes without a new line (a row deleted, or one that stops being counted) is logged by
a trigger into ``done_log``. Loading is one read of the array, of those rows and of the log; the
plan's keys are then looked up in blocks with one vectorised binary search
(``DoneKeys.contains_many``). When the changes are many, the loader folds them into a new array.

A key is any lowercase hex string (the job id today; a job fingerprint tomorrow): its first 30
digits (120 bits) and its length make the 128-bit value, so keys of different lengths never
collide, and a key that is not lowercase hex (a hand-written record's) is left out: no planned key
can equal it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fasteval.runfolder.index_aggregates import COUNTED

if TYPE_CHECKING:
    import numpy as np

KEY_COLUMN = "job_id"
"""The column of ``jobs`` resume matches planned keys against (one line to change for fingerprints;
that column then needs an index of its own for the logged keys' lookups)."""

ABSENT, ERRORED, OK = 0, 1, 2
"""A key's state: no counted row, a counted row that is not ok, an ok row."""

_HEX = re.compile(r"[0-9a-f]+")
_DIGITS = 30
_PART = 8 << 20
_FOLD_MIN = 4096

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS done_log(seq INTEGER PRIMARY KEY, key TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS done_blob(part INTEGER PRIMARY KEY, data BLOB NOT NULL)",
)
TRIGGERS = ("jobs_done_delete", "jobs_done_update")


def _state(r: str) -> str:
    return f"CASE WHEN NOT ({COUNTED.format(r=r)}) THEN {ABSENT} WHEN {r}.ok = 1 THEN {OK} ELSE {ERRORED} END"


def trigger_sql() -> list[str]:
    """Log the changes no new record line brings: a row gone, a row whose state or key changed in place."""
    k = KEY_COLUMN
    return [
        f"CREATE TRIGGER IF NOT EXISTS jobs_done_delete AFTER DELETE ON jobs BEGIN "
        f"INSERT INTO done_log(key) VALUES(OLD.{k}); END",
        f"CREATE TRIGGER IF NOT EXISTS jobs_done_update AFTER UPDATE ON jobs "
        f"WHEN OLD.{k} IS NOT NEW.{k} OR (OLD.byte_offset IS NEW.byte_offset AND {_state('OLD')} != {_state('NEW')}) "
        f"BEGIN INSERT INTO done_log(key) VALUES(OLD.{k}); END",
    ]


def key_bytes(key: str) -> bytes | None:
    """The 16 bytes a hex key is stored as (None: not a lowercase hex key)."""
    if not isinstance(key, str) or not _HEX.fullmatch(key):
        return None
    return bytes.fromhex(key[:_DIGITS].ljust(_DIGITS, "0")) + bytes((min(len(key), 255),))


class DoneKeys:
    """A sorted array of keys with their states; ``contains_many`` answers a block of keys at once.

    Look-ups go through buckets on the keys' top bits (about one key per bucket: keys are hashes),
    so a block of keys costs a few vectorised passes over short buckets, not a binary search each
    (three times faster at 10^6 keys: a binary search misses the cache at every step).
    """

    __slots__ = ("_hi", "_lo", "_state", "_min_state", "_n", "_shift", "_starts", "_widest")

    def __init__(self, hi: np.ndarray, lo: np.ndarray, state: np.ndarray, ok_only: bool = True) -> None:
        import numpy as np

        self._hi, self._lo, self._state = hi, lo, state
        self._min_state = OK if ok_only else ERRORED
        self._n = int(np.count_nonzero(state >= self._min_state))
        self._starts: np.ndarray | None = None  # the buckets, made at the first look-up
        self._shift = np.uint64(64 - min(22, max(1, int(len(hi)).bit_length())))
        self._widest = 0

    def _buckets(self) -> np.ndarray:
        """Where each bucket of the top bits starts (about one key per bucket: keys are hashes)."""
        import numpy as np

        if self._starts is None:
            bits = 64 - int(self._shift)
            top = (self._hi >> self._shift).astype(np.int64)
            self._starts = np.searchsorted(top, np.arange((1 << bits) + 1, dtype=np.int64)).astype(np.int64)
            self._widest = int(np.diff(self._starts).max()) if len(self._hi) else 0
        return self._starts

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self.contains_many([key])[0])

    def contains_many(self, keys: Sequence[str]) -> np.ndarray:
        """A boolean per key: is it done (ok; or any counted row when built with ``ok_only=False``)?"""
        return self._lookup(*_split(keys))

    def contains_keys(self, raw: bytes, width: int) -> np.ndarray:
        """``contains_many`` of keys given as raw bytes end to end, ``width`` bytes each (their hex
        is the key): a plan's block of job ids, never turned into text."""
        import numpy as np

        n = len(raw) // width
        if not 0 < width <= _DIGITS // 2 or len(raw) != n * width:
            return self.contains_many([raw[i * width:(i + 1) * width].hex() for i in range(n)])
        buf = np.zeros((n, 16), dtype=np.uint8)
        buf[:, :width] = np.frombuffer(raw, dtype=np.uint8).reshape(n, width)
        buf[:, 15] = 2 * width
        return self._lookup(*_halves(buf))

    def _lookup(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        import numpy as np

        found = np.zeros(len(hi), dtype=bool)
        if not len(self._hi) or not len(hi):
            return found
        starts = self._buckets()
        bucket = (hi >> self._shift).astype(np.int64)
        pos, end = starts[bucket], starts[bucket + 1]
        at = np.zeros(len(hi), dtype=np.int64)
        last = len(self._hi) - 1
        for _ in range(self._widest):  # every key of a bucket is compared whole: exact
            live = pos < end
            if not live.any():
                break
            idx = np.minimum(pos, last)
            hit = live & (self._hi[idx] == hi) & (self._lo[idx] == lo)
            found |= hit
            at[hit] = idx[hit]
            pos += 1
        done: np.ndarray = found & (self._state[at] >= self._min_state)
        return done


def _split(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Keys as (high, low) 64-bit halves of their 16-byte form; vectorised when all share one length."""
    import numpy as np

    n = len(keys)
    widths = set(map(len, keys))
    width = widths.pop() if len(widths) == 1 else 0
    digits = min(width, _DIGITS)
    if digits and digits % 2 == 0:
        joined = "".join(keys) if width == digits else "".join(k[:digits] for k in keys)
        try:
            # fromhex refuses anything but hex digits; an upper-case digit is not one of our keys
            raw = bytes.fromhex(joined) if joined == joined.lower() else None
        except ValueError:
            raw = None
        if raw is not None:
            buf = np.zeros((n, 16), dtype=np.uint8)
            buf[:, : digits // 2] = np.frombuffer(raw, dtype=np.uint8).reshape(n, digits // 2)
            buf[:, 15] = min(width, 255)
            return _halves(buf)
    buf = np.zeros((n, 16), dtype=np.uint8)
    for i, k in enumerate(keys):
        b = key_bytes(k)
        # Not a key any row can have: all ones, with a length byte no stored key has (0).
        buf[i] = np.frombuffer(b if b is not None else b"\xff" * 15 + b"\x00", dtype=np.uint8)
    return _halves(buf)


def _halves(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    pairs = buf.view(">u8").reshape(-1, 2)
    return pairs[:, 0].astype(np.uint64), pairs[:, 1].astype(np.uint64)


# ---- kept in the index ---------------------------------------------------------------------

def _encode(hi: np.ndarray, lo: np.ndarray, state: np.ndarray) -> bytes:
    import numpy as np

    return hi.astype(">u8").tobytes() + lo.astype(">u8").tobytes() + state.astype(np.uint8).tobytes()


def _decode(data: bytes, n: int) -> _Arrays:
    import numpy as np

    if len(data) != 17 * n:
        raise ValueError(f"done keys: {len(data)} bytes for {n} keys")
    hi = np.frombuffer(data, dtype=">u8", count=n).astype(np.uint64)
    lo = np.frombuffer(data, dtype=">u8", count=n, offset=8 * n).astype(np.uint64)
    state = np.frombuffer(data, dtype=np.uint8, count=n, offset=16 * n)
    return hi, lo, state


_Arrays = tuple["np.ndarray", "np.ndarray", "np.ndarray"]
_FETCH = 65536


def _empty() -> _Arrays:
    import numpy as np

    return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint8)


def _fetch(cursor: sqlite3.Cursor) -> _Arrays:
    """(key, state) rows as arrays, a chunk at a time (vectorised for keys of one length); rows whose
    key is not lowercase hex are left out (no planned key can equal them)."""
    import numpy as np

    parts = [_empty()]
    while rows := cursor.fetchmany(_FETCH):
        hi, lo = _split([str(k) for k, _ in rows])
        state = np.fromiter((st for _, st in rows), dtype=np.uint8, count=len(rows))
        valid = (lo & np.uint64(0xFF)) != 0  # the length byte: 0 marks a key that is not one
        parts.append((hi[valid], lo[valid], state[valid]))
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]))


def _merge(base: _Arrays, changes: _Arrays) -> _Arrays:
    """``base`` with the changes' states applied (the last of equal keys wins; ABSENT leaves), sorted."""
    import numpy as np

    hi, lo, state = base
    if len(changes[0]):
        hi, lo, state = (np.concatenate([hi, changes[0]]), np.concatenate([lo, changes[1]]),
                         np.concatenate([state, changes[2]]))
        order = np.lexsort((np.arange(len(hi)), lo, hi))  # by key, then by position: changes last
        hi, lo, state = hi[order], lo[order], state[order]
        last = np.ones(len(hi), dtype=bool)
        last[:-1] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
        keep = last & (state != ABSENT)
        hi, lo, state = hi[keep], lo[keep], state[keep]
    return hi, lo, np.ascontiguousarray(state, dtype=np.uint8)


def _changes(db: sqlite3.Connection, since: int, seq: int) -> _Arrays:
    """Each key that may have changed since the fold, with its state now."""
    import numpy as np

    k, state = KEY_COLUMN, _state("jobs")
    found = [_fetch(db.execute(f"SELECT {k}, {state} FROM jobs WHERE byte_offset >= ?", (since,)))]
    keys = [key for (key,) in db.execute("SELECT DISTINCT key FROM done_log WHERE seq > ?", (seq,))]
    for i in range(0, len(keys), 500):
        part = keys[i:i + 500]
        now = dict(db.execute(f"SELECT {k}, {state} FROM jobs WHERE {k} IN ({', '.join('?' * len(part))})", part))
        found.append(_fetch(db.execute("SELECT column1, column2 FROM (VALUES " + ", ".join("(?, ?)" for _ in part)
                                       + ")", [v for key in part for v in (key, int(now.get(key, ABSENT)))])))
    return (np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]),
            np.concatenate([f[2] for f in found]))


def load(db: sqlite3.Connection, meta: dict[str, str]) -> tuple[_Arrays, int]:
    """The stored array with every change since applied; also how many changes there were."""
    if "done_offset" not in meta:
        raise ValueError("done keys: never folded")
    n = int(meta.get("done_n", 0))
    data = b"".join(bytes(r[0]) for r in db.execute("SELECT data FROM done_blob ORDER BY part"))
    base = _decode(data, n) if n else _empty()
    changes = _changes(db, int(meta["done_offset"]), int(meta.get("done_seq", 0)))
    return _merge(base, changes), len(changes[0])


def store(db: sqlite3.Connection, arrays: _Arrays) -> dict[str, Any]:
    """Write ``arrays`` as the folded array, up to the index's offset now (in the caller's transaction)."""
    data = _encode(*arrays)
    db.execute("DELETE FROM done_blob")
    db.executemany("INSERT INTO done_blob(part, data) VALUES(?, ?)",
                   ((i // _PART, data[i:i + _PART]) for i in range(0, len(data), _PART)))
    offset = db.execute("SELECT value FROM meta WHERE key = 'offset'").fetchone()
    seq = db.execute("SELECT coalesce(max(seq), 0) FROM done_log").fetchone()[0]
    db.execute("DELETE FROM done_log WHERE seq <= ?", (seq,))
    return {"done_n": len(arrays[0]), "done_seq": seq, "done_offset": int(offset[0]) if offset else 0}


def rebuild(db: sqlite3.Connection) -> dict[str, Any]:
    """The array from the rows themselves (a build from scratch, or an array that does not read)."""
    import numpy as np

    state = _state("jobs")
    hi, lo, states = _fetch(db.execute(f"SELECT {KEY_COLUMN}, {state} FROM jobs WHERE {state} != {ABSENT}"))
    order = np.lexsort((states, lo, hi))  # two rows of one key (never for job ids): the better state wins
    return store(db, _merge(_empty(), (hi[order], lo[order], states[order])))


def forget(db: sqlite3.Connection) -> None:
    """Drop the array (in the caller's transaction): the first resume makes it again from the rows.

    A build from scratch leaves it to that resume rather than making it at once: the readers that
    build an index (``status``, ``report`` of a copied or older run folder) never need it, nor numpy.
    """
    db.execute("DELETE FROM done_blob")
    db.execute("DELETE FROM done_log")
    db.execute("DELETE FROM meta WHERE key IN ('done_n', 'done_seq', 'done_offset')")


def worth_folding(n_keys: int, n_log: int) -> bool:
    """Fold the log into the array once it is long enough to cost more than rewriting the array."""
    return n_log >= _FOLD_MIN and n_log * 16 >= n_keys


def _meta(db: sqlite3.Connection) -> dict[str, str]:
    return dict(db.execute("SELECT key, value FROM meta WHERE key IN ('done_n', 'done_seq', 'done_offset')").fetchall())


def _set(db: sqlite3.Connection, values: dict[str, Any]) -> None:
    db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", [(k, str(v)) for k, v in values.items()])


def read(db: sqlite3.Connection, *, ok_only: bool = True) -> DoneKeys:
    """The resume set as it stands; many changes since the last fold are folded into a new array.

    The array and the changes are read in one read transaction (one state of the index, even while
    the sweep's writer commits); folding takes the write lock and re-reads under it.
    """
    db.execute("BEGIN")
    try:
        try:
            arrays: _Arrays | None
            arrays, n_changes = load(db, _meta(db))
        except ValueError:  # never folded, or an array that does not read: made again from the rows
            arrays, n_changes = None, 0
    finally:
        db.execute("COMMIT")
    if arrays is not None and not worth_folding(len(arrays[0]), n_changes):
        return DoneKeys(*arrays, ok_only=ok_only)
    db.execute("BEGIN IMMEDIATE")
    try:
        try:
            arrays, _ = load(db, _meta(db))
            _set(db, store(db, arrays))
        except ValueError:
            _set(db, rebuild(db))
            arrays, _ = load(db, _meta(db))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return DoneKeys(*arrays, ok_only=ok_only)


def fold_if_worth(db: sqlite3.Connection) -> bool:
    """Fold the changes into a new array when they are many (a sweep's end): the next resume then
    reads the array alone. Counting them costs two index counts; True when it folded."""
    meta = _meta(db)
    if "done_offset" not in meta:  # never made (an index built from scratch): made now, once
        read(db)
        return True
    rows = db.execute("SELECT count(*) FROM jobs WHERE byte_offset >= ?", (int(meta["done_offset"]),)).fetchone()[0]
    logged = db.execute("SELECT count(*) FROM done_log WHERE seq > ?", (int(meta.get("done_seq", 0)),)).fetchone()[0]
    if not worth_folding(int(meta.get("done_n", 0)), rows + logged):
        return False
    read(db)
    return True


def union(parts: Sequence[DoneKeys]) -> _Arrays:
    """One array of several resume sets (a merge's sources; a key in several: its best state),
    sorted once, with no copy more than the sort needs (a merge of 10^6 jobs holds it at once)."""
    import numpy as np

    if not parts:
        return _empty()
    hi = np.concatenate([p._hi for p in parts])
    lo = np.concatenate([p._lo for p in parts])
    state = np.concatenate([p._state for p in parts])
    order = np.lexsort((state, lo, hi))
    hi, lo, state = hi[order], lo[order], state[order]
    del order
    last = np.ones(len(hi), dtype=bool)  # equal keys sit together, the best state last
    last[:-1] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
    return hi[last], lo[last], np.ascontiguousarray(state[last], dtype=np.uint8)
