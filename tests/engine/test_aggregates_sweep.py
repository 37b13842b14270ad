"""Real sweeps on the sim with errors, reruns, a rescore, shards and a merge: the run index's
aggregates and resume set agree with a full read of the records at every step, and status,
the leaderboard and resume read them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.engine.offline.rescore import rescore
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.index import open_index
from fasteval.runfolder.merge import merge_runs
from fasteval.runfolder.records import RECORDS, latest_by_job
from fasteval.view.report import report, status
from tests.runfolder.index_support import assert_derived_agree


def _config(tmp: Path) -> Path:
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "seeds": 2,
        "models": [{"name": "flaky", "provider": "sim", "policy": "tools", "retry": {"max_attempts": 1},
                    "faults": {"schedule": ["400", "ok", "401", "ok", "400"]}},
                   {"name": "steady", "provider": "sim", "policy": "direct", "misread_rate": 0.3}],
        "suites": [{"name": "demo", "options": {"n_tasks": 6, "image_size": [320, 240]}}],
        "run": {"max_concurrency": 2}}))
    return path


def _agree(run_dir: Path) -> dict[str, int]:
    with open_index(run_dir) as index:
        assert_derived_agree(run_dir, index)
    latest = latest_by_job([run_dir / RECORDS]).values()
    ok = sum(r["status"] == "ok" for r in latest)
    st = status(run_dir)
    assert (st["done"], st["error"]) == (ok, len(latest) - ok)
    full, board = report(run_dir)["rows"], report(run_dir, per_task=False)["rows"]
    assert [(r["mean"], r["std"], r["n_ok"], r["n_error"]) for r in full] == \
        [(r["mean"], r["std"], r["n_ok"], r["n_error"]) for r in board]
    return {"ok": ok, "error": len(latest) - ok}


@pytest.mark.slow  # five sweeps and a merge
async def test_errors_reruns_rescore_shards_and_merge_keep_the_aggregates_exact(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path))
    run = tmp_path / "run"
    first = await run_sweep(cfg, RunOptions(run_dir=run, progress=False))
    counts = _agree(run)
    assert first.errors == counts["error"] > 0
    # the rerun runs the errored jobs again (each sweep's sim starts its fault schedule again)
    again = await run_sweep(cfg, RunOptions(run_dir=run, progress=False))
    assert again.skipped == counts["ok"] and again.ok + again.errors == counts["error"]
    _agree(run)
    kept = await run_sweep(cfg, RunOptions(run_dir=run, progress=False, keep_errors=True))
    assert kept.total == 0  # with --keep-errors every job is done: nothing runs
    # a rescore appends a new line per ok job: each row is replaced in place (the update trigger)
    await rescore(cfg, run)
    _agree(run)
    lines = (run / RECORDS).read_bytes().splitlines()
    assert len(lines) > len(latest_by_job([run / RECORDS]))
    # two shards of the same config, merged
    for i in range(2):
        await run_sweep(cfg, RunOptions(run_dir=tmp_path / f"s{i}", shard=(i, 2), progress=False))
        _agree(tmp_path / f"s{i}")
    await asyncio.to_thread(merge_runs, tmp_path / "merged", [tmp_path / "s0", tmp_path / "s1"])
    merged = _agree(tmp_path / "merged")
    assert merged["ok"] + merged["error"] == first.ok + first.errors == 48  # 6 tasks, 2 settings, seeds, models
    ids = [orjson.loads(ln)["job_id"] for ln in (tmp_path / "merged" / RECORDS).read_bytes().splitlines()]
    with open_index(tmp_path / "merged") as index:
        assert index.done_keys(ok_only=False).contains_many(ids).all()
