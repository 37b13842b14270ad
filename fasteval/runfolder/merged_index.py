"""Writing a merged run's records and index from its sources' indexes, without parsing a line.

Each source's kept lines (its indexed latest record per job, less the duplicates another source
wins) are copied in file order, source after source, in contiguous byte ranges
(``os.copy_file_range``, so the kernel moves the bytes); a source whose kept lines are one
contiguous range, the usual case, is one copy. The merged index is built in SQL from the
sources' rows (``ATTACH``, one source at a time so any number of sources works), the new offset
being the source's base plus the bytes of its kept lines before the row: plain addition when
nothing is skipped, a running sum over byte offsets when something is.

Duplicates (one job in several sources) are rare, so they are found by the primary key of the
merged index itself: the fast pass inserts every source's rows and a conflict sends the merge
through the careful pass, which lists every duplicated job's candidates and lets the caller
choose one (or refuse).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fasteval.runfolder import done_keys as _done
from fasteval.runfolder import index_aggregates as _agg
from fasteval.runfolder.index import (
    _HASH_BYTES,
    _STATS_MIN_ROWS,
    INDEX,
    RECORDS,
    SCHEMA_VERSION,
    RunIndex,
    RunIndexError,
    _line_digest,
)
from fasteval.runfolder.index_rows import BATCH_TOKEN_COLUMNS
from fasteval.runfolder.index_schema import INDEXES as _INDEXES
from fasteval.runfolder.index_schema import connect as _connect
from fasteval.runfolder.index_schema import derive, drop_triggers, keep

# Every column but the location, in schema order (the location is computed).
_KEEP = ("job_id", "model", "suite", "setting", "task_id", "seed", "status", "score", "error_kind", "error",
         "termination", "rounds", "tool_calls", "prompt_tokens", "completion_tokens", "cache_read_tokens",
         "cache_write_tokens", "latency_s", "retries", "task_type", *BATCH_TOKEN_COLUMNS, "image_tokens", "fingerprint",
         "grp", "superseded", "ok")
_COPY_CHUNK = 64 << 20


@dataclass(slots=True, frozen=True)
class Candidate:
    """One source's latest record of a job that several sources hold."""

    source: int
    ok: bool
    offset: int
    length: int


Chooser = Callable[[str, list[Candidate]], int]
"""Given a job and its candidates (in source order), the source whose record the merge keeps;
raises to refuse the merge."""


class _Conflict(Exception):
    """A job id already in the merged index: the fast pass met a duplicate."""


@dataclass(slots=True)
class _Source:
    db_file: Path
    skipped: int = 0
    base: int = 0
    ranges: list[tuple[int, int]] | None = None


def write_merged(out_dir: Path, indexes: Sequence[RunIndex], choose: Chooser) -> int:
    """Write ``out_dir``'s records.jsonl and index.sqlite from ``indexes``; returns the records written.

    ``out_dir`` is a fresh folder (the caller renames it into place): nothing here is atomic on
    its own, and a failure leaves it half-written for the caller to remove.
    """
    sources = [_Source(ix.database_file(out_dir / f".source-{i}.sqlite")) for i, ix in enumerate(indexes)]
    db = _connect(out_dir / INDEX)
    try:
        db.execute("PRAGMA cache_size = -65536")  # 64 MiB: the bulk inserts stay in memory
        db.execute("PRAGMA temp_store = MEMORY")
        db.execute("CREATE TEMP TABLE skip(src INTEGER, job_id TEXT, PRIMARY KEY (src, job_id)) WITHOUT ROWID")
        # The secondary indexes are built once at the end (one sort each), not row by row, and the
        # aggregates and resume set once from the merged rows (``derive``), not by a trigger per row.
        drop_triggers(db)
        for name in _INDEXES:
            db.execute(f"DROP INDEX {name}")
        try:
            total = _insert_all(db, sources)
        except _Conflict:
            db.execute("DELETE FROM jobs")
            _choose_duplicates(db, sources, choose)
            total = _insert_all(db, sources)
        for sql in _INDEXES.values():
            db.execute(sql)
        if total >= _STATS_MIN_ROWS:
            db.execute("ANALYZE jobs")  # as RunIndex keeps them: a merged run is read at once
        _copy_records(out_dir / RECORDS, indexes, sources)
        _write_meta(db, out_dir / RECORDS, total)
        if any(src.skipped for src in sources):  # duplicates dropped: the sources' sums overcount
            derive(db, lambda values: _set_meta(db, values))
        else:  # every source's rows went in: their aggregates and resume sets add up
            for src in sources:
                with _attached(db, src):
                    db.execute(_agg.add_sql("src"))
            keep(db, lambda values: _set_meta(db, values), _done.union([ix.done_keys(ok_only=False) for ix in indexes]))
    finally:
        db.close()
        for i, ix in enumerate(indexes):
            if sources[i].db_file != ix.path:
                with contextlib.suppress(FileNotFoundError):
                    sources[i].db_file.unlink()
    return total


