"""``--pilot`` runs like ``run``: its folder gets a run.log, and warnings (math_verify's timeout notices
on every tir-synth answer) go there, not onto the terminal (#39 item 13)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def test_a_pilot_writes_run_log_and_keeps_library_warnings_off_the_terminal(tmp_path: Path) -> None:
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "name": "p", "seeds": 1, "models": [{"name": "sim-guess", "provider": "sim", "policy": "guess"}],
        "suites": [{"name": "tir-synth", "options": {"seed": 0, "n_per_type": 1}, "settings": [{"name": "no-tool"}]}],
        "run": {"fsync": "never"}}))
    proc = subprocess.run([sys.executable, "-m", "fasteval.cli.main", "run", str(cfg), "--run-dir", str(tmp_path / "run"),
                           "--dry-run", "--pilot", "2", "--yes", "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "pilot: 2 ok, 0 error" in proc.stderr, proc.stderr
    assert "math_verify" not in proc.stderr and "WARNING" not in proc.stderr, proc.stderr
    log = (tmp_path / "run-pilot" / "run.log").read_text()
    assert "WARNING math_verify" in log, log
