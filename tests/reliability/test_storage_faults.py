"""Full disk, a run folder deleted mid-run, a read-only run folder: one line, the right exit code.

Each fault is real: a small tmpfs filled while the sweep runs, ``rm -rf`` of the run folder, a
tmpfs remounted read-only. After the fault, what was saved is intact and a rerun finishes.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.exitcodes import EXIT_INCOMPLETE, EXIT_USAGE, RunIncomplete
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.index import open_index
from fasteval.runfolder.records import RecordWriter
from providers.sim import SimModel, SimServer
from tests.reliability.storage_support import fill_disk, remount_read_only, tmpfs

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def demo_config(tmp: Path, *, n_tasks: int, seeds: int = 1, latency_ms: float = 20, models: list[dict[str, Any]]
                | None = None) -> Path:
    cfg = {
        "seeds": seeds,
        "models": models or [{"name": "sim-tools", "provider": "sim", "policy": "tools", "latency_ms": latency_ms}],
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [96, 64]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
        "run": {"max_concurrency": 4, "fsync": "always"},
    }
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def record_lines(run_dir: Path) -> list[bytes]:
    p = run_dir / "records.jsonl"
    return p.read_bytes().splitlines(keepends=True) if p.exists() else []


def wait_for_records(run_dir: Path, n: int, proc: subprocess.Popen[str] | None = None) -> None:
    for _ in range(1200):
        if len(record_lines(run_dir)) >= n or (proc is not None and proc.poll() is not None):
            return
        time.sleep(0.05)


def assert_one_line(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "Unclosed" not in stderr, stderr
    assert "Logging error" not in stderr, stderr


@pytest.mark.slow
def test_full_disk_stops_at_the_first_failed_write_and_a_rerun_finishes(tmp_path: Path) -> None:
    cfg = demo_config(tmp_path, n_tasks=200)
    with tmpfs(tmp_path / "disk", "32m") as disk:
        run_dir = disk / "run"
        proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=disk)
        wait_for_records(run_dir, 5, proc)
        filler = disk / "filler"
        fill_disk(filler)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == EXIT_INCOMPLETE, err
        assert "disk full writing run/" in err and "free space, then rerun" in err, err
        assert_one_line(err)
        saved = record_lines(run_dir)
        assert 5 <= len(saved) < 200  # stopped early, not after running every job
        assert all(ln.endswith(b"\n") for ln in saved)  # no torn line left behind
        ids = [orjson.loads(ln)["job_id"] for ln in saved]
        assert len(ids) == len(set(ids))
        assert not list((run_dir / "blobs").glob("*/*.tmp-*"))  # no temp blob left behind
        filler.unlink()
        done = subprocess.run([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        final = record_lines(run_dir)
        assert final[: len(saved)] == saved  # finished records untouched, byte for byte
        final_ids = [orjson.loads(ln)["job_id"] for ln in final]
        assert len(final_ids) == len(set(final_ids)) == 200


@pytest.mark.slow
async def test_full_disk_sends_no_new_requests_after_the_failed_write(tmp_path: Path) -> None:
    """The model endpoint sees only the requests of jobs already in flight when the disk filled."""
    sim = SimServer([SimModel.from_config("ext", {"policy": "tools", "latency_ms": 20})])
    await sim.start()
    try:
        cfg_path = demo_config(tmp_path, n_tasks=2000, models=[
            {"name": "ext", "provider": "openai", "base_url": sim.base_url, "model": "ext"}])
        cfg = load_config(cfg_path)
        with tmpfs(tmp_path / "disk", "16m") as disk:
            run_dir = disk / "run"
            sweep = asyncio.create_task(run_sweep(cfg, RunOptions(run_dir=run_dir, progress=False)))
            for _ in range(1200):  # the first records are on disk: the sweep is running
                if len(record_lines(run_dir)) >= 5 or sweep.done():
                    break
                await asyncio.sleep(0.05)
            await asyncio.to_thread(fill_disk, disk / "filler")
            requests_at_fill = sim.requests
            with pytest.raises(RunIncomplete, match="disk full writing"):
                await sweep
            # at most the rounds of the 4 jobs in flight (the sim's tools policy: a few rounds each)
            assert sim.requests - requests_at_fill <= 4 * 10
            assert len(record_lines(run_dir)) < 2000
    finally:
        await sim.stop()


def test_run_folder_deleted_mid_run_stops_with_exit_3(tmp_path: Path) -> None:
    import shutil

    cfg = demo_config(tmp_path, n_tasks=400)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    wait_for_records(run_dir, 5, proc)
    shutil.rmtree(run_dir, ignore_errors=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INCOMPLETE, err
    assert "was deleted or moved while running" in err, err
    assert_one_line(err)
    assert " ok, " not in err  # nothing claimed as done


@pytest.mark.slow
@pytest.mark.parametrize("existing", [False, True])
def test_read_only_run_folder_is_one_line_and_exit_2(tmp_path: Path, existing: bool) -> None:
    cfg = demo_config(tmp_path, n_tasks=2)
    with tmpfs(tmp_path / "disk", "4m") as disk:
        run_dir = disk / "run"
        if existing:
            first = subprocess.run([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                                   capture_output=True, text=True, timeout=120)
            assert first.returncode == 0, first.stderr
        remount_read_only(disk)
        res = subprocess.run([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == EXIT_USAGE, res.stderr
        assert "Read-only file system" in res.stderr and "writable --run-dir" in res.stderr
        assert res.stderr.strip().count("\n") == 0, res.stderr  # one line


async def test_stale_temp_blobs_of_dead_writers_are_cleaned_at_start(tmp_path: Path) -> None:
    cfg = load_config(demo_config(tmp_path, n_tasks=1, latency_ms=0))
    run_dir = tmp_path / "run"
    shard = run_dir / "blobs" / "ab"
    shard.mkdir(parents=True)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import os; print(os.getpid())",
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()  # a pid whose process has exited
    stale = shard / f"ab12.tmp-{out.decode().strip()}-0123456789ab"
    live = shard / "ab34.tmp-1-0123456789ab"  # pid 1 is alive: another writer, left alone
    stale.write_bytes(b"")
    live.write_bytes(b"")
    await run_sweep(cfg, RunOptions(run_dir=run_dir, progress=False))
    assert not stale.exists() and live.exists()


def test_a_disk_already_full_at_start_is_one_line_and_exit_3(tmp_path: Path) -> None:
    cfg = demo_config(tmp_path, n_tasks=2)
    with tmpfs(tmp_path / "disk", "1m") as disk:
        fill_disk(disk / "filler")
        res = subprocess.run([*FASTEVAL, "run", str(cfg), "--run-dir", str(disk / "run"), "--no-progress"],
                             capture_output=True, text=True, timeout=120, cwd=disk)
        assert res.returncode == EXIT_INCOMPLETE, res.stderr
        assert res.stderr.strip() == "error: disk full writing run/manifest.json: free space, then rerun"



async def test_a_disk_that_fills_before_the_writer_starts_is_the_disk_full_line(tmp_path: Path) -> None:
    """The record writer's start indexes what is there (a fresh folder's index is made again): a
    disk that filled since the index was opened is the sweep's one disk-full line (exit 3), never
    SQLite's 'database or disk is full' escaping as a traceback."""
    with tmpfs(tmp_path / "disk", "4m") as disk:
        run_dir = disk / "run"
        run_dir.mkdir()
        index = open_index(run_dir)
        try:
            fill_disk(disk / "filler")
            writer = RecordWriter(run_dir / "records.jsonl", fsync="always", index=index)
            with pytest.raises(RunIncomplete, match=r"^disk full writing run/index"):
                cwd = Path.cwd()
                os.chdir(disk)
                try:
                    await writer.start()
                finally:
                    os.chdir(cwd)
        finally:
            index.close()
