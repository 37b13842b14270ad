"""The run index agrees with a full scan of records.jsonl, whatever happened to either."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from fasteval.runfolder.index import INDEX, open_index
from fasteval.runfolder.index_rows import summarise_line
from fasteval.runfolder.records import RECORDS, latest_by_job
from fasteval.view.report import report, status
from tests.runfolder.index_support import (
    assert_derived_agree,
    full_scan_rows,
    index_rows,
    make_record,
    manifest,
    random_jobs,
    write,
)

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def _expected_status(run_dir: Path, total: int) -> tuple[int, int, int]:
    latest = latest_by_job([run_dir / RECORDS])
    done = sum(1 for r in latest.values() if r["status"] == "ok")
    return done, len(latest) - done, total - len(latest)


def _assert_agrees(run_dir: Path, total: int) -> None:
    with open_index(run_dir) as index:
        assert index_rows(index) == full_scan_rows(run_dir)
        latest = latest_by_job([run_dir / RECORDS])
        for job_id, rec in latest.items():
            assert index.read_record(job_id) == rec
        assert index.job_ids(ok_only=True) == {j for j, r in latest.items() if r["status"] == "ok"}
        assert index.job_ids() == set(latest)
        kinds = Counter(str(r.get("error_kind")) for r in latest.values() if r["status"] != "ok")
        assert {k[0]: sum(v.values()) for k, v in index.counts(by=("error_kind",), status="error").items()} == kinds
        assert_derived_agree(run_dir, index)
    st = status(run_dir)
    assert (st["done"], st["error"], st["remaining"]) == _expected_status(run_dir, total)
    rep = report(run_dir)
    groups: dict[tuple[str, str, str], list[dict[str, object]]] = {}
    for r in latest.values():
        groups.setdefault((r["model"], r["suite"], r["setting"]), []).append(r)
    assert [(r["model"], r["suite"], r["setting"]) for r in rep["rows"]] == sorted(groups)
    for row in rep["rows"]:
        items = groups[(row["model"], row["suite"], row["setting"])]
        ok = [r for r in items if r["status"] == "ok" and r["score"] is not None]
        assert (row["n_ok"], row["n_error"]) == (len(ok), len(items) - len(ok))


@pytest.mark.parametrize("seed", range(6))
async def test_index_matches_full_scan_over_random_histories(tmp_path: Path, seed: int) -> None:
    """Sessions of errors, reruns and rescores, with kills between a line and its index update,
    torn lines, deleted and corrupted indexes: every reader agrees with a full scan."""
    rng = random.Random(seed)
    run_dir = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=6)
    manifest(run_dir, jobs)
    for _ in range(6):
        batch = [make_record(rng, rng.choice(jobs), size=rng.choice((50, 800, 5000)),
                             rescored=rng.random() < 0.1) for _ in range(rng.randrange(1, 25))]
        event = rng.choice(("indexed", "unindexed", "torn", "drop-index", "garbage-index", "plain"))
        if event == "unindexed":  # killed after the records' write, before the index update
            with (run_dir / RECORDS).open("ab") as f:
                for rec in batch:
                    f.write(orjson.dumps(rec) + b"\n")
        else:
            with open_index(run_dir) as index:
                await write(run_dir, batch, index)
        if event == "torn":
            with (run_dir / RECORDS).open("ab") as f:
                line = orjson.dumps(make_record(rng, rng.choice(jobs))) + b"\n"
                f.write(line[: rng.randrange(1, len(line) - 1)])
        elif event == "drop-index":
            (run_dir / INDEX).unlink()
        elif event == "garbage-index":
            shutil.rmtree(run_dir / (INDEX + "-wal"), ignore_errors=True)
            for suffix in ("-wal", "-shm"):
                (run_dir / (INDEX + suffix)).unlink(missing_ok=True)
            (run_dir / INDEX).write_bytes(b"not a database" * 100)
        _assert_agrees(run_dir, len(jobs))


async def test_stale_foreign_or_tampered_index_is_rebuilt(tmp_path: Path) -> None:
    rng = random.Random(7)
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        jobs = random_jobs(rng, n_tasks=4)
        manifest(run, jobs)
        with open_index(run) as index:
            await write(run, [make_record(rng, j) for j in jobs], index)
    # another run's index copied in
    shutil.copy(b / INDEX, a / INDEX)
    with open_index(a) as index:
        assert index.rebuilt
    _assert_agrees(a, 32)
    # rows deleted behind the index's back
    db = sqlite3.connect(a / INDEX)
    db.execute("DELETE FROM jobs WHERE job_id IN (SELECT job_id FROM jobs LIMIT 3)")
    db.commit()
    db.close()
    with open_index(a) as index:
        assert index.rebuilt
    _assert_agrees(a, 32)
    # records rewritten with the same length but other content, then shortened
    data = bytearray((a / RECORDS).read_bytes())
    last_start = data[:-1].rfind(b"\n") + 1
    data[last_start:] = (orjson.dumps(make_record(rng, random_jobs(rng, 1)[0], size=10)) + b"\n")
    (a / RECORDS).write_bytes(bytes(data))
    with open_index(a) as index:
        assert index.rebuilt
    _assert_agrees(a, 32)
    (a / RECORDS).write_bytes(bytes(data[:last_start]))
    with open_index(a) as index:
        assert index.rebuilt
    _assert_agrees(a, 32)
    # records gone: an empty index, not stale rows
    (a / RECORDS).unlink()
    with open_index(a) as index:
        assert index.count() == 0


async def test_an_index_of_the_previous_schema_is_rebuilt_and_the_report_sums_image_tokens(tmp_path: Path) -> None:
    """Indexes written before ``image_tokens`` was a column are rebuilt from the records, not misread."""
    rng = random.Random(11)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=3)
    manifest(run, jobs)
    with open_index(run) as index:
        await write(run, [make_record(rng, j) for j in jobs], index)
    db = sqlite3.connect(run / INDEX)  # the schema-3 table: no image_tokens column, version 3, no triggers
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        db.execute(f"DROP TRIGGER {name}")
    db.execute("ALTER TABLE jobs DROP COLUMN image_tokens")
    db.execute("UPDATE meta SET value = '3' WHERE key = 'version'")
    db.commit()
    db.close()
    _assert_agrees(run, len(jobs))
    latest = latest_by_job([run / RECORDS]).values()
    for row in report(run)["rows"]:
        group = [r for r in latest if (r["model"], r["suite"], r["setting"]) == (row["model"], row["suite"], row["setting"])]
        images = sum(r["usage"]["image_tokens"] for r in group)
        assert row["image_tokens_per_trajectory"] == (images / len(group) if images else None)
    shown = [row for row in report(run)["rows"] if row["image_tokens_per_trajectory"]]
    assert shown
    done = await asyncio.to_thread(subprocess.run, [*FASTEVAL, "report", str(run)], capture_output=True, text=True,
                                   timeout=60, env={**os.environ, "COLUMNS": "250"})
    table = done.stdout
    assert "image tok/traj" in table and f"{shown[0]['image_tokens_per_trajectory']:.0f}" in table


def test_index_rebuild_command_and_read_only_folder(tmp_path: Path) -> None:
    rng = random.Random(3)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=3)
    manifest(run, jobs)
    asyncio.run(write(run, [make_record(rng, j) for j in jobs], None))
    assert not (run / INDEX).exists()
    res = subprocess.run([*FASTEVAL, "index", "rebuild", str(run)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert orjson.loads(res.stdout)["jobs"] == len(jobs)
    _assert_agrees(run, len(jobs))
    missing = subprocess.run([*FASTEVAL, "index", "rebuild", str(tmp_path / "nope")], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2 and "not a run folder" in missing.stderr
    if os.geteuid() == 0:
        return  # root writes anywhere: a read-only folder cannot be made here
    (run / INDEX).unlink()
    run.chmod(0o555)
    try:
        with open_index(run) as index:  # built in memory, nothing written
            assert index.path is None and index.count() == len(jobs)
        assert not (run / INDEX).exists()
    finally:
        run.chmod(0o755)


def test_a_torn_record_glued_to_a_whole_one_is_not_a_record() -> None:
    rng = random.Random(1)
    whole = orjson.dumps(make_record(rng, random_jobs(rng, 1)[0], size=100)) + b"\n"
    torn = whole[: whole.index(b'"trajectory"') + 30]
    assert summarise_line(whole) == orjson.loads(whole)
    assert summarise_line(torn + whole) is None
    assert summarise_line(b'{"no": "job"}\n') is None and summarise_line(b"{torn") is None


async def test_a_locked_index_never_stops_the_records(tmp_path: Path) -> None:
    """Another process holding the index's write lock: records are still written, the index heals."""
    from fasteval.runfolder.records import RecordWriter

    rng = random.Random(8)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=3)
    manifest(run, jobs)
    index = open_index(run)
    writer = RecordWriter(run / RECORDS, fsync="never", index=index, index_wait_s=0.1)
    await writer.start()
    blocker = sqlite3.connect(run / INDEX, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    for job in jobs:
        writer.write(make_record(rng, job))
    await writer.close()
    blocker.execute("ROLLBACK")
    blocker.close()
    assert writer.index is None  # given up, not waited on
    index.close()
    assert len((run / RECORDS).read_bytes().splitlines()) == len(jobs)
    _assert_agrees(run, len(jobs))


async def test_a_reader_rebuilding_while_the_writer_appends_loses_nothing(tmp_path: Path) -> None:
    from fasteval.runfolder.records import RecordWriter

    rng = random.Random(12)
    run = tmp_path / "run"
    jobs = random_jobs(rng, n_tasks=10)
    manifest(run, jobs)
    index = open_index(run)
    writer = RecordWriter(run / RECORDS, fsync="never", index=index)
    await writer.start()
    for job in jobs[:20]:
        writer.write(make_record(rng, job))
    await asyncio.sleep(0.05)  # written and indexed
    other = open_index(run)
    other._reset()  # a reader that found the index wrong starts over (as refresh does), not yet caught up
    for job in jobs[20:]:
        writer.write(make_record(rng, job))
    await writer.close()
    other.close()
    index.close()
    _assert_agrees(run, len(jobs))
