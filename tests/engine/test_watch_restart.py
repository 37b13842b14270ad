"""A restarted ``--watch`` tells the checkpoints it evaluated before from new ones (#39 item 6).

It announced "N new checkpoint(s)" for steps whose jobs were all done, and swept them again.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.engine.test_series_serving import N_TASKS, run, series_config
from tests.providers.local.conftest import env, fasteval_argv, make_checkpoint, records


@pytest.mark.slow
def test_a_restarted_watch_does_not_announce_done_steps_as_new(tmp_path: Path) -> None:
    for step in (1, 2):
        make_checkpoint(tmp_path / "ckpts" / f"checkpoint-{step}")
    config = series_config(tmp_path)
    run_dir = tmp_path / "run"
    assert run(config, run_dir).returncode == 0
    make_checkpoint(tmp_path / "ckpts" / "checkpoint-3")
    proc = subprocess.run(fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress", "--watch",
                                        "--watch-interval", "0.5", "--idle-timeout", "2"),
                          capture_output=True, text=True, timeout=180, env=env())
    out = proc.stderr
    assert proc.returncode == 0, out
    assert "watch: 2 checkpoint(s) already evaluated in this run folder: run7@1, run7@2" in out, out
    assert "watch: 1 new checkpoint(s): run7@3" in out, out
    assert f"round 1: {N_TASKS} ok, 0 error, {2 * N_TASKS} already done" in out, out
    assert len(records(run_dir)) == 3 * N_TASKS
    again = subprocess.run(fasteval_argv("run", str(config), "--run-dir", str(run_dir), "--no-progress", "--watch",
                                         "--watch-interval", "0.5", "--idle-timeout", "2"),
                           capture_output=True, text=True, timeout=180, env=env())
    assert again.returncode == 0, again.stderr
    assert "new checkpoint(s):" not in again.stderr and "round 1" not in again.stderr, again.stderr
    assert "3 checkpoint(s) already evaluated" in again.stderr
