"""The run-index calls the viewer makes, until ``fasteval.runindex`` lands on main.

Same names and signatures as the run index's published API (``open_index``, ``RunIndex.rows``,
``count``, ``counts``, ``read_record``, ``read_row``, ``read_line``, ``JobRow``), served by one
scan of ``records.jsonl`` that keeps a small row per job and its line's offset. When the index
is merged this module becomes a re-export of it and nothing else in the viewer changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from fasteval.records import RECORDS

_FILTERS = frozenset({"job_id", "model", "suite", "setting", "task_id", "seed", "status", "error_kind",
                      "termination", "task_type"})


@dataclass(slots=True)
class JobRow:
    job_id: str
    model: str
    suite: str
    setting: str
    task_id: str
    seed: int
    status: str
    score: float | None
    error_kind: str | None
    error: str | None
    termination: str | None
    rounds: int
    tool_calls: int
    usage: dict[str, int]
    latency_s: float
    retries: int
    task_type: str | None
    offset: int
    length: int


def _row(rec: dict[str, Any], offset: int, length: int) -> JobRow:
    usage = rec.get("usage") if isinstance(rec.get("usage"), dict) else {}
    meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    score = rec.get("score")
    error = rec.get("error")
    return JobRow(str(rec["job_id"]), str(rec.get("model")), str(rec.get("suite")), str(rec.get("setting")),
                  str(rec.get("task_id")), int(rec.get("seed") or 0), str(rec.get("status")),
                  float(score) if isinstance(score, int | float) else None, rec.get("error_kind"),
                  None if error is None else str(error)[:300], rec.get("termination"), int(rec.get("rounds") or 0),
                  int(rec.get("tool_calls") or 0), dict(usage or {}), float(rec.get("latency_s") or 0.0),
                  int(rec.get("retries") or 0), (meta or {}).get("task_type"), offset, length)


class RunIndex:
    """Rows of every job's latest record (a later ok record supersedes an error), in file order."""

    def __init__(self, run_dir: Path) -> None:
        self.records_path = run_dir / RECORDS
        self._rows: dict[str, JobRow] = {}
        self._fd = -1
        if not self.records_path.exists():
            return
        pos = 0
        with self.records_path.open("rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    rec = None
                if isinstance(rec, dict) and "job_id" in rec:
                    row = _row(rec, pos, len(line))
                    prev = self._rows.get(row.job_id)
                    if prev is None or prev.status != "ok" or row.status == "ok":
                        self._rows[row.job_id] = row
                pos += len(line)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> RunIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _match(self, filters: dict[str, Any]) -> Iterator[JobRow]:
        for k in filters:
            if k not in _FILTERS:
                raise TypeError(f"unknown index filter {k!r}")
        wanted = {k: (set(v) if isinstance(v, list | tuple | set) else {v}) for k, v in filters.items()
                  if v is not None}
        for r in sorted(self._rows.values(), key=lambda r: r.offset):
            if all(getattr(r, k) in v for k, v in wanted.items()):
                yield r

    def rows(self, *, order: Literal["offset", "key"] = "offset", limit: int | None = None, skip: int = 0,
             **filters: Any) -> Iterator[JobRow]:
        out = list(self._match(filters))
        if order == "key":
            out.sort(key=lambda r: (r.model, r.suite, r.setting, r.task_id, r.seed))
        yield from out[skip: None if limit is None else skip + limit]

    def count(self, **filters: Any) -> int:
        return sum(1 for _ in self._match(filters))

    def counts(self, by: Sequence[str] = (), **filters: Any) -> dict[tuple[Any, ...], dict[str, int]]:
        out: dict[tuple[Any, ...], dict[str, int]] = {}
        for r in self._match(filters):
            key = tuple(getattr(r, c) for c in by)
            group = out.setdefault(key, {})
            group[r.status] = group.get(r.status, 0) + 1
        return out

    def read_line(self, offset: int, length: int) -> bytes:
        if self._fd < 0:
            self._fd = os.open(self.records_path, os.O_RDONLY)
        return os.pread(self._fd, length, offset)

    def read_row(self, row: JobRow) -> dict[str, Any]:
        rec: dict[str, Any] = orjson.loads(self.read_line(row.offset, row.length))
        return rec

    def read_record(self, job_id: str) -> dict[str, Any] | None:
        row = self._rows.get(job_id)
        return None if row is None else self.read_row(row)


def open_index(run_dir: Path | str) -> RunIndex:
    return RunIndex(Path(run_dir))
