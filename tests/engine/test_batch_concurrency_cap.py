"""A batch gathers one request per live trajectory: run.max_concurrency caps its size, and a run says so."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.batch_journal import BatchJournal


def write(tmp: Path, *, max_concurrency: int, batch: dict[str, Any]) -> Path:
    model = {"name": "m", "provider": "sim", "policy": "direct", "batch": {"gather_s": 0.05, "poll_s": 0.05, **batch},
             "batch_api": {"turnaround_s": 0.02}}
    cfg = {"seeds": 1, "models": [model],
           "suites": [{"name": "demo", "options": {"n_tasks": 6, "image_size": [160, 120]},
                       "settings": [{"name": "direct", "tools": []}]}],
           "run": {"max_concurrency": max_concurrency}}
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def cap_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "raise run.max_concurrency" in r.getMessage()]


async def test_a_batch_limit_the_concurrency_cannot_fill_is_warned_once_with_the_key_to_raise(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fasteval")
    res = await run_sweep(load_config(write(tmp_path, max_concurrency=2, batch={"max_requests": 1000})),
                          RunOptions(run_dir=tmp_path / "run", progress=False))
    assert res.ok == 6
    lines = cap_lines(caplog)
    assert len(lines) == 1
    assert "model m" in lines[0] and "at most 2 requests" in lines[0] and "1000 (batch.max_requests)" in lines[0]
    journal = BatchJournal(tmp_path / "run")
    assert max(len(b.ids) for b in journal.batches.values()) <= 2  # the cap the line names is the real one


async def test_no_warning_when_the_cap_never_binds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fasteval")
    await run_sweep(load_config(write(tmp_path, max_concurrency=2, batch={"max_requests": 2})),
                    RunOptions(run_dir=tmp_path / "a", progress=False))  # the limit is within the cap
    await run_sweep(load_config(write(tmp_path, max_concurrency=64, batch={})),
                    RunOptions(run_dir=tmp_path / "b", progress=False))  # 6 jobs never fill 64 slots
    assert cap_lines(caplog) == []
