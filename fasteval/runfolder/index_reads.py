"""Reads of what the run index derives from its rows: the aggregates, the per-task sums of a group,
the resume set, an error's example. No job's row is read into Python.

A mixin of ``RunIndex`` (``fasteval.runfolder.index``), apart so that module keeps to its rows,
its verification and its catch-up.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from fasteval.runfolder import done_keys as _done
from fasteval.runfolder import index_aggregates as _agg
from fasteval.runfolder.done_keys import DoneKeys

FILTERS = frozenset({"job_id", "model", "suite", "setting", "task_id", "seed", "status", "error_kind",
                     "termination", "task_type", "fingerprint", "superseded"})
"""The columns a read may filter on (column = value, or a list of values)."""


class DerivedReads:
    """``RunIndex``'s reads off its aggregates, its key index's per-task sums and its resume array."""

    _db: sqlite3.Connection

    def group_sizes(self) -> dict[tuple[str, str, str], int]:
        """Jobs per model × suite × setting, off the aggregates (no row is read)."""
        sql = "SELECT model, suite, setting, sum(n) FROM agg GROUP BY model, suite, setting"
        return {(_agg.decode("model", m), _agg.decode("suite", s), _agg.decode("setting", st)): int(n)
                for m, s, st, n in self._db.execute(sql)}

    def aggregates(self, **filters: Any) -> list[dict[str, Any]]:
        """The aggregate rows (``index_aggregates``) of the jobs under ``filters`` (columns of its key)."""
        if not _agg.covers((), filters):
            raise TypeError(f"aggregates filter on {sorted(filters)}; known: {list(_agg.KEY)}")
        return _agg.group_rows(self._db, filters)

    def fold_done(self) -> bool:
        """Fold the resume set's changes into its array if they are many (``done_keys.fold_if_worth``)."""
        return _done.fold_if_worth(self._db)

    def per_task(self, model: str, suite: str, setting: str, whole_scores: bool = False) -> Iterator[tuple[Any, ...]]:
        """A group's scored jobs summed per task, in task-id order (``index_aggregates.per_task``)."""
        yield from _agg.per_task(self._db, model, suite, setting, whole_scores)

    def scores(self, **filters: Any) -> list[float]:
        """Scores of the scored jobs with these exact column values (None: the column is NULL)."""
        for key in filters:
            if key not in FILTERS:
                raise TypeError(f"unknown index filter {key!r}; known: {sorted(FILTERS)}")
        return _agg.scores(self._db, filters)

    def done_keys(self, *, ok_only: bool = True) -> DoneKeys:
        """The resume set as a sorted array (``done_keys``): the keys of ok jobs, or of every job."""
        return _done.read(self._db, ok_only=ok_only)

    def error_example(self, model: str, error_kind: str | None) -> str | None:
        """The first error message (in file order) of a model's errors of one kind (any kind for None)."""
        sql = "SELECT error FROM jobs INDEXED BY jobs_errors WHERE status = 'error' AND superseded = 0 AND model = ?"
        params: list[Any] = [model]
        if error_kind is not None:
            sql += " AND error_kind = ?"
            params.append(error_kind)
        row = self._db.execute(sql + " ORDER BY byte_offset LIMIT 1", params).fetchone()
        return None if row is None else row[0]
