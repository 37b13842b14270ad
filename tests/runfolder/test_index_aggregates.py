"""The index's aggregates and resume set agree exactly with a full read of the records, however the
rows got there: errors, reruns, rescored lines, hostile values, rebuilds, merges, a writer without
triggers, tampering."""

from __future__ import annotations

import asyncio
import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from fasteval.core.types import Record
from fasteval.runfolder.index import INDEX, open_index
from fasteval.runfolder.merge import merge_runs
from fasteval.view.report import report, status
from tests.runfolder.index_support import (
    assert_derived_agree,
    full_scan_rows,
    make_record,
    manifest,
    random_jobs,
    write,
)


def _hostile(rng: random.Random, rec: Record) -> Record:
    """Values the limbs or 64 bits cannot hold, now and then."""
    roll = rng.random()
    if rec.status == "ok" and roll < 0.05:
        rec.score = rng.choice((1e-5, 3e-12, 700.0, -2.5, 1 / 3, None))
    elif roll < 0.08:
        rec.usage["prompt_tokens"] = rng.choice((2**63 - 1, 2**64 + 5))
    elif rec.status == "ok" and roll < 0.2:
        rec.score = rng.choice((0.0, 1.0))
    return rec


async def _history(rng: random.Random, run: Path, sessions: int, shard: tuple[int, int] = (0, 1)) -> None:
    jobs = [j for j in random_jobs(rng, n_tasks=rng.randrange(3, 9), seeds=rng.randrange(1, 4))
            if int(j.job_id, 16) % shard[1] == shard[0]]
    manifest(run, jobs)
    for session in range(sessions):
        batch = [_hostile(rng, make_record(rng, j, size=50, rescored=session > 0 and rng.random() < 0.3))
                 for j in rng.sample(jobs, rng.randrange(1, len(jobs)))]
        with open_index(run) as index:
            await write(run, batch, index)
            assert_derived_agree(run, index)


@pytest.mark.parametrize("seed", range(5))
async def test_aggregates_and_resume_set_agree_with_a_rescan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    run = tmp_path / "run"
    await _history(rng, run, sessions=4)
    (run / INDEX).unlink()  # a rebuild from scratch derives them in one pass: the same answers
    for name in ("index.sqlite-wal", "index.sqlite-shm"):
        (run / name).unlink(missing_ok=True)
    with open_index(run) as index:
        assert index.rebuilt
        assert_derived_agree(run, index)


async def test_a_merge_of_shards_with_duplicates_derives_them_from_its_rows(tmp_path: Path) -> None:
    shards = [tmp_path / f"s{i}" for i in range(3)]
    for i, s in enumerate(shards):
        await _history(random.Random(7), s, sessions=2, shard=(i, 3))
    await asyncio.to_thread(merge_runs, tmp_path / "merged", shards)
    with open_index(tmp_path / "merged") as index:  # no duplicate: the sources' sums added up
        assert not index.rebuilt
        assert_derived_agree(tmp_path / "merged", index)
    twin = tmp_path / "twin"  # the same records twice: duplicates dropped, derived from the rows
    shutil.copytree(shards[0], twin)
    await asyncio.to_thread(merge_runs, tmp_path / "merged2", [shards[0], twin, shards[1]])
    with open_index(tmp_path / "merged2") as index:
        assert not index.rebuilt
        assert_derived_agree(tmp_path / "merged2", index)


async def test_an_index_without_its_triggers_or_with_tampered_aggregates_heals(tmp_path: Path) -> None:
    """An older fasteval writes rows without the triggers; a damaged table: the next open sees it
    (the counts disagree, a trigger is missing) and derives both from the rows again."""
    rng = random.Random(3)
    run = tmp_path / "run"
    await _history(rng, run, sessions=1)
    db = sqlite3.connect(run / INDEX)
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        db.execute(f"DROP TRIGGER {name}")
    db.commit()
    db.close()
    jobs = random_jobs(rng, n_tasks=4, seeds=1)
    with open_index(run) as index:  # the writer after the open keeps them again
        await write(run, [make_record(rng, j) for j in jobs], index)
    with open_index(run) as index:
        assert_derived_agree(run, index)
    db = sqlite3.connect(run / INDEX)
    db.execute("UPDATE agg SET n = n + 1 WHERE status = 'ok'")
    db.execute("DELETE FROM done_blob")
    db.commit()
    db.close()
    with open_index(run) as index:
        assert_derived_agree(run, index)


async def test_status_counts_and_the_leaderboard_read_equal_a_rescan(tmp_path: Path) -> None:
    rng = random.Random(5)
    run = tmp_path / "run"
    await _history(rng, run, sessions=3)
    rows = list(full_scan_rows(run).values())
    st = status(run)
    assert st["done"] == sum(r[6] == "ok" for r in rows)
    assert st["error"] == len(rows) - st["done"]
    for model in {r[1] for r in rows}:
        mine = [r for r in rows if r[1] == model]
        assert st["by_model"][model]["done"] == sum(r[6] == "ok" for r in mine)
    kinds = {(e["model"], e["error_kind"]): e["jobs"] for e in st["errors_by_kind"]}
    assert sum(kinds.values()) == sum(r[6] == "error" for r in rows)
    full, light = report(run)["rows"], report(run, per_task=False)["rows"]
    per_task = ("ci95", "n_tasks", "pass_at_k", "pass_pow_k")
    assert [{k: v for k, v in r.items() if k not in per_task} for r in full] == \
        [{k: v for k, v in r.items() if k not in per_task} for r in light]
