"""``merge`` planned from the sources' indexes: the same lines a full scan would choose, an index
that agrees with the merged records without a rebuild, duplicates chosen or refused as before."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from fasteval.core.types import Job, Record
from fasteval.runfolder.index import RunIndex, _connect, open_index
from fasteval.runfolder.merge import MergeConflict, merge_runs
from fasteval.runfolder.merged_index import write_merged
from fasteval.runfolder.records import RECORDS, latest_by_job
from fasteval.view.report import status
from tests.runfolder.index_support import (
    full_scan_rows,
    index_rows,
    make_record,
    manifest,
    merged_reference,
    random_jobs,
    write,
)


def _same_result(rng: random.Random, rec: dict[str, Any]) -> Record:
    """Another run of the same job that agrees on everything merge compares (not on latency)."""
    job = Job(rec["model"], rec["suite"], rec["setting"], rec["task_id"], rec["seed"])
    twin = make_record(rng, job, ok=rec["status"] == "ok")
    twin.score, twin.answer = rec["score"], rec["answer"]
    return twin


def _random_sources(tmp_path: Path, rng: random.Random, n: int) -> list[Path]:
    """Shards with errors, reruns, overlapping (agreeing) jobs, garbage lines, unindexed lines
    and a torn tail: everything a real set of shard folders can hold."""
    jobs = random_jobs(rng, n_tasks=rng.randrange(2, 7))
    out = []
    shared: list[dict[str, Any]] = []
    owner = {j: rng.randrange(n) for j in jobs}
    for i in range(n):
        run = tmp_path / f"s{i}"
        mine = [j for j in jobs if owner[j] == i]
        manifest(run, mine)
        recs = [make_record(rng, j, size=rng.choice((50, 700, 3000))) for j in mine]
        recs += [make_record(rng, j, ok=rng.random() < 0.8) for j in mine if rng.random() < 0.3]  # reruns
        recs += [_same_result(rng, r) for r in shared if rng.random() < 0.5]  # overlap with earlier shards
        rng.shuffle(recs)
        with open_index(run) as index:
            asyncio.run(write(run, recs, index))
        with (run / RECORDS).open("ab") as f:
            if rng.random() < 0.3:
                f.write(b'{"not": "a record"}\n')
            if mine and rng.random() < 0.4:  # appended after the last index update (a kill in between)
                f.write(orjson.dumps(make_record(rng, rng.choice(mine), ok=False)) + b"\n")
            if rng.random() < 0.3:
                f.write(b'{"job_id": "torn')
        shared += [r for r in latest_by_job([run / RECORDS]).values() if r["status"] == "ok" and rng.random() < 0.4]
        out.append(run)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_merge_matches_a_full_scan_and_its_index_needs_no_rebuild(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    sources = _random_sources(tmp_path, rng, rng.randrange(1, 5))
    res = merge_runs(tmp_path / "merged", sources)
    lines = (tmp_path / "merged" / RECORDS).read_bytes().splitlines(keepends=True)
    assert lines == merged_reference(sources)
    assert res["records"] == len(lines)
    with open_index(tmp_path / "merged") as index:
        assert not index.rebuilt
        assert index_rows(index) == full_scan_rows(tmp_path / "merged")
        assert index.stats()["indexed_bytes"] == sum(map(len, lines))
    assert status(tmp_path / "merged")["done"] + status(tmp_path / "merged")["error"] == len(lines)


def test_more_sources_than_sqlite_can_attach_at_once(tmp_path: Path) -> None:
    rng = random.Random(5)
    jobs = random_jobs(rng, n_tasks=6)
    sources = []
    for i in range(14):
        run = tmp_path / f"s{i}"
        mine = jobs[i::14]
        manifest(run, mine)
        with open_index(run) as index:
            asyncio.run(write(run, [make_record(rng, j) for j in mine], index))
        sources.append(run)
    assert merge_runs(tmp_path / "merged", sources)["records"] == len(jobs)
    assert (tmp_path / "merged" / RECORDS).read_bytes().splitlines(keepends=True) == merged_reference(sources)


def test_an_ok_rerun_in_a_later_shard_wins_and_a_disagreeing_one_is_refused(tmp_path: Path) -> None:
    rng = random.Random(2)
    jobs = random_jobs(rng, n_tasks=2, seeds=1)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for run in (a, b, c):
        manifest(run, jobs)
    asyncio.run(write(a, [make_record(rng, j, ok=False) for j in jobs], None))
    oks = [make_record(rng, j, ok=True) for j in jobs]
    asyncio.run(write(b, oks, None))
    merge_runs(tmp_path / "ab", [a, b])
    merged = [orjson.loads(ln) for ln in (tmp_path / "ab" / RECORDS).read_bytes().splitlines()]
    assert {r["job_id"]: r["status"] for r in merged} == {j.job_id: "ok" for j in jobs}
    as_dicts = [orjson.loads(orjson.dumps(r)) for r in oks]
    other = _same_result(rng, as_dicts[1])
    other.answer = "something else"
    asyncio.run(write(c, [_same_result(rng, as_dicts[0]), other], None))
    with pytest.raises(MergeConflict, match=f"job {jobs[1].job_id} appears twice with different answer .in {c}"):
        merge_runs(tmp_path / "abc", [a, b, c])
    assert not (tmp_path / "abc").exists() and not list(tmp_path.glob(".abc.merge-*"))


def test_a_source_indexed_in_memory_merges_like_one_on_disk(tmp_path: Path) -> None:
    """A read-only shard folder's index lives in memory: the merge plans from a copy of it."""
    rng = random.Random(6)
    sources = _random_sources(tmp_path, rng, 2)
    (sources[1] / "index.sqlite").unlink()
    memory = RunIndex(sources[1], _connect(":memory:"), None)  # what open_index gives a read-only folder
    memory.refresh()
    out = tmp_path / "out"
    out.mkdir()
    with open_index(sources[0]) as first:
        n = write_merged(out, [first, memory], lambda job_id, cands: next((c for c in cands if c.ok), cands[0]).source)
    memory.close()
    assert sorted(p.name for p in out.iterdir()) == ["index.sqlite", RECORDS]  # the copy is gone
    assert (out / RECORDS).read_bytes().splitlines(keepends=True) == merged_reference(sources)
    with open_index(out) as index:
        assert not index.rebuilt and index.count() == n
        assert index_rows(index) == full_scan_rows(out)


def test_a_run_merged_with_itself_and_an_empty_shard_is_the_run(tmp_path: Path) -> None:
    rng = random.Random(9)
    (src,) = _random_sources(tmp_path, rng, 1)
    empty = tmp_path / "empty"
    manifest(empty, [])
    res = merge_runs(tmp_path / "merged", [src, empty, src])  # every job a duplicate of itself
    lines = (tmp_path / "merged" / RECORDS).read_bytes().splitlines(keepends=True)
    assert lines == merged_reference([src]) and res["records"] == len(lines)
    with open_index(tmp_path / "merged") as index:
        assert not index.rebuilt and index_rows(index) == full_scan_rows(tmp_path / "merged")
    merge_runs(tmp_path / "nothing", [empty])
    assert (tmp_path / "nothing" / RECORDS).read_bytes() == b""
    with open_index(tmp_path / "nothing") as index:
        assert not index.rebuilt and index.count() == 0
