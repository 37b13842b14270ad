"""``run --force`` from an old script: one line naming what replaced it, exit 2, nothing claimed.

The results store's work removed ``--force`` (an edited config reruns only its changed jobs), so an
old script got argparse's usage block and a bare "unrecognized arguments: --force".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fasteval.core.exitcodes import EXIT_USAGE


def test_run_force_says_what_replaced_it_in_one_line(tmp_path: Path) -> None:
    cfg = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "fasteval.cli.main", "run", str(cfg), "--force", "--run-dir",
                           str(run_dir)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --force is gone: "), proc.stderr
    assert "reruns only the jobs it changed" in lines[0] and "--run-dir" in lines[0], lines[0]
    assert "unrecognized" not in proc.stderr and not run_dir.exists()


def test_run_help_does_not_offer_force() -> None:
    proc = subprocess.run([sys.executable, "-m", "fasteval.cli.main", "run", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "--force" not in proc.stdout, proc.stdout
