"""``--pilot`` is a sweep like any other: it starts through the one run path, so it holds its run
folder's lock. A ``run`` into the pilot's folder while the pilot runs is refused, and so is a pilot
while a ``run`` holds that folder. One side runs as a real CLI process, held mid-sweep by ``ctl
pause``, the other through the CLI in this process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fasteval.cli.main import main
from fasteval.core.errors import NoSweepRunning
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.runfolder.control import CONTROL_SOCKET, ask

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]
ROOT = Path(__file__).resolve().parents[2]


def _config(tmp: Path) -> Path:
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "seeds": 1, "models": [{"name": "slow", "provider": "sim", "policy": "direct", "latency_ms": 300}],
        "suites": [{"name": "demo", "options": {"n_tasks": 6, "image_size": [32, 24]},
                    "settings": [{"name": "direct", "tools": []}]}],
        "run": {"max_concurrency": 1, "fsync": "never"}}))
    return path


def _held(proc: subprocess.Popen[str], run_dir: Path) -> None:
    """Wait for the sweep in ``proc`` to answer on its socket, then pause it: it holds the folder."""
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, proc.communicate()[1]
        if (run_dir / CONTROL_SOCKET).exists():
            try:
                if ask(run_dir, {"command": "pause"})["ok"]:
                    return
            except NoSweepRunning:
                pass
        assert time.monotonic() < deadline, "the sweep never answered on its socket"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen[str], run_dir: Path) -> tuple[int, str]:
    assert ask(run_dir, {"command": "resume"})["ok"]
    _, err = proc.communicate(timeout=180)
    return proc.returncode, err


def test_a_run_into_the_pilots_folder_is_refused_while_the_pilot_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    pilot_dir = tmp_path / "run-pilot"
    pilot = subprocess.Popen([*FASTEVAL, "run", str(config), "--dry-run", "--estimate", "--pilot", "3", "--yes",
                              "--no-preflight", "--run-dir", str(tmp_path / "run")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        _held(pilot, pilot_dir)
        capsys.readouterr()
        code = main(["run", str(config), "--run-dir", str(pilot_dir), "--no-progress", "--no-preflight"])
        err = capsys.readouterr().err
        assert code == EXIT_USAGE, err
        assert "is in use by" in err and "--pilot" in err  # the lock's holder: the pilot's command line
        code, perr = _finish(pilot, pilot_dir)
    finally:
        pilot.kill()
        pilot.wait()
    assert code == EXIT_OK, perr
    assert "pilot: 3 ok, 0 error" in perr


def test_a_pilot_is_refused_while_a_run_holds_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    pilot_dir = tmp_path / "run-pilot"
    run = subprocess.Popen([*FASTEVAL, "run", str(config), "--run-dir", str(pilot_dir), "--no-progress",
                            "--no-preflight"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        _held(run, pilot_dir)
        capsys.readouterr()
        code = main(["run", str(config), "--dry-run", "--estimate", "--pilot", "3", "--yes", "--no-preflight",
                     "--run-dir", str(tmp_path / "run")])
        err = capsys.readouterr().err
        assert code == EXIT_USAGE, err
        assert "is in use by" in err and "fasteval run" in err and "--pilot" not in err.split("is in use by")[1]
        code, rerr = _finish(run, pilot_dir)
    finally:
        run.kill()
        run.wait()
    assert code == EXIT_OK, rerr
    lines = (pilot_dir / "records.jsonl").read_text().splitlines()
    assert len(lines) == 6  # the run's jobs alone, each once: the refused pilot added none
