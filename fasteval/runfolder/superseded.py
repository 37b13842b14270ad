"""Superseded rows of the run index: kept, readable by job id, counted by nothing else.

A row is superseded when its model × suite × setting is among the manifest's current groups
under another group fingerprint (its entry was edited since the record was written). The flag
is derived like every column: set as a row lands (``marked``) and moved, one changed group at a
time, when the current groups change (``follow``); the index's meta notes which set the flags
follow, so an unchanged open takes no write lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import orjson

from fasteval.runfolder.index_rows import GRP, SUPERSEDED, IndexRowTuple
from fasteval.runfolder.manifest import CurrentGroups, current_groups


def marked(rows: Sequence[IndexRowTuple], groups: CurrentGroups) -> Sequence[IndexRowTuple]:
    """Rows with their superseded flag set against ``groups`` (they are built with 0)."""
    if not groups:
        return rows
    out = list(rows)
    for i, row in enumerate(out):
        current = groups.get((row[1], row[2], row[3]))
        if current is not None and row[GRP] not in current:
            out[i] = (*row[:SUPERSEDED], 1, *row[SUPERSEDED + 1:])
    return out


def follow(db: sqlite3.Connection, groups: CurrentGroups) -> int:
    """Move the flags to ``groups``; returns the rows moved. Flags that follow no known set (a
    merged index, a fresh meta) are marked from scratch."""
    row = db.execute("SELECT value FROM meta WHERE key = 'current'").fetchone()
    if row is not None and load_groups(row[0]) == groups:
        return 0  # the usual open: no write lock taken (a sweep may be appending)
    db.execute("BEGIN IMMEDIATE")
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'current'").fetchone()
        before = load_groups(row[0]) if row is not None else None
        moved = 0
        if before != groups:
            if before is None:
                moved += db.execute("UPDATE jobs SET superseded = 0 WHERE superseded != 0").rowcount
                before = {}
            for key in sorted(set(before) | set(groups)):
                if before.get(key) != groups.get(key):
                    moved += _mark_group(db, key, groups.get(key))
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('current', ?)", (dump_groups(groups),))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return moved


def _mark_group(db: sqlite3.Connection, key: tuple[str, str, str], groups: frozenset[str] | None) -> int:
    """One model × suite × setting: rows of ``groups`` current, the others superseded (all
    current when the config no longer has it: nothing replaced them)."""
    where = "model = ? AND suite = ? AND setting = ?"
    if groups is None:
        return db.execute(f"UPDATE jobs SET superseded = 0 WHERE superseded = 1 AND {where}", key).rowcount
    marks = ", ".join("?" * len(groups))
    gs = sorted(groups)
    n = db.execute(f"UPDATE jobs SET superseded = 1 WHERE superseded = 0 AND {where} "
                   f"AND (grp IS NULL OR grp NOT IN ({marks}))", (*key, *gs)).rowcount
    n += db.execute(f"UPDATE jobs SET superseded = 0 WHERE superseded = 1 AND {where} AND grp IN ({marks})",
                    (*key, *gs)).rowcount
    return n


def dump_groups(groups: CurrentGroups) -> str:
    """The index meta's note of the groups its flags follow."""
    return orjson.dumps(sorted([*k, g] for k, gs in groups.items() for g in gs)).decode()


def load_groups(text: str) -> CurrentGroups | None:
    """The groups a meta value names (None: not a list of groups)."""
    try:
        entries = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(entries, list):
        return None
    return current_groups({"identity": {"current": entries}})
