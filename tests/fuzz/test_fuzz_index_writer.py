"""Fuzzing the record writer and the run index with arbitrary JSON values in every field.

Whatever a server, a dataset row or a scorer puts in a record (ints past 64 bits, floats past
float range, lone surrogates, nested objects where a string belongs), the record is written,
the writer never raises, and the index holds every line it can as a clamped row and counts the
rest as bad lines. A rebuild from the records gives the same rows, and every reader (sums
included) answers.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fasteval.core.types import Record
from fasteval.runfolder.index import open_index, rebuild_index
from fasteval.runfolder.index_rows import COLUMNS
from fasteval.runfolder.records import RecordWriter

INT_MAX, INT_MIN = 2**63 - 1, -(2**63)  # what an SQLite INTEGER holds
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

# Surrogates included: a model's or a tool's text can hold what no UTF-8 encoder writes.
texts = st.text(st.characters(blacklist_categories=()), max_size=12)
scalars = (st.none() | st.booleans() | st.integers() | st.integers(2**62, 2**66) | st.integers(-(2**66), -(2**62))
           | st.floats() | texts)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(texts, inner, max_size=3), max_leaves=8)
usage = st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "cache_read_tokens",
                                         "cache_write_tokens", "other"]), values, max_size=5)
FIELDS = ("model", "suite", "setting", "task_id", "seed", "status", "score", "answer", "error", "error_kind",
          "termination", "rounds", "tool_calls", "latency_s", "retries")
records = st.builds(lambda i, fields, u, meta: Record(job_id=f"job{i}", **{**_defaults(), **fields},
                                                      usage=u, metadata=meta),
                    st.integers(0, 5), st.fixed_dictionaries({}, optional={f: values for f in FIELDS}), usage,
                    st.dictionaries(st.sampled_from(["task_type", "other"]), values, max_size=2))


def _defaults() -> dict[str, Any]:
    return {"model": "m", "suite": "s", "setting": "x", "task_id": "t", "seed": 0, "status": "ok", "score": 1.0,
            "answer": "a"}


def _check_rows(run_dir: Path) -> list[tuple[Any, ...]]:
    with open_index(run_dir) as idx:
        rows = list(idx.select(list(COLUMNS)))
        for row in rows:
            for v in row:
                assert v is None or isinstance(v, str | int | float)
                if isinstance(v, int):
                    assert INT_MIN <= v <= INT_MAX
        n, *sums = idx.sums(["prompt_tokens", "completion_tokens", "rounds", "tool_calls", "retries", "seed"])
        assert n == len(rows) and all(INT_MIN <= s <= INT_MAX for s in sums)
        list(idx.rows(order="key"))
        idx.counts(by=("model", "task_type"))
        return rows


@pytest.mark.slow
@FUZZ
@given(st.lists(records, min_size=1, max_size=6))
# found by this test: a task_type list holding an int past 64 bits (written as its digits, a string)
@example([Record(job_id="job0", **{**_defaults(), "metadata": {"task_type": [-(1 << 63) - 1]}})])
def test_the_writer_writes_every_record_and_indexes_what_it_can(batch: list[Record]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)

        async def write_all() -> RecordWriter:
            with open_index(run_dir) as idx:
                writer = RecordWriter(run_dir / "records.jsonl", fsync="never", index=idx)
                await writer.start()
                for rec in batch:
                    writer.write(rec)
                await writer.close()
                return writer

        writer = asyncio.run(write_all())
        assert writer.failure is None and writer.index is not None
        lines = (run_dir / "records.jsonl").read_bytes().splitlines()
        assert len(lines) == len(batch)  # nothing lost
        assert [orjson.loads(line)["job_id"] for line in lines] == [r.job_id for r in batch]
        written = _check_rows(run_dir)
        assert len(written) == len({r.job_id for r in batch})
        rebuild_index(run_dir)
        assert sorted(_check_rows(run_dir)) == sorted(written)  # the writer's rows are the rebuild's


line_dicts = st.dictionaries(st.sampled_from(["job_id", *FIELDS, "usage", "metadata"]), values, max_size=10)


@FUZZ
@given(st.lists(line_dicts, min_size=1, max_size=6))
def test_the_index_reads_any_json_line_as_a_row_or_a_bad_line(docs: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        with (run_dir / "records.jsonl").open("w") as f:
            for d in docs:  # stdlib json: any int as digits, inf as Infinity, surrogates escaped
                f.write(json.dumps(d).replace("\n", " ") + "\n")
        with open_index(run_dir) as idx:
            stats = idx.stats()
        rows = _check_rows(run_dir)
        readable = []
        for line in (run_dir / "records.jsonl").read_bytes().splitlines():
            try:
                doc = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(doc, dict) and "job_id" in doc:
                readable.append(doc)
        # every line a reader can parse is indexed (clamped); only the others are bad lines
        assert stats["bad_lines"] == len(docs) - len(readable)
        assert stats["jobs"] == len(rows) <= len(readable)
        assert (stats["jobs"] == 0) == (not readable)
