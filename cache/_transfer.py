"""Export, import, prune and stats over a cache file, synchronously (the CLI has no event loop).

Exports are JSONL: a header line, then one line per entry with the stored blob in base64, exactly as
stored (still zstd-compressed when it was), so an import reproduces values byte for byte. JSONL keeps
the file streamable, appendable and readable with ``head``, unlike a second SQLite file.
"""

from __future__ import annotations

import base64
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from cache._keys import SCHEMA_VERSION
from cache._store import (
    CODEC_RAW,
    CODEC_ZSTD,
    KIND_BYTES,
    KIND_JSON,
    NamespaceStats,
    Row,
    connect,
    db_stats,
    insert_raw,
    prepare,
)

EXPORT_FORMAT = "fasteval-cache-export"
EXPORT_VERSION = 1
KeyRef = tuple[str | None, str]
"""(namespace or None for any namespace, key)."""


def read_key_list(path: str | Path) -> list[KeyRef]:
    """Parse a ``cache_keys.txt``: ``<namespace> <key>`` or bare ``<key>`` per line; ``#`` comments."""
    refs: list[KeyRef] = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        refs.append((parts[0], parts[1]) if len(parts) >= 2 else (None, parts[0]))
    return refs


def _open(path: str | Path) -> sqlite3.Connection:
    p = Path(path).expanduser()
    prepare(p)
    return connect(p)


def _rows(conn: sqlite3.Connection, namespace: str | None, keys: Iterable[KeyRef] | None) -> Iterator[Row]:
    cols = "e.namespace, e.key, e.kind, e.codec, e.size, e.created, e.value"
    where, args = ("WHERE e.namespace = ?", [namespace]) if namespace else ("", [])
    if keys is None:
        yield from conn.execute(f"SELECT {cols} FROM entries e {where} ORDER BY e.namespace, e.key", args)
        return
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (namespace TEXT, key TEXT NOT NULL)")
    conn.execute("DELETE FROM wanted")
    conn.executemany("INSERT INTO wanted VALUES (?, ?)", list(keys))
    yield from conn.execute(
        f"SELECT DISTINCT {cols} FROM entries e JOIN wanted w ON e.key = w.key "
        f"AND (w.namespace IS NULL OR w.namespace = e.namespace) {where.replace('WHERE', 'AND')} "
        "ORDER BY e.namespace, e.key", args)


def export_cache(path: str | Path, out: str | Path, *, namespace: str | None = None,
                 keys: Iterable[KeyRef] | None = None) -> int:
    """Write entries (all, one namespace, and/or only ``keys``) to a JSONL file; returns the count."""
    conn = _open(path)
    n = 0
    try:
        with open(out, "wb") as f:
            header = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "schema_version": SCHEMA_VERSION,
                      "exported_at": time.time()}
            f.write(orjson.dumps(header) + b"\n")
            for ns, key, kind, codec, size, created, blob in _rows(conn, namespace, keys):
                f.write(orjson.dumps({"namespace": ns, "key": key, "kind": kind, "codec": codec,
                                      "size": size, "created": created,
                                      "value": base64.b64encode(blob).decode()}) + b"\n")
                n += 1
    finally:
        conn.close()
    return n


def _parse_line(raw: bytes, lineno: int) -> Row:
    d: dict[str, Any] = orjson.loads(raw)
    kind, codec = int(d["kind"]), int(d["codec"])
    if not KIND_BYTES <= kind <= KIND_JSON or codec not in (CODEC_RAW, CODEC_ZSTD):
        raise ValueError(f"line {lineno}: unknown kind/codec {kind}/{codec}")
    blob = base64.b64decode(d["value"], validate=True)
    if not blob:
        raise ValueError(f"line {lineno}: empty value")
    return (str(d["namespace"]), str(d["key"]), kind, codec, int(d["size"]), float(d["created"]), blob)


def _read_export(f: IO[bytes]) -> Iterator[Row]:
    first = f.readline()
    header = orjson.loads(first) if first.strip() else {}
    if header.get("format") != EXPORT_FORMAT or header.get("version") != EXPORT_VERSION:
        raise ValueError("not a fasteval cache export (bad or missing header line)")
    for lineno, raw in enumerate(f, start=2):
        if raw.strip():
            yield _parse_line(raw, lineno)


def import_cache(path: str | Path, file: str | Path, *, overwrite: bool = True) -> int:
    """Load an export into the cache at ``path``; imported entries replace local ones by default."""
    conn = _open(path)
    n = 0
    try:
        with open(file, "rb") as f:
            batch: list[Row] = []
            for row in _read_export(f):
                batch.append(row)
                if len(batch) >= 1000:
                    insert_raw(conn, batch, overwrite=overwrite)
                    n += len(batch)
                    batch = []
            if batch:
                insert_raw(conn, batch, overwrite=overwrite)
                n += len(batch)
    finally:
        conn.close()
    return n


def prune_cache(path: str | Path, *, older_than_days: float | None = None,
                namespace: str | None = None) -> int:
    """Delete entries older than a number of days and/or of one namespace; returns how many.

    With neither filter it refuses, so a typo cannot wipe a cache shared by every run.
    """
    if older_than_days is None and namespace is None:
        raise ValueError("prune needs --older-than and/or --namespace")
    clauses: list[str] = []
    args: list[float | str] = []
    if older_than_days is not None:
        clauses.append("created < ?")
        args.append(time.time() - older_than_days * 86400)
    if namespace is not None:
        clauses.append("namespace = ?")
        args.append(namespace)
    conn = _open(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        cur = conn.execute(f"DELETE FROM entries WHERE {' AND '.join(clauses)}", args)
        conn.execute("COMMIT")
        return cur.rowcount
    finally:
        conn.close()


def cache_stats(path: str | Path) -> dict[str, NamespaceStats]:
    """Entries, bytes and lifetime hits/misses per namespace of the cache file at ``path``."""
    conn = _open(path)
    try:
        return db_stats(conn)
    finally:
        conn.close()