@contextlib.contextmanager
def _attached(db: sqlite3.Connection, src: _Source) -> Iterator[None]:
    # One source at a time: SQLite attaches at most 10 databases, and merges may have hundreds.
    db.execute("ATTACH DATABASE ? AS src", (str(src.db_file),))
    try:
        yield
    finally:
        db.execute("DETACH DATABASE src")


def _insert_all(db: sqlite3.Connection, sources: list[_Source]) -> int:
    """Every source's kept rows into the merged index, at their merged offsets; the rows inserted."""
    base = total = 0
    for i, src in enumerate(sources):
        src.base = base
        with _attached(db, src):
            kept = "" if not src.skipped else (
                " WHERE NOT EXISTS (SELECT 1 FROM temp.skip k WHERE k.src = :i AND k.job_id = src.jobs.job_id)")
            n, size, lo, hi = db.execute(
                "SELECT count(*), coalesce(sum(byte_length), 0), coalesce(min(byte_offset), 0), "
                f"coalesce(max(byte_offset + byte_length), 0) FROM src.jobs{kept}", {"i": i}).fetchone()
            cols = ", ".join(_KEEP)
            db.execute("BEGIN")
            try:
                if lo == 0 and hi == size:
                    # The kept lines are contiguous from byte 0 (lines never overlap): shift them.
                    db.execute(f"INSERT INTO jobs SELECT {cols}, byte_offset + :base, byte_length FROM src.jobs{kept}",
                               {"i": i, "base": base})
                    src.ranges = [(0, size)] if n else []
                else:
                    # Superseded lines, bad lines or lost duplicates between them: each row moves
                    # back by the bytes dropped before it. Inserted in key order (a sorted B-tree
                    # build is far cheaper than one in file order).
                    db.execute(f"INSERT INTO jobs SELECT * FROM (SELECT {cols}, :base + coalesce(sum(byte_length) "
                               "OVER (ORDER BY byte_offset ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0), "
                               f"byte_length FROM src.jobs{kept}) ORDER BY job_id", {"i": i, "base": base})
                    src.ranges = _ranges(db.execute(f"SELECT byte_offset, byte_length FROM src.jobs{kept} "
                                                    "ORDER BY byte_offset", {"i": i}))
                db.execute("COMMIT")
            except sqlite3.IntegrityError:
                db.execute("ROLLBACK")
                raise _Conflict() from None
            except BaseException:
                db.execute("ROLLBACK")
                raise
        base += size
        total += n
    return total


def _ranges(rows: Any) -> list[tuple[int, int]]:
    """Maximal contiguous (offset, length) byte ranges of lines given in offset order."""
    out: list[tuple[int, int]] = []
    start = end = -1
    for offset, length in rows:
        if offset != end:
            if end > start:
                out.append((start, end - start))
            start = offset
        end = offset + length
    if end > start:
        out.append((start, end - start))
    return out


