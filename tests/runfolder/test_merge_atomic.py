"""``fasteval merge`` is atomic: a ``kill -9`` leaves no partial target, and a rerun completes it."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from fasteval.runfolder.index import open_index
from fasteval.runfolder.merge import MergeConflict, merge_runs
from fasteval.runfolder.records import RECORDS
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

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def _shards(tmp_path: Path, n: int, *, n_tasks: int, size: int) -> list[Path]:
    rng = random.Random(4)
    jobs = random_jobs(rng, n_tasks=n_tasks)
    out = []
    for i in range(n):
        run = tmp_path / f"s{i}"
        mine = [j for j in jobs if int(j.job_id, 16) % n == i]
        manifest(run, mine)
        # errors, then a rerun of some of them: each shard has superseded lines
        recs = [make_record(rng, j, size=size) for j in mine]
        recs += [make_record(rng, j, ok=True, size=size) for j, r in zip(mine, recs, strict=True)
                 if r.status == "error" and rng.random() < 0.5]
        (run / "blobs" / "ab").mkdir(parents=True)
        (run / "blobs" / "ab" / f"ab{i:062d}").write_bytes(b"img%d" % i)
        with open_index(run) as index:
            asyncio.run(write(run, recs, index))
        out.append(run)
    return out


def _expected(sources: list[Path]) -> list[bytes]:
    return merged_reference(sources)


@pytest.mark.slow
def test_merge_killed_at_random_moments_leaves_no_target_and_a_rerun_completes_it(tmp_path: Path) -> None:
    sources = _shards(tmp_path, 4, n_tasks=150, size=20_000)
    out = tmp_path / "merged"
    rng = random.Random(9)
    midway = 0
    for _ in range(3):
        proc = subprocess.Popen([*FASTEVAL, "merge", str(out), *map(str, sources)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(tmp_path.glob(".merged.merge-*/records.jsonl")):
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if out.exists():  # the kill came after the rename: the merge is whole
            break
        midway += bool(list(tmp_path.glob(".merged.merge-*")))
        # never a half-merged target: a later status says "not a run folder", not wrong counts
        with pytest.raises(FileNotFoundError):
            status(out)
    assert midway, "no kill landed while the merge was writing"
    res = subprocess.run([*FASTEVAL, "merge", str(out), *map(str, sources), "--format", "json"], capture_output=True,
                         text=True, timeout=300) if not out.exists() else None
    if res is not None:
        assert res.returncode == 0, res.stderr
        assert orjson.loads(res.stdout)["records"] == len(_expected(sources))
    assert (out / RECORDS).read_bytes().splitlines(keepends=True) == _expected(sources)
    assert not list(tmp_path.glob(".merged.merge-*"))  # stale temp folders cleaned
    assert sorted(p.name for p in (out / "blobs" / "ab").iterdir()) == [f"ab{i:062d}" for i in range(4)]
    with open_index(out) as index:
        assert not index.rebuilt and index_rows(index) == full_scan_rows(out)
    assert status(out)["total"] == sum(status(s)["total"] for s in sources)
    again = subprocess.run([*FASTEVAL, "merge", str(out), *map(str, sources)], capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_merge_refuses_disagreeing_duplicates_and_mixed_configs(tmp_path: Path) -> None:
    rng = random.Random(1)
    jobs = random_jobs(rng, n_tasks=2, seeds=1)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for run in (a, b):
        manifest(run, jobs)
    manifest(c, jobs, config_hash="other")
    asyncio.run(write(a, [make_record(rng, j, ok=True) for j in jobs], None))
    same = [orjson.loads(ln) for ln in (a / RECORDS).read_bytes().splitlines()]
    (b / RECORDS).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in same))
    merge_runs(tmp_path / "ok", [a, b])  # identical duplicates are fine
    assert len((tmp_path / "ok" / RECORDS).read_bytes().splitlines()) == len(jobs)
    same[0]["answer"] = "something else"
    (b / RECORDS).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in same))
    with pytest.raises(MergeConflict, match=f"job {same[0]['job_id']} appears twice with different answer"):
        merge_runs(tmp_path / "bad", [a, b])
    assert not (tmp_path / "bad").exists() and not list(tmp_path.glob(".bad.merge-*"))
    with pytest.raises(MergeConflict, match="different configs"):
        merge_runs(tmp_path / "mixed", [a, c])
