"""``fasteval batches cancel`` knows an embedded provider's batches ended with its run (the provider
registry says which providers are embedded; no module outside providers/ names the sim)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def test_cancelling_the_batches_of_an_embedded_sim_says_they_ended_with_the_run(tmp_path: Path) -> None:
    cfg = {"seeds": 1, "models": [{"name": "bm", "provider": "sim", "wire": "openai", "policy": "direct",
                                   "batch": {"gather_s": 0.1, "poll_s": 0.2}}],
           "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [16, 16]},
                       "settings": [{"name": "direct"}]}]}
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(cfg))
    run_dir = tmp_path / "run"
    first = subprocess.run([*FASTEVAL, "run", str(config), "--run-dir", str(run_dir), "--no-progress", "--no-wait"],
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 3, first.stderr  # batches submitted to the sim, which stops with the run
    cancel = subprocess.run([*FASTEVAL, "batches", "cancel", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert cancel.returncode == 0, cancel.stderr
    assert "model bm: its batches were at the run's embedded sim, which ended with the run" in cancel.stderr
    assert "0 batch(es) cancelled" in cancel.stderr


def test_a_rerun_after_no_wait_on_the_embedded_sim_resubmits_instead_of_polling_for_ever(tmp_path: Path) -> None:
    """The earlier run's embedded sim, and its batches, ended with it: the rerun polled a batch the new
    sim never heard of (404) until killed. Now those batches end as expired and the rerun finishes."""
    cfg = {"seeds": 1, "models": [{"name": "bm", "provider": "sim", "wire": "openai", "policy": "direct",
                                   "batch": {"gather_s": 0.1, "poll_s": 0.2}}],
           "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [16, 16]},
                       "settings": [{"name": "direct"}]}]}
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(cfg))
    run_dir = tmp_path / "run"
    first = subprocess.run([*FASTEVAL, "run", str(config), "--run-dir", str(run_dir), "--no-progress", "--no-wait"],
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 3, first.stderr
    again = subprocess.run([*FASTEVAL, "run", str(config), "--run-dir", str(run_dir), "--no-progress"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "3 ok, 0 error, 0 already done" in again.stderr, again.stderr