def _choose_duplicates(db: sqlite3.Connection, sources: list[_Source], choose: Chooser) -> None:
    """Each job held by several sources keeps one candidate (``choose``); the rest go to temp.skip."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS cand(job_id TEXT, src INTEGER, ok INTEGER, byte_offset INTEGER, "
               "byte_length INTEGER)")
    db.execute("DELETE FROM temp.cand")
    for i, src in enumerate(sources):
        with _attached(db, src):
            db.execute("INSERT INTO temp.cand SELECT job_id, ?, ok, byte_offset, byte_length FROM src.jobs", (i,))
    db.execute("CREATE INDEX temp.cand_job ON cand(job_id)")
    dups = db.execute("SELECT job_id, src, ok, byte_offset, byte_length FROM temp.cand WHERE job_id IN "
                      "(SELECT job_id FROM temp.cand GROUP BY job_id HAVING count(*) > 1) ORDER BY job_id, src")

    def losers() -> Iterator[tuple[int, str]]:  # streamed: merging a run with itself is all duplicates
        for job_id, rows in itertools.groupby(dups, key=lambda r: str(r[0])):
            group = [Candidate(src_i, bool(ok), offset, length) for _, src_i, ok, offset, length in rows]
            keep = choose(job_id, group)
            for c in group:
                if c.source != keep:
                    sources[c.source].skipped += 1
                    yield c.source, job_id

    db.executemany("INSERT INTO temp.skip VALUES(?, ?)", losers())


def _copy_records(path: Path, indexes: Sequence[RunIndex], sources: list[_Source]) -> None:
    """Copy every source's kept ranges, in order, into ``path`` (fsynced)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for ix, src in zip(indexes, sources, strict=True):
            if not src.ranges:
                continue
            in_fd = os.open(ix.records_path, os.O_RDONLY)
            try:
                for offset, length in src.ranges:
                    if os.pread(in_fd, 1, offset + length - 1) != b"\n":
                        raise RunIndexError(f"{ix.records_path}: no record line ends at byte {offset + length}; "
                                            "run `fasteval index rebuild`")
                    _copy_range(in_fd, fd, offset, length, ix.records_path)
            finally:
                os.close(in_fd)
        os.fsync(fd)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    expected = sum(length for s in sources for _, length in s.ranges or ())
    if size != expected:
        raise RunIndexError(f"{path}: wrote {size} bytes, expected {expected}")


def _copy_range(in_fd: int, out_fd: int, offset: int, length: int, name: Path) -> None:
    """Append ``length`` bytes of ``in_fd`` from ``offset`` to ``out_fd`` (in the kernel when it can)."""
    end = offset + length
    while offset < end:
        n = min(end - offset, _COPY_CHUNK)
        try:
            done = os.copy_file_range(in_fd, out_fd, n, offset)
        except OSError:
            # Not supported here (an old kernel, another filesystem): copy through user space.
            data = os.pread(in_fd, n, offset)
            done = len(data)
            view = memoryview(data)
            while view:
                view = view[os.write(out_fd, view):]
        if done == 0:
            raise RunIndexError(f"{name}: shorter than its index says (byte {offset}); run `fasteval index rebuild`")
        offset += done


def _set_meta(db: sqlite3.Connection, values: dict[str, Any]) -> None:
    db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", [(k, str(v)) for k, v in values.items()])


def _write_meta(db: sqlite3.Connection, records: Path, total: int) -> None:
    """The merged index's meta, as a catch-up over the whole file would leave it."""
    meta: dict[str, Any] = {"version": SCHEMA_VERSION, "offset": 0, "head": "", "head_len": 0, "tail": "",
                            "tail_off": 0, "n_jobs": total, "bad_lines": 0}
    if total:
        head_len = db.execute("SELECT byte_length FROM jobs WHERE byte_offset = 0").fetchone()[0]
        tail_off, tail_len = db.execute("SELECT byte_offset, byte_length FROM jobs ORDER BY byte_offset DESC "
                                        "LIMIT 1").fetchone()
        with records.open("rb") as f:  # the digests cover a line's first _HASH_BYTES only
            head = f.read(min(head_len, _HASH_BYTES))
            f.seek(tail_off)
            tail = f.read(min(tail_len, _HASH_BYTES))
        meta.update(offset=tail_off + tail_len, head=_line_digest(head), head_len=head_len,
                    tail=_line_digest(tail), tail_off=tail_off)
    db.execute("BEGIN")
    db.execute("DELETE FROM meta")
    db.executemany("INSERT INTO meta(key, value) VALUES(?, ?)", [(k, str(v)) for k, v in meta.items()])
    db.execute("COMMIT")
