"""The run index: one small SQLite row per job, derived from ``records.jsonl``.

``records.jsonl`` stays the single source of truth; ``index.sqlite`` beside it only says, for
each job, its latest record's summary and where the full line lives (byte offset and length).
SQLite (stdlib, WAL) because readers need grouped counts, filters and paging (status, report,
the viewer) without loading anything, several processes read while the sweep appends, and a
torn or half-written database is detected by SQLite itself.

The index is never trusted blindly. On open it checks that the records file still starts with
the line it indexed first, still holds the last indexed line exactly where it was, and that the
row count matches; any disagreement (or a missing, foreign or corrupt index) rebuilds it from
the records. Lines appended since (e.g. after a ``kill -9`` between a record write and its
index update) are indexed on open, so every reader sees every complete record.

A job's row follows the records' own rule: its latest ok record, else its latest record. That
rule is a maximum over (ok, offset), so applying lines twice or in any order gives one answer.

A row is **superseded** when its model × suite × setting is in the manifest's current groups
under another fingerprint (an edited entry): kept, readable by its job id or with
``superseded=None``, and left out of every other read (status, report, compare, the viewer).
The flag is derived like the rest: from the record's ``components`` and the manifest, set as a
row lands and moved, one group at a time, when the manifest's current groups change.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import orjson

from fasteval.core.errors import DamagedRunFolder
from fasteval.runfolder import index_aggregates as _agg
from fasteval.runfolder.index_reads import FILTERS, DerivedReads
from fasteval.runfolder.index_rows import (
    COLUMNS,
    INT_MAX,
    INT_MIN,
    IndexRowTuple,
    JobRow,
    job_row,
    row_or_none,
    storable_row,
    storable_text,
    summarise_line,
)
from fasteval.runfolder.index_schema import INDEXES as _INDEXES
from fasteval.runfolder.index_schema import ForeignIndex as _ForeignIndex
from fasteval.runfolder.index_schema import connect as _connect
from fasteval.runfolder.index_schema import derive, derived_ok, drop_triggers
from fasteval.runfolder.manifest import CurrentGroups, current_groups, read_manifest
from fasteval.runfolder.names import INDEX as INDEX  # importers of index keep their names
from fasteval.runfolder.names import RECORDS as RECORDS
from fasteval.runfolder.safe_open import open_nofollow, refuse_symlink
from fasteval.runfolder.superseded import dump_groups, follow, marked

log = logging.getLogger("fasteval")

SCHEMA_VERSION = "6"
_HASH_BYTES = 4096
_CHUNK_LINES = 2000
_STATS_MIN_ROWS = 1000

_FILTERS = FILTERS


class RunIndexError(RuntimeError):
    """The index cannot be used (e.g. a record line is not where the index says)."""


# What SQLite's binding raises for a value it cannot hold (an int past 64 bits, a lone surrogate).
_UNSTORABLE = (OverflowError, ValueError, sqlite3.InterfaceError, sqlite3.ProgrammingError)
# Total orders, each served by an index (job_id ends every index of a WITHOUT ROWID table).
_ORDER = {"offset": "byte_offset", "key": "model, suite, setting, task_id, seed, job_id"}


_UPSERT = (
    f"INSERT INTO jobs({', '.join(COLUMNS)}) VALUES({', '.join('?' * len(COLUMNS))}) "
    f"ON CONFLICT(job_id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in COLUMNS[1:])} "
    "WHERE (excluded.ok, excluded.byte_offset) > (jobs.ok, jobs.byte_offset)"
)
def _line_digest(data: bytes) -> str:
    return hashlib.sha256(data[:_HASH_BYTES]).hexdigest()


class RunIndex(DerivedReads):
    """The index of one run folder. Use ``open_index``; close it (or use ``with``) when done."""

    def __init__(self, run_dir: Path, db: sqlite3.Connection, path: Path | None) -> None:
        self.run_dir = run_dir
        self.records_path = run_dir / RECORDS
        self.path = path
        """The index file, or None when the folder is read-only and the index lives in memory."""
        self._db = db
        self._fd = -1
        self.rebuilt = False
        """Whether this open rebuilt the index from scratch (missing, stale, foreign, corrupt)."""
        self.current: CurrentGroups = {}
        """The manifest's current groups, which rows landing now are marked against (``follow``)."""

    # ---- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._db.close()

    def __enter__(self) -> RunIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_busy_timeout(self, seconds: float) -> None:
        """How long a write waits for another process's lock (the sweep's writer waits little)."""
        self._db.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def database_file(self, scratch: Path) -> Path:
        """The index as a database file another connection can ATTACH (merge plans in SQL).

        Its own file, or, for an index held in memory (a read-only folder), a copy at ``scratch``.
        """
        if self.path is not None:
            return self.path
        dest = sqlite3.connect(str(scratch))
        try:
            self._db.backup(dest)
        finally:
            dest.close()
        return scratch

    def _meta(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def _set_meta(self, values: dict[str, Any]) -> None:
        self._db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)",
                             [(k, str(v)) for k, v in values.items()])

    def _reset(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        self._drop_triggers()  # before the DELETE: per-row triggers would make it a walk of every row
        for table in ("jobs", "meta", "agg", "done_log", "done_blob"):
            self._db.execute(f"DELETE FROM {table}")
        self._set_meta({"version": SCHEMA_VERSION, "offset": 0, "head": "", "head_len": 0,
                        "tail": "", "tail_off": 0, "n_jobs": 0, "bad_lines": 0, "derived": "no",
                        "current": dump_groups(self.current)})
        self._db.execute("COMMIT")
        self.rebuilt = True

    def _drop_triggers(self) -> None:
        drop_triggers(self._db)

    def _derived_ok(self) -> bool:
        return derived_ok(self._db)

    def _derive(self) -> None:
        derive(self._db, self._set_meta)

    def _pread(self, offset: int, length: int) -> bytes:
        if self._fd < 0:
            self._fd = open_nofollow(self.records_path, os.O_RDONLY, "records.jsonl")
        return os.pread(self._fd, length, offset)

    def verify(self) -> str | None:
        """Why the index disagrees with the records (None when it agrees with what it covers)."""
        try:
            # One read transaction: the meta and the count from the same snapshot, even while
            # the sweep's writer commits between them.
            self._db.execute("BEGIN")
            try:
                meta = self._meta()
                n_rows = self._db.execute("SELECT count(*) FROM jobs").fetchone()[0]
            finally:
                self._db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            return f"unreadable index: {e}"
        if meta.get("version") != SCHEMA_VERSION:
            return "index from another version"
        offset, n_jobs = int(meta.get("offset", -1)), int(meta.get("n_jobs", -1))
        if n_rows != n_jobs:
            return f"index holds {n_rows} rows, expected {n_jobs}"
        if offset == 0:
            return None
        try:
            size = self.records_path.stat().st_size
        except FileNotFoundError:
            return "records.jsonl is missing"
        if size < offset:
            return f"records.jsonl is shorter ({size} bytes) than indexed ({offset})"
        head_len, tail_off = int(meta["head_len"]), int(meta["tail_off"])
        head = self._pread(0, min(head_len, _HASH_BYTES))
        if _line_digest(head) != meta["head"] or self._pread(head_len - 1, 1) != b"\n":
            return "records.jsonl does not start with the indexed line (another run's index?)"
        tail = self._pread(tail_off, min(offset - tail_off, _HASH_BYTES))
        before = self._pread(tail_off - 1, 1) if tail_off else b"\n"
        if _line_digest(tail) != meta["tail"] or before != b"\n" or self._pread(offset - 1, 1) != b"\n":
            return "the last indexed line is not where the index says"
        return None

    # ---- writing ---------------------------------------------------------------------------

    def refresh(self) -> int:
        """Verify, rebuild if needed, then index every complete line past the indexed offset.

        Returns the number of lines indexed. Safe with other processes doing the same: each
        chunk is one IMMEDIATE transaction that re-reads where the index stands.
        """
        self._close_fd()
        problem = self.verify()
        if problem is not None:
            self._reset()
        from_scratch = self._db.execute("SELECT value FROM meta WHERE key = 'offset'").fetchone()[0] == "0"
        if from_scratch:
            # One sort per index and one GROUP BY for the aggregates at the end, not a B-tree
            # insert and a trigger per row.
            self._db.execute("BEGIN IMMEDIATE")
            self._drop_triggers()
            self._set_meta({"derived": "no"})
            self._db.execute("COMMIT")
            for name in _INDEXES:
                self._db.execute(f"DROP INDEX IF EXISTS {name}")
        added = 0
        try:
            while True:
                n = self._index_chunk()
                added += n
                if n < _CHUNK_LINES:
                    break
        finally:
            if from_scratch:
                for sql in _INDEXES.values():
                    self._db.execute(sql)
        if not self._derived_ok():
            self._derive()
        self._keep_statistics()
        return added

    def settle(self) -> None:
        """What a sweep's writer leaves as it closes, so the first reader after it writes nothing.

        The resume set folded into one array and the planner's statistics renewed: left to the first
        ``status`` or resume, they cost it ~0.4 s and ~1.5 s at 10^6 jobs (ANALYZE and the fold), once.
        """
        self.fold_done()
        self._keep_statistics()

    def _keep_statistics(self) -> None:
        """Planner statistics for the secondary indexes, renewed each time the run doubles.

        Without them SQLite takes the key index for a report's (model, suite, setting) even when
        that group is the whole run (a lookup per row instead of one scan); with them it knows.
        ANALYZE reads each index once (~0.07 s per 100,000 jobs).
        """
        n = int(self._db.execute("SELECT value FROM meta WHERE key = 'n_jobs'").fetchone()[0])
        if n < _STATS_MIN_ROWS:
            return
        try:
            row = self._db.execute("SELECT stat FROM sqlite_stat1 WHERE idx = 'jobs_key'").fetchone()
        except sqlite3.OperationalError:
            row = None  # never analysed
        if row is None or n >= 2 * int(str(row[0]).split()[0]):
            with contextlib.suppress(sqlite3.OperationalError):  # locked by a writer: next time
                self._db.execute("ANALYZE jobs")

    def _close_fd(self) -> None:
        # Reopen the records file on each refresh: it may have been replaced (merge, rebuild).
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _index_chunk(self) -> int:
        if not self.records_path.exists():
            return 0
        self._db.execute("BEGIN IMMEDIATE")
        try:
            meta = self._meta()
            offset = int(meta["offset"])
            rows: list[IndexRowTuple] = []
            head: dict[str, Any] = {}
            last: tuple[int, bytes] | None = None
            bad = 0
            with os.fdopen(open_nofollow(self.records_path, os.O_RDONLY, "records.jsonl"), "rb") as f:
                f.seek(offset)
                pos = offset
                while len(rows) + bad < _CHUNK_LINES:
                    line = f.readline()
                    if not line.endswith(b"\n"):
                        break  # end of file, or a torn last line the next writer repairs
                    rec = summarise_line(line)
                    row = None if rec is None else row_or_none(rec, pos, len(line))
                    if row is None:
                        bad += 1
                    else:
                        rows.append(row)
                    if pos == 0:
                        head = {"head": _line_digest(line), "head_len": len(line)}
                    last = (pos, line)
                    pos += len(line)
            if last is not None:
                self._apply(rows, pos, last[0], last[1], extra={**head, "bad_lines": int(meta["bad_lines"]) + bad})
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return len(rows) + bad

    def _upsert(self, rows: Sequence[IndexRowTuple]) -> None:
        """Apply rows and keep ``n_jobs`` exact without counting the whole table."""
        if not rows:
            return
        rows = marked(rows, self.current)
        ids = list({r[0] for r in rows})
        known = 0
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            known += self._db.execute(f"SELECT count(*) FROM jobs WHERE job_id IN ({', '.join('?' * len(part))})",
                                      part).fetchone()[0]
        try:
            self._db.executemany(_UPSERT, rows)
        except _UNSTORABLE:
            self._upsert_storable(rows)
            return
        n = int(self._db.execute("SELECT value FROM meta WHERE key = 'n_jobs'").fetchone()[0])
        self._set_meta({"n_jobs": n + len(ids) - known})

    def _upsert_storable(self, rows: Sequence[IndexRowTuple]) -> None:
        """The slow path for a batch SQLite refused: each row made storable, one at a time.

        A row still refused is counted as a bad line (its record stays in records.jsonl; readers
        skip it), never raised: the writer runs beside finished jobs it must not lose.
        """
        rejected = 0
        for row in rows:
            try:
                self._db.execute(_UPSERT, storable_row(row))
            except (*_UNSTORABLE, sqlite3.IntegrityError) as e:
                rejected += 1
                log.warning("run index: record of job %.80s at byte %s not indexed (%s)",
                            storable_text(row[0]), row[-2], e)
        n = self._db.execute("SELECT count(*) FROM jobs").fetchone()[0]
        bad = int(self._db.execute("SELECT value FROM meta WHERE key = 'bad_lines'").fetchone()[0])
        self._set_meta({"n_jobs": n, "bad_lines": bad + rejected})

    def _apply(self, rows: Sequence[IndexRowTuple], end: int, tail_off: int, tail_line: bytes,
               extra: dict[str, Any] | None = None) -> None:
        self._upsert(rows)
        self._set_meta({"offset": end, "tail": _line_digest(tail_line), "tail_off": tail_off, **(extra or {})})

    def append(self, rows: Sequence[IndexRowTuple], lines_end: int, tail_off: int, tail_line: bytes,
               first_line: bytes | None = None) -> None:
        """Index lines the caller has just appended (their bytes end at ``lines_end``).

        For the one writer of the run folder: every line before its first one must already be
        indexed (``refresh`` at start). A reader that indexed some of them meanwhile is harmless.
        """
        self._db.execute("BEGIN IMMEDIATE")
        try:
            current = int(self._db.execute("SELECT value FROM meta WHERE key = 'offset'").fetchone()[0])
            extra = {"head": _line_digest(first_line), "head_len": len(first_line)} if first_line else {}
            if rows and current == rows[0][-2]:
                self._apply(rows, lines_end, tail_off, tail_line, extra)
            else:
                # A reader indexed past our first line, or rebuilt the index and has not reached
                # it yet: our rows are right, but only a contiguous catch-up may move the offset.
                self._upsert(rows)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def follow(self, groups: CurrentGroups) -> int:
        """Mark rows superseded or current for the manifest's ``groups``; returns the rows moved
        (fasteval.runfolder.superseded: only the groups that changed are touched)."""
        self.current = groups
        return follow(self._db, groups)

    # ---- reading ---------------------------------------------------------------------------

    @staticmethod
    def _where(filters: dict[str, Any], scan: bool = False, keyed: bool = True) -> tuple[str, list[Any]]:
        """SQL for column = value filters; current rows only unless ``superseded`` is given (None: all).

        ``keyed=False``: the current-rows test must not pick the key index (a read in file order)."""
        clauses, params = [], []
        col = "+{}" if scan else "{}"  # a unary plus keeps the planner off the column's indexes
        if "superseded" not in filters:
            clauses.append("superseded = 0" if keyed and not scan else "+superseded = 0")
        for key, value in filters.items():
            if key not in _FILTERS:
                raise TypeError(f"unknown index filter {key!r}; known: {sorted(_FILTERS)}")
            if value is None:
                continue
            if isinstance(value, list | tuple | set | frozenset):
                values = list(value)
                clauses.append(f"{col.format(key)} IN ({', '.join('?' * len(values))})")
                params.extend(values)
            else:
                clauses.append(f"{col.format(key)} = ?")
                params.append(value)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def rows(self, *, order: Literal["offset", "key"] = "offset", limit: int | None = None, skip: int = 0,
             **filters: Any) -> Iterator[JobRow]:
        """Per-job rows matching ``filters`` (column = value, or a list of values).

        ``order="offset"`` is file order (cheapest for then reading records); ``"key"`` is
        model, suite, setting, task_id, seed. ``limit``/``skip`` page (the viewer's /jobs).
        """
        where, params = self._where(filters, keyed=_keyed(order, filters))
        sort = _ORDER[order]
        sql = f"SELECT {', '.join(COLUMNS)} FROM jobs{where} ORDER BY {sort}"
        if limit is not None or skip:
            sql += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, skip]
        for r in self._db.execute(sql, params):
            yield job_row(r)

    def select(self, columns: Sequence[str], *, order: Literal["offset", "key"] = "offset", scan: bool = False,
               **filters: Any) -> Iterator[tuple[Any, ...]]:
        """Plain tuples of some of COLUMNS (cheaper than ``rows`` when a reader needs a few).

        ``scan=True`` reads the whole table and sorts the matches, for a large share of the jobs:
        a walk of an index costs a primary-key lookup per row, ten times a row of a plain scan.
        """
        for col in columns:
            if col not in COLUMNS:
                raise TypeError(f"unknown index column {col!r}; known: {list(COLUMNS)}")
        where, params = self._where(filters, scan, keyed=_keyed(order, filters))
        sort = ", ".join(f"+{c.strip()}" for c in _ORDER[order].split(",")) if scan else _ORDER[order]
        yield from self._db.execute(f"SELECT {', '.join(columns)} FROM jobs{where} ORDER BY {sort}", params)

    def sums(self, columns: Sequence[str], *, scan: bool = False, **filters: Any) -> tuple[int, ...]:
        """The matching jobs' count, then the sum of each integer column (tokens, tool calls)."""
        for col in columns:
            if col not in COLUMNS:
                raise TypeError(f"unknown index column {col!r}; known: {list(COLUMNS)}")
        if set(columns).issubset(_agg.INT_SUMS) and _agg.covers((), filters):
            summed = _agg.sums(self._db, columns, filters)
            if summed is not None:
                return summed
        where, params = self._where(filters, scan)
        sql = f"SELECT count(*), {', '.join(f'coalesce(sum({c}), 0)' for c in columns)} FROM jobs{where}"
        try:
            return tuple(self._db.execute(sql, params).fetchone())
        except sqlite3.OperationalError as e:
            if "integer overflow" not in str(e):
                raise
        # Clamped values (a hostile server's token counts) overflow SQLite's sum: add them up
        # here, where ints do not overflow, and saturate at what every later reader can hold.
        totals = [0] * len(columns)
        n = 0
        for row in self._db.execute(f"SELECT {', '.join(columns)} FROM jobs{where}", params):
            n += 1
            for i, v in enumerate(row):
                totals[i] += v if isinstance(v, int) else 0
        return (n, *(min(max(t, INT_MIN), INT_MAX) for t in totals))

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[RunIndex]:
        """Several reads that must agree (a report's sizes, sums and rows) see one state of the index.

        A sweep may append while a report reads; without this each statement is its own
        transaction and a group's sums could count a job its rows do not have. A read transaction
        in WAL mode pins one snapshot and does not block the writer.
        """
        self._db.execute("BEGIN")
        try:
            yield self
        finally:
            self._db.execute("COMMIT")

    def count(self, **filters: Any) -> int:
        if _agg.covers((), filters):
            return _agg.sums(self._db, (), filters)[0]  # type: ignore[index]  # counts never overflow
        where, params = self._where(filters)
        n: int = self._db.execute(f"SELECT count(*) FROM jobs{where}", params).fetchone()[0]
        return n

    def counts(self, by: Sequence[str] = (), **filters: Any) -> dict[tuple[Any, ...], dict[str, int]]:
        """Jobs per group of ``by`` columns (e.g. ``("model", "error_kind")``): {key: {status: n}}."""
        for col in by:
            if col not in _FILTERS:
                raise TypeError(f"unknown index dimension {col!r}; known: {sorted(_FILTERS)}")
        if _agg.covers(by, filters):
            return _agg.counts(self._db, by, filters)
        where, params = self._where(filters)
        cols = ", ".join(["status", *by])
        out: dict[tuple[Any, ...], dict[str, int]] = {}
        # Counting is a pass over the table: one scan beats an index walk with a lookup per row.
        # Status leads the GROUP BY: led by model, suite, setting the planner walks the key index
        # (for its order) despite NOT INDEXED, a primary-key lookup per row.
        table = "jobs" if "job_id" in filters else "jobs NOT INDEXED"
        for status, *key, n in self._db.execute(f"SELECT {cols}, count(*) FROM {table}{where} GROUP BY {cols}",
                                                params):
            out.setdefault(tuple(key), {})[status] = n
        return out

    def job_ids(self, *, ok_only: bool = False) -> set[str]:
        """The set of current indexed jobs (only ok ones with ``ok_only``): the sweep's resume set.

        A job id holds its group's fingerprint, so an id here is "this fingerprint has a record
        under these names"; superseded rows are of other fingerprints and never match a plan."""
        sql = "SELECT job_id FROM jobs WHERE superseded = 0" + (" AND ok = 1" if ok_only else "")
        return {r[0] for r in self._db.execute(sql)}

    def row(self, job_id: str) -> JobRow | None:
        """One job's row by its id, superseded or not (a superseded record stays readable)."""
        return next(self.rows(job_id=job_id, superseded=None), None)

    def read_line(self, offset: int, length: int) -> bytes:
        """The raw bytes of one record line (newline included)."""
        data = self._pread(offset, length)
        if len(data) != length or not data.endswith(b"\n"):
            raise RunIndexError(f"{self.records_path}: no record line at byte {offset} (length {length}); "
                              "run `fasteval index rebuild`")
        return data

    def read_record(self, job_id: str) -> dict[str, Any] | None:
        """One job's full latest record, read from its offset (None if the job is not indexed)."""
        row = self.row(job_id)
        if row is None:
            return None
        return self.read_row(row)

    def read_row(self, row: JobRow) -> dict[str, Any]:
        rec: dict[str, Any] = orjson.loads(self.read_line(row.offset, row.length))
        if rec.get("job_id") != row.job_id:
            raise RunIndexError(f"{self.records_path}: byte {row.offset} holds job {rec.get('job_id')}, "
                              f"the index says {row.job_id}; run `fasteval index rebuild`")
        return rec

    def iter_records(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Full latest records matching ``filters``, one at a time, in file order."""
        for row in self.rows(**filters):
            yield self.read_row(row)

    def stats(self) -> dict[str, Any]:
        meta = self._meta()
        # Off the aggregates (the rows they count are the current ones) and a partial index: no scan.
        counted = int(self._db.execute("SELECT coalesce(sum(n), 0) FROM agg").fetchone()[0])
        unkeyed = self._db.execute("SELECT count(*) FROM jobs INDEXED BY jobs_unkeyed WHERE fingerprint IS NULL"
                                   ).fetchone()[0]
        superseded = int(meta.get("n_jobs", 0)) - counted
        return {"path": str(self.path) if self.path else None, "jobs": int(meta.get("n_jobs", 0)),
                "indexed_bytes": int(meta.get("offset", 0)), "bad_lines": int(meta.get("bad_lines", 0)),
                "superseded": superseded, "unkeyed": unkeyed, "rebuilt": self.rebuilt}


def _keyed(order: str, filters: dict[str, Any]) -> bool:
    """May the current-rows test lead the planner to the key index? For a key-order read or a
    group's read (model, suite, setting given) yes; for a whole file-order read no (it would sort)."""
    return order == "key" or any(filters.get(k) is not None for k in ("model", "suite", "setting"))


def _drop(path: Path) -> None:
    for p in (path, path.with_name(INDEX + "-wal"), path.with_name(INDEX + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _open_db(run_dir: Path) -> tuple[sqlite3.Connection, Path | None]:
    path = run_dir / INDEX
    for p in (path, path.with_name(INDEX + "-wal"), path.with_name(INDEX + "-shm")):
        refuse_symlink(p, "the run index")
    if os.access(run_dir, os.W_OK):
        try:
            db = _connect(path)
            db.execute("SELECT count(*) FROM meta").fetchone()
            return db, path
        except _ForeignIndex:
            _drop(path)  # another tool's or an older schema's tables: rebuilt from the records
            return _connect(path), path
        except sqlite3.OperationalError as e:
            if "readonly" not in str(e) and "unable to open" not in str(e):
                raise
        except sqlite3.DatabaseError:
            # Not a database (or a corrupt one): it is derived, so throw it away.
            _drop(path)
            return _connect(path), path
    # A folder (or index) we may not write: index in memory, one streaming pass.
    return _connect(":memory:"), None


def open_index(run_dir: Path | str) -> RunIndex:
    """The run folder's index, verified and caught up with ``records.jsonl``.

    A missing, stale, foreign or corrupt index is rebuilt; a read-only folder gets an index in
    memory, built by one streaming pass.
    """
    run_dir = Path(run_dir)
    try:
        groups = current_groups(read_manifest(run_dir))
    except DamagedRunFolder:
        groups = {}  # the records are still read; the run's own commands say what is wrong with it
    db, path = _open_db(run_dir)
    index = RunIndex(run_dir, db, path)
    index.current = groups
    try:
        index.refresh()
        index.follow(groups)
    except sqlite3.DatabaseError:
        db.close()
        if path is None:
            raise
        _drop(path)
        index = RunIndex(run_dir, _connect(path), path)
        index.current = groups
        index.refresh()
        index.follow(groups)
        index.rebuilt = True
    return index


def rebuild_index(run_dir: Path | str) -> dict[str, Any]:
    """Throw the index away and build it again from the records (``fasteval index rebuild``)."""
    run_dir = Path(run_dir)
    _drop(run_dir / INDEX)
    with open_index(run_dir) as index:
        return index.stats()
