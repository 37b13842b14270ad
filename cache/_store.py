"""The synchronous SQLite layer: schema, connections, value codec, corruption recovery.

Everything here blocks, so the async ``Cache`` only calls it from its dedicated threads (or the CLI,
which has no event loop). WAL mode plus ``busy_timeout`` lets several processes on one machine share
one file; lm-eval #2306 corrupted its cache by letting concurrent processes write without them.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
import zstandard

log = logging.getLogger("fasteval.cache")

CacheValue = bytes | str | dict[str, Any]
"""What the cache stores and returns: raw bytes, text, or a JSON object."""

KIND_BYTES, KIND_STR, KIND_JSON = 0, 1, 2
CODEC_RAW, CODEC_ZSTD = 0, 1
BUSY_TIMEOUT_MS = 30_000
QUICK_CHECK_MAX_BYTES = 512 * 1024 * 1024
"""Above this size the full quick_check at open costs seconds; we rely on the header/schema probe."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    kind INTEGER NOT NULL,
    codec INTEGER NOT NULL,
    size INTEGER NOT NULL,
    created REAL NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_created ON entries (created);
CREATE TABLE IF NOT EXISTS counters (
    namespace TEXT PRIMARY KEY,
    hits INTEGER NOT NULL DEFAULT 0,
    misses INTEGER NOT NULL DEFAULT 0
);
"""


class EmptyValueError(ValueError):
    """Raised by ``put``: empty outputs are never cached, so a retry can still produce a real one."""


@dataclass(slots=True, frozen=True)
class Encoded:
    """A value as stored: its kind (bytes/str/json) and uncompressed bytes."""

    kind: int
    data: bytes


def encode_value(value: CacheValue) -> Encoded:
    """Serialise a value; refuse empty ones (an empty answer is a failure, not a result)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        enc = Encoded(KIND_BYTES, bytes(value))
    elif isinstance(value, str):
        if not value.strip():
            raise EmptyValueError("refusing to cache an empty or blank string")
        enc = Encoded(KIND_STR, value.encode())
    elif isinstance(value, dict):
        if not value:
            raise EmptyValueError("refusing to cache an empty dict")
        enc = Encoded(KIND_JSON, orjson.dumps(value))
    else:
        raise TypeError(f"cache values are bytes, str or dict, not {type(value).__name__}")
    if not enc.data:
        raise EmptyValueError("refusing to cache an empty value")
    return enc


def decode_value(kind: int, data: bytes) -> CacheValue:
    """Inverse of ``encode_value``; returns a fresh object each time so callers may mutate it."""
    if kind == KIND_BYTES:
        return data
    if kind == KIND_STR:
        return data.decode()
    value = orjson.loads(data)
    if not isinstance(value, dict):
        raise ValueError("stored JSON value is not an object")
    return value


