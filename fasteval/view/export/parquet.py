"""``fasteval export --format parquet``: one typed row per job, and optionally one per model request.

The jobs table is what an analyst loads into pandas or DuckDB: identity, status, every scorer's
score, tokens by kind, cost, rounds, tool calls, latency. Rows stream through
``pyarrow.parquet.ParquetWriter`` a row group at a time, so memory follows the row group, not the
run. Run-level facts (where it came from, the config hash, whether the run is partial) sit in the
file's key-value metadata under ``fasteval``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from fasteval.runfolder.index import RunIndex
from fasteval.runfolder.index_rows import BATCH_TOKEN_COLUMNS
from fasteval.view.export.common import (
    TOKEN_KINDS,
    RunInfo,
    Selection,
    image_tokens,
    records,
    scores_of,
    usage_of,
)

ROW_GROUP = 8192
"""Rows per row group: memory holds one group's columns (a few MB), whatever the run's size."""

_INT = pa.int64()
_FLOAT = pa.float64()
_STR = pa.string()

JOBS_SCHEMA = pa.schema([
    ("run", _STR), ("job_id", _STR), ("model", _STR), ("suite", _STR), ("setting", _STR), ("seed", _INT),
    ("task_id", _STR), ("task_type", _STR), ("status", _STR), ("error_kind", _STR), ("error", _STR),
    ("termination", _STR), ("answer", _STR),
    ("score", _FLOAT), ("score_reference", _FLOAT), ("score_fixed", _FLOAT),
    *((k, _INT) for k in TOKEN_KINDS), ("image_tokens", _INT), *((k, _INT) for k in BATCH_TOKEN_COLUMNS),
    ("cost_usd", _FLOAT), ("rounds", _INT), ("tool_calls", _INT), ("tool_errors", _INT),
    ("latency_s", _FLOAT), ("retries", _INT), ("fidelity", _STR),
])

ROUNDS_SCHEMA = pa.schema([
    ("job_id", _STR), ("model", _STR), ("suite", _STR), ("setting", _STR), ("seed", _INT), ("task_id", _STR),
    ("round", _INT), ("turn", _INT), ("round_in_turn", _INT), ("prompt_tokens", _INT), ("completion_tokens", _INT),
    ("tool_calls", _INT), ("tool_names", pa.list_(_STR)), ("tool_errors", _INT), ("tool_latency_s", _FLOAT),
    ("tool_images", _INT),
])


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return None if v is None else v if isinstance(v, str) else orjson.dumps(v, default=str).decode()


def job_row(info: RunInfo, rec: dict[str, Any]) -> dict[str, Any]:
    """One record as a row of JOBS_SCHEMA."""
    usage = usage_of(rec)
    scores = scores_of(rec)
    meta = rec.get("metadata") or {}
    calls = rec["trajectory"]["tool_calls"]
    model = str(rec.get("model"))
    return {
        "run": info.run_dir.name, "job_id": _str(rec.get("job_id")), "model": model, "suite": _str(rec.get("suite")),
        "setting": _str(rec.get("setting")), "seed": _int(rec.get("seed")), "task_id": _str(rec.get("task_id")),
        "task_type": _str(meta.get("task_type")), "status": _str(rec.get("status")),
        "error_kind": _str(rec.get("error_kind")), "error": _str(rec.get("error")),
        "termination": _str(rec.get("termination")), "answer": _str(rec.get("answer")),
        "score": _float(rec.get("score")) if rec.get("status") == "ok" else None,
        "score_reference": scores.get("reference"), "score_fixed": scores.get("fixed"),
        **{k: usage.get(k, 0) for k in TOKEN_KINDS}, "image_tokens": image_tokens(rec),
        **{k: usage.get(k, 0) for k in BATCH_TOKEN_COLUMNS},
        "cost_usd": info.cost(model, usage), "rounds": _int(rec.get("rounds")), "tool_calls": _int(rec.get("tool_calls")),
        "tool_errors": sum(1 for c in calls if c.get("status") == "error"), "latency_s": _float(rec.get("latency_s")),
        "retries": _int(rec.get("retries")), "fidelity": _str(meta.get("fidelity")),
    }


def round_rows(rec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One row per model request of a record (ROUNDS_SCHEMA), with the tool calls it made.

    A record written before turns were kept per request (no ``turn_by_round``) gives turn 0 to
    every request of a single-turn job and no turn (nor tool calls) to a multi-turn one.
    """
    traj = rec["trajectory"]
    prompts = [int(v) for v in traj.get("prompt_tokens_by_round") or [] if _int(v) is not None]
    completions = traj.get("completion_tokens_by_round") or []
    turns = traj.get("turn_by_round") or ([0] * len(prompts) if len(traj["usage_by_turn"]) <= 1 else [])
    calls: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for c in traj["tool_calls"]:
        calls.setdefault((_int(c.get("turn")) or 0, _int(c.get("round")) or 0), []).append(c)
    ident = {"job_id": _str(rec.get("job_id")), "model": _str(rec.get("model")), "suite": _str(rec.get("suite")),
             "setting": _str(rec.get("setting")), "seed": _int(rec.get("seed")), "task_id": _str(rec.get("task_id"))}
    in_turn: dict[int, int] = {}
    for i, prompt in enumerate(prompts):
        turn = _int(turns[i]) if i < len(turns) else None
        nth = None
        if turn is not None:
            nth = in_turn[turn] = in_turn.get(turn, 0) + 1
        made = calls.get((turn, nth), []) if turn is not None and nth is not None else []
        yield {**ident, "round": i + 1, "turn": turn, "round_in_turn": nth, "prompt_tokens": prompt,
               "completion_tokens": _int(completions[i]) if i < len(completions) else None,
               "tool_calls": len(made), "tool_names": [str(c.get("name")) for c in made],
               "tool_errors": sum(1 for c in made if c.get("status") == "error"),
               "tool_latency_s": sum(_float(c.get("latency_s")) or 0.0 for c in made),
               "tool_images": sum(len(c.get("images") or []) for c in made)}


