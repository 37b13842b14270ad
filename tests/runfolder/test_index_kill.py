"""``kill -9`` at random moments, large records: the index and every reader still agree with the records."""

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
from fasteval.runfolder.records import RECORDS, latest_by_job, repair_tail
from fasteval.view.report import report, status
from tests.engine.test_resume import make_config
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

# Writes records of the given sizes (bytes of trajectory) through RecordWriter + index, forever.
_WRITER = r"""
import asyncio, random, sys
from pathlib import Path
from fasteval.runfolder.records import RECORDS, RecordWriter
from fasteval.runfolder.index import open_index
from tests.runfolder.index_support import make_record, random_jobs

async def main(run_dir, sizes, count):
    rng = random.Random(int(sys.argv[4]))
    jobs = random_jobs(rng, n_tasks=3)
    index = open_index(run_dir)
    writer = RecordWriter(run_dir / RECORDS, fsync="never", index=index)
    await writer.start()
    n = 0
    while count < 0 or n < count:
        writer.write(make_record(rng, jobs[n % len(jobs)], size=sizes[n % len(sizes)]))
        n += 1
        await asyncio.sleep(0)
    await writer.close()
    index.close()

asyncio.run(main(Path(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")], int(sys.argv[3])))
"""


def _writer(run_dir: Path, sizes: list[int], count: int, seed: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(run_dir), ",".join(map(str, sizes)), str(count),
                             str(seed)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _complete_lines(run_dir: Path) -> list[bytes]:
    data = (run_dir / RECORDS).read_bytes()
    return data[: data.rfind(b"\n") + 1].splitlines(keepends=True)


def _agree(run_dir: Path) -> None:
    with open_index(run_dir) as index:
        assert index_rows(index) == full_scan_rows(run_dir)
        for job_id, rec in latest_by_job([run_dir / RECORDS]).items():
            assert index.read_record(job_id) == rec
        assert_derived_agree(run_dir, index)  # aggregates and the resume set healed like the rows


@pytest.mark.slow
def test_kill_9_during_sweeps_then_every_reader_agrees_with_a_full_scan(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, n_tasks=8, seeds=3, latency_ms=30)
    run_dir = tmp_path / "run"
    rng = random.Random(11)
    for _ in range(4):
        proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):  # wait for the sweep to be writing, then kill at a random moment
            if (run_dir / RECORDS).exists() and (run_dir / RECORDS).stat().st_size > 0:
                break
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _agree(run_dir)
        latest = latest_by_job([run_dir / RECORDS])
        st = orjson.loads(subprocess.run([*FASTEVAL, "status", str(run_dir), "--format", "json"],
                                         capture_output=True, timeout=120).stdout)
        ok = sum(r["status"] == "ok" for r in latest.values())
        assert (st["total"], st["done"], st["error"]) == (48, ok, len(latest) - ok)
    done = subprocess.run([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    _agree(run_dir)
    ids = [orjson.loads(ln)["job_id"] for ln in _complete_lines(run_dir)]
    assert len(ids) == len(set(ids)) == 48
    assert status(run_dir)["done"] == 48
    assert sum(r["n_ok"] for r in report(run_dir)["rows"]) == 48


@pytest.mark.slow
def test_kill_9_while_writing_5_and_30_mb_records_then_resume_keeps_them_byte_identical(tmp_path: Path) -> None:
    run_dir = tmp_path / "big"
    run_dir.mkdir()
    mb = 1 << 20
    sizes = [5 * mb, 30 * mb, 2000]
    rng = random.Random(5)
    kept: list[bytes] = []
    for attempt in range(3):
        proc = _writer(run_dir, sizes, -1, attempt)
        deadline = time.monotonic() + 60
        # kill once at least one more big record is on disk, at a random moment after that
        while time.monotonic() < deadline and (
                not (run_dir / RECORDS).exists() or len(_complete_lines(run_dir)) <= len(kept) + 1):
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lines = _complete_lines(run_dir)
        assert lines[: len(kept)] == kept  # what was complete before stays, byte for byte
        assert all(orjson.loads(ln)["job_id"] for ln in lines)
        kept = lines
        _agree(run_dir)
    assert any(len(ln) > 30 * mb for ln in kept) and any(5 * mb < len(ln) < 8 * mb for ln in kept)
    # a clean resume: the torn tail (if any) goes, every complete record stays
    finish = _writer(run_dir, sizes, 3, 99)
    assert finish.wait(timeout=120) == 0, finish.stderr.read() if finish.stderr else ""
    final = (run_dir / RECORDS).read_bytes().splitlines(keepends=True)
    assert final[: len(kept)] == kept and len(final) == len(kept) + 3
    _agree(run_dir)


def test_repair_tail_keeps_a_long_valid_last_line_and_cuts_a_long_torn_one(tmp_path: Path) -> None:
    p = tmp_path / RECORDS
    first = b'{"job_id": "a"}\n'
    big = orjson.dumps({"job_id": "b", "pad": "x" * (3 << 20)}) + b"\n"
    p.write_bytes(first + big)
    assert repair_tail(p) == 0 and p.read_bytes() == first + big
    p.write_bytes(first + big[: (2 << 20) + 7])
    assert repair_tail(p) == (2 << 20) + 7 and p.read_bytes() == first
    p.write_bytes(first + b'{"job_id": "c", "pad": "' + b"y" * (3 << 20) + b'\n')  # complete but unparsable
    repair_tail(p)
    assert p.read_bytes() == first
    p.write_bytes(big[:-1])  # one huge torn line and nothing else
    assert repair_tail(p) == len(big) - 1 and p.read_bytes() == b""


async def test_large_records_are_indexed_read_and_merged_intact(tmp_path: Path) -> None:
    from fasteval.runfolder.merge import merge_runs

    rng = random.Random(2)
    jobs = random_jobs(rng, n_tasks=1, seeds=1)
    run = tmp_path / "run"
    manifest(run, jobs)
    records = [make_record(rng, jobs[0], ok=True, size=20 << 20), make_record(rng, jobs[1], ok=True, size=100)]
    with open_index(run) as index:
        await write(run, records, index)
    lines = (run / RECORDS).read_bytes().splitlines(keepends=True)
    with open_index(run) as index:
        assert index.read_line(0, len(lines[0])) == lines[0]
    await asyncio.to_thread(merge_runs, tmp_path / "merged", [run])
    merged = (tmp_path / "merged" / RECORDS).read_bytes().splitlines(keepends=True)
    assert sorted(merged) == sorted(lines)
    _agree(tmp_path / "merged")
