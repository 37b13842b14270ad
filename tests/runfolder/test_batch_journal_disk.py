"""A full disk while batch results are written to ``batches/*.out``: one line naming that file, exit 3,
no traceback, and not a word about records.jsonl (a real tmpfs, filled while the batch runs)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from fasteval.core.exitcodes import EXIT_INCOMPLETE
from tests.reliability.storage_support import fill_disk, tmpfs
from tests.reliability.test_storage_faults import FASTEVAL, assert_one_line, demo_config


@pytest.mark.slow
def test_a_full_disk_under_batches_is_one_line_naming_the_file(tmp_path: Path) -> None:
    model = {"name": "sim-tools", "provider": "sim", "policy": "tools", "batch": {"gather_s": 0.05, "poll_s": 0.1},
             "batch_api": {"turnaround_s": 1.5}}
    cfg = demo_config(tmp_path, n_tasks=4, models=[model])
    with tmpfs(tmp_path / "disk", "16m") as disk:
        run_dir = disk / "run"
        proc = subprocess.Popen([*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=disk)
        journal = run_dir / "batches" / "journal.jsonl"
        for _ in range(1200):  # the batch is created: its results come back in about 1.5 s
            if (journal.exists() and b'"created"' in journal.read_bytes()) or proc.poll() is not None:
                break
            time.sleep(0.02)
        fill_disk(disk / "filler")
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INCOMPLETE, err
    assert "disk full writing run/batches/" in err and "free space, then rerun" in err, err
    assert "records.jsonl" not in err, err
    assert_one_line(err)
