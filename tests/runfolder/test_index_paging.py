"""Pages of the run index (the viewer's) in file or key order: complete, and never a full re-sort."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Literal

import pytest

from fasteval.runfolder.index import _ORDER, open_index
from tests.runfolder.index_support import make_record, manifest, random_jobs, write


@pytest.mark.parametrize("order", ["offset", "key"])
def test_pages_cover_every_row_once_in_order_without_sorting(tmp_path: Path, order: Literal["offset", "key"]) -> None:
    rng = random.Random(11)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=12)
    manifest(run, jobs)
    recs = [make_record(rng, rng.choice(jobs), size=80) for _ in range(150)]
    with open_index(run) as index:
        asyncio.run(write(run, recs, index))
    with open_index(run) as index:
        whole = list(index.rows(order=order))
        key = (lambda r: r.offset) if order == "offset" else (
            lambda r: (r.model, r.suite, r.setting, r.task_id, r.seed, r.job_id))
        assert whole == sorted(whole, key=key) and len(whole) == index.count()
        pages = [list(index.rows(order=order, limit=7, skip=s)) for s in range(0, len(whole), 7)]
        assert [r for p in pages for r in p] == whole
        errors = list(index.rows(order=order, status="error"))
        assert errors == [r for r in whole if r.status == "error"]
        plan = " ".join(str(row) for row in index._db.execute(
            f"EXPLAIN QUERY PLAN SELECT * FROM jobs{index._where({}, keyed=order == 'key')[0]} ORDER BY {_ORDER[order]} "
                "LIMIT 7 OFFSET 70"))
        assert "TEMP B-TREE" not in plan, plan


def test_an_index_from_before_the_secondary_indexes_gains_them_on_open(tmp_path: Path) -> None:
    rng = random.Random(12)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=3)
    manifest(run, jobs)
    with open_index(run) as index:
        asyncio.run(write(run, [make_record(rng, j) for j in jobs], index))
        index._db.execute("DROP INDEX jobs_offset")
        index._db.execute("DROP INDEX jobs_key")
    with open_index(run) as index:
        names = {n for (n,) in index._db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"jobs_offset", "jobs_key"} <= names and not index.rebuilt


def test_statistics_steer_whole_run_reads_off_the_key_index(tmp_path: Path) -> None:
    """One (model, suite, setting) holding the whole run is read by one pass, not a lookup per row."""
    rng = random.Random(13)
    run = tmp_path / "run"
    jobs = [j for j in random_jobs(rng, n_tasks=600) if (j.model, j.suite) == ("m-a", "jsonl")]
    manifest(run, jobs)
    asyncio.run(write(run, [make_record(rng, j, size=20) for j in jobs * 2], None))
    with open_index(run) as index:
        assert index.count() == len(jobs) >= 1000
        stats = dict(index._db.execute("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'jobs'").fetchall())
        assert int(stats["jobs_key"].split()[0]) == len(jobs)
        plan = " ".join(str(r) for r in index._db.execute(
            "EXPLAIN QUERY PLAN SELECT score FROM jobs WHERE model = 'm-a' AND suite = 'jsonl' AND setting = 'default' "
            "ORDER BY byte_offset"))
        assert "jobs_key" not in plan, plan
        assert index.counts(by=("model",)) == {("m-a",): dict(index.counts()[()])}