class _Table:
    """A Parquet file written a row group at a time."""

    def __init__(self, path: Path, schema: pa.Schema, metadata: dict[bytes, bytes]) -> None:
        self.schema = schema.with_metadata(metadata)
        self.writer = pq.ParquetWriter(str(path), self.schema, compression="zstd")
        self.rows: list[dict[str, Any]] = []
        self.written = 0

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        self.rows.extend(rows)
        if len(self.rows) >= ROW_GROUP:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            # column by column: Table.from_pylist would import pandas (50 MB) to do the same
            columns = [pa.array([r[f.name] for r in self.rows], type=f.type) for f in self.schema]
            self.writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=self.schema), row_group_size=ROW_GROUP)
            self.written += len(self.rows)
            self.rows = []

    def close(self) -> None:
        self.flush()
        self.writer.close()


def rounds_path(out: Path) -> Path:
    """Where the rounds table goes beside the jobs table: ``jobs.parquet`` -> ``jobs.rounds.parquet``."""
    return out.with_name(f"{out.stem}.rounds{out.suffix or '.parquet'}")


def export_parquet(index: RunIndex, info: RunInfo, selection: Selection, dest: Path, *,
                   rounds_dest: Path | None = None) -> dict[str, Any]:
    """Write the jobs table to ``dest`` (and the rounds table to ``rounds_dest``); counts written."""
    meta = {b"fasteval": orjson.dumps({**info.provenance(), "table": "jobs"})}
    jobs = _Table(dest, JOBS_SCHEMA, meta)
    per_round = None
    if rounds_dest is not None:
        per_round = _Table(rounds_dest, ROUNDS_SCHEMA, {b"fasteval": orjson.dumps({**info.provenance(),
                                                                                  "table": "rounds"})})
    try:
        for rec in records(index, **selection.filters()):
            jobs.add((job_row(info, rec),))
            if per_round is not None:
                per_round.add(round_rows(rec))
    finally:
        jobs.close()
        if per_round is not None:
            per_round.close()
    return {"jobs": jobs.written, "rounds": per_round.written if per_round is not None else None}