def default_cache_path() -> Path:
    """``$FASTEVAL_CACHE_DIR/cache.sqlite`` or ``~/.cache/fasteval/cache.sqlite``: shared across runs."""
    base = os.environ.get("FASTEVAL_CACHE_DIR")
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "fasteval"
    return root / "cache.sqlite"


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection tuned for a shared cache: WAL, NORMAL sync, long busy timeout, autocommit."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if not readonly:
        conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL survives process crashes; losing the last commits on power loss is fine for a cache.
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _check(path: Path) -> str | None:
    """Return a description of what is wrong with the file, or None if it is a usable cache."""
    try:
        conn = connect(path)
        try:
            conn.executescript(_SCHEMA)
            conn.execute("SELECT count(*) FROM entries WHERE namespace = ''").fetchone()
            if path.stat().st_size <= QUICK_CHECK_MAX_BYTES:
                rows = conn.execute("PRAGMA quick_check").fetchall()
                if [r[0] for r in rows] != ["ok"]:
                    return "quick_check: " + "; ".join(str(r[0]) for r in rows[:5])
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _move_aside(path: Path, reason: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    dest = path.with_name(f"{path.name}.corrupt-{stamp}")
    path.replace(dest)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.replace(dest.with_name(dest.name + suffix))
    log.warning("cache database %s is unusable (%s); moved it to %s and started a fresh cache",
                path, reason, dest)
    return dest


def prepare(path: Path) -> Path | None:
    """Create or verify the database at ``path``; a corrupt file is moved aside and replaced.

    Returns where a corrupt file was moved, if one was. Never raises on a corrupt file: a damaged
    cache must cost a cold run, not a crashed one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    reason = _check(path)
    if reason is None:
        return None
    moved = _move_aside(path, reason)
    again = _check(path)
    if again is not None:
        raise sqlite3.DatabaseError(f"cannot create a fresh cache at {path}: {again}")
    return moved


class Codec:
    """Compression above a size threshold; one per thread because zstd contexts are not thread-safe."""

    def __init__(self, threshold: int, level: int = 3) -> None:
        self.threshold = threshold
        self._c = zstandard.ZstdCompressor(level=level)
        self._d = zstandard.ZstdDecompressor()

    def pack(self, enc: Encoded) -> tuple[int, bytes]:
        if len(enc.data) >= self.threshold:
            packed = self._c.compress(enc.data)
            if len(packed) < len(enc.data):
                return CODEC_ZSTD, packed
        return CODEC_RAW, enc.data

    def unpack(self, codec: int, blob: bytes) -> bytes:
        return self._d.decompress(blob) if codec == CODEC_ZSTD else blob


Row = tuple[str, str, int, int, int, float, bytes]
"""(namespace, key, kind, codec, size, created, value) exactly as stored."""

PutRow = tuple[str, str, Encoded]
Lookup = tuple[str, str]


def write_rows(conn: sqlite3.Connection, codec: Codec, rows: list[PutRow]) -> None:
    """Insert a batch in one IMMEDIATE transaction (one lock acquisition, one WAL sync)."""
    now = time.time()
    packed = []
    for ns, key, enc in rows:
        c, blob = codec.pack(enc)
        packed.append((ns, key, enc.kind, c, len(enc.data), now, blob))
    insert_raw(conn, packed)


def insert_raw(conn: sqlite3.Connection, rows: list[Row], *, overwrite: bool = True) -> None:
    """Insert stored rows as they are (used by puts and by import)."""
    verb = "INSERT OR REPLACE" if overwrite else "INSERT OR IGNORE"
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(f"{verb} INTO entries (namespace, key, kind, codec, size, created, value) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def read_rows(conn: sqlite3.Connection, codec: Codec, lookups: list[Lookup]) -> dict[Lookup, Encoded]:
    """Fetch many keys with a few IN queries instead of one round trip each."""
    by_ns: dict[str, list[str]] = {}
    for ns, key in lookups:
        by_ns.setdefault(ns, []).append(key)
    found: dict[Lookup, Encoded] = {}
    for ns, keys in by_ns.items():
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 500):  # stay well under SQLITE_MAX_VARIABLE_NUMBER
            chunk = uniq[i:i + 500]
            marks = ",".join("?" * len(chunk))
            cur = conn.execute(f"SELECT key, kind, codec, value FROM entries WHERE namespace = ? "
                               f"AND key IN ({marks})", [ns, *chunk])
            for key, kind, c, blob in cur:
                found[(ns, key)] = Encoded(kind, codec.unpack(c, blob))
    return found


def add_counters(conn: sqlite3.Connection, counts: dict[str, tuple[int, int]]) -> None:
    """Fold this process's hit/miss counts into the lifetime counters shown by ``cache stats``."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(
            "INSERT INTO counters (namespace, hits, misses) VALUES (?, ?, ?) ON CONFLICT(namespace) "
            "DO UPDATE SET hits = hits + excluded.hits, misses = misses + excluded.misses",
            [(ns, h, m) for ns, (h, m) in counts.items() if h or m])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


@dataclass(slots=True)
class NamespaceStats:
    """Size of one namespace on disk and its hit/miss counts (this process or lifetime)."""

    namespace: str
    entries: int = 0
    stored_bytes: int = 0
    raw_bytes: int = 0
    hits: int = 0
    misses: int = 0

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None


def db_stats(conn: sqlite3.Connection, scope: Literal["lifetime", "none"] = "lifetime"
             ) -> dict[str, NamespaceStats]:
    """Per-namespace entry counts and sizes, plus lifetime counters when ``scope`` asks for them."""
    out: dict[str, NamespaceStats] = {}
    for ns, n, stored, raw in conn.execute(
            "SELECT namespace, count(*), sum(length(value)), sum(size) FROM entries GROUP BY namespace"):
        out[ns] = NamespaceStats(ns, n, stored or 0, raw or 0)
    if scope == "lifetime":
        for ns, hits, misses in conn.execute("SELECT namespace, hits, misses FROM counters"):
            st = out.setdefault(ns, NamespaceStats(ns))
            st.hits, st.misses = hits, misses
    return out
