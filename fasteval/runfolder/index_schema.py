"""The run index's tables, indexes and triggers, and the upkeep of what it derives from its rows.

Beside the one row per job (``jobs``) the index keeps what readers need without reading rows: the
aggregates (``index_aggregates``) and the resume set (``done_keys``), both kept by triggers in the
transaction that changes a row. A build from scratch drops the triggers and the secondary indexes
and makes both once at its end; any open that finds them not kept (a killed build, an older
fasteval that wrote the index) makes them again, from the rows alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fasteval.runfolder import done_keys as _done
from fasteval.runfolder import index_aggregates as _agg
from fasteval.runfolder.index_rows import COLUMNS

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS jobs(job_id TEXT PRIMARY KEY, model TEXT, suite TEXT, setting TEXT, task_id TEXT, "
    "seed INTEGER, status TEXT, score REAL, error_kind TEXT, error TEXT, termination TEXT, rounds INTEGER, "
    "tool_calls INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, cache_read_tokens INTEGER, "
    "cache_write_tokens INTEGER, latency_s REAL, retries INTEGER, "
    "task_type TEXT, batch_prompt_tokens INTEGER, batch_completion_tokens INTEGER, batch_cache_read_tokens INTEGER, "
    "batch_cache_write_tokens INTEGER, image_tokens INTEGER, fingerprint TEXT, grp TEXT, superseded INTEGER, "
    "ok INTEGER, byte_offset INTEGER, byte_length INTEGER) "
    "WITHOUT ROWID",
    *_agg.SCHEMA,
    *_done.SCHEMA,
)
TRIGGERS = (*_agg.TRIGGERS, *_done.TRIGGERS)
# Both orders of ``rows`` without a sort, so a deep page (the viewer's) costs its offset, not a
# re-sort of every row. The key index is led by the flag every read filters on (superseded = 0),
# so current rows stay one range, and carries status and score, so report's and compare's per-task
# reads are covered by it (no lookup of the row); the error index (error rows only) finds an
# error's example at once, the unkeyed one counts records from before fingerprints. A build from
# scratch creates them at the end: one sort each instead of a B-tree insert per row.
INDEXES = {"jobs_offset": "CREATE INDEX IF NOT EXISTS jobs_offset ON jobs(byte_offset)",
           "jobs_key": "CREATE INDEX IF NOT EXISTS jobs_key ON jobs(superseded, model, suite, setting, task_id, seed, "
                       "job_id, status, score)",
           "jobs_errors": "CREATE INDEX IF NOT EXISTS jobs_errors ON jobs(model, error_kind, byte_offset) "
                          "WHERE status = 'error'",
           "jobs_unkeyed": "CREATE INDEX IF NOT EXISTS jobs_unkeyed ON jobs(job_id) WHERE fingerprint IS NULL"}


class ForeignIndex(sqlite3.DatabaseError):
    """An index.sqlite whose tables are not ours (another tool's, an older schema)."""


def connect(target: str | Path) -> sqlite3.Connection:
    """A connection to the index at ``target`` with our tables (ForeignIndex: tables of another shape)."""
    db = sqlite3.connect(str(target), timeout=60.0, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        # The index is derived: a power cut that loses its last commits is caught by verify().
        db.execute("PRAGMA synchronous=OFF")
        # A table with triggers gives every upsert a statement journal: in memory it costs a third
        # of what a temporary file costs (the writer's rows, benchmarks/index_writes.py).
        db.execute("PRAGMA temp_store=MEMORY")
        for stmt in SCHEMA:
            db.execute(stmt)
        jobs = tuple(r[1] for r in db.execute("PRAGMA table_info(jobs)"))
        meta = tuple(r[1] for r in db.execute("PRAGMA table_info(meta)"))
        agg = tuple(r[1] for r in db.execute("PRAGMA table_info(agg)"))
        if jobs != COLUMNS or meta != ("key", "value") or agg != (*_agg.KEY, *_agg.VALUES):
            raise ForeignIndex(f"index tables are not this version's (jobs columns {list(jobs)[:4]}…)")
        for stmt in INDEXES.values():
            db.execute(stmt)
    except BaseException:
        db.close()
        raise
    return db


DERIVED = "ok-2"
"""The aggregates' encoding (2: names encoded like the other nullable keys): an index derived
under another is derived again on open, its triggers replaced."""


def drop_triggers(db: sqlite3.Connection) -> None:
    for name in TRIGGERS:
        db.execute(f"DROP TRIGGER IF EXISTS {name}")


def derived_ok(db: sqlite3.Connection) -> bool:
    """Are the aggregates and the resume set kept (triggers in place) and whole?"""
    db.execute("BEGIN")  # meta and sums of one state, even while a writer commits
    try:
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('derived', 'n_jobs')").fetchall())
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        counted = db.execute("SELECT coalesce(sum(n), 0) FROM agg").fetchone()[0]
        # the rows the aggregates leave out, off the key index it leads (few: superseded ones)
        aside = db.execute("SELECT count(*) FROM jobs WHERE superseded = 1").fetchone()[0]
    finally:
        db.execute("COMMIT")
    if meta.get("derived") != DERIVED or not names.issuperset(TRIGGERS):
        return False
    return bool(counted == int(meta.get("n_jobs", -1)) - aside)


def _keep_by_triggers(db: sqlite3.Connection, set_meta: Callable[[dict[str, Any]], None]) -> None:
    """The open transaction's last step: the triggers that keep ``agg`` and the resume set from now
    on, the index marked derived, committed."""
    for sql in (*_agg.trigger_sql(), *_done.trigger_sql()):
        db.execute(sql)
    set_meta({"derived": DERIVED})
    db.execute("COMMIT")


def keep(db: sqlite3.Connection, set_meta: Callable[[dict[str, Any]], None], done: Any) -> None:
    """Take ``agg`` as it stands (added up by the caller) and ``done`` as the resume set, then keep
    both by triggers: a merge whose sources' rows all went in (their aggregates add up)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        drop_triggers(db)
        set_meta(_done.store(db, done))
        _keep_by_triggers(db, set_meta)
    except BaseException:
        db.execute("ROLLBACK")
        raise


def derive(db: sqlite3.Connection, set_meta: Callable[[dict[str, Any]], None]) -> None:
    """Compute the aggregates and the resume set from the rows, then keep them by triggers.

    One IMMEDIATE transaction: a writer appending meanwhile waits, and its rows are then kept by
    the triggers. Run after a build from scratch, and when ``derived_ok`` finds them not kept.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        drop_triggers(db)
        db.execute("DELETE FROM agg")
        db.execute(_agg.recompute_sql())
        _done.forget(db)  # made by the first resume that reads it
        _keep_by_triggers(db, set_meta)
    except BaseException:
        db.execute("ROLLBACK")
        raise
