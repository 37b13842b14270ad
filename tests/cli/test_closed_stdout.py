"""``fasteval list policies | head -1``: a reader that leaves early ends the command quietly.

Python ignores SIGPIPE, so each write to the closed pipe raised BrokenPipeError, which reached
cli/main.py as "internal error (a bug in fasteval)" with a traceback and exit 70; Rich's tables
ended with its own ``SystemExit(1)``, our "some jobs failed". A Unix tool ends silently, and a
shell reports 141 (128 + SIGPIPE). Each command runs as a real subprocess whose stdout is a pipe
with its read end already closed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fasteval.cli.main import main
from fasteval.core.exitcodes import EXIT_PIPE_CLOSED

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def _into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        return subprocess.run([*FASTEVAL, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("pipe")
    cfg = tmp / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "seeds": 1, "models": [{"name": "sim-direct", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [32, 24]}}], "run": {"fsync": "never"}}))
    assert main(["run", str(cfg), "--run-dir", str(tmp / "run"), "--no-progress"]) == 0
    return tmp / "run"


@pytest.mark.parametrize("args", [("list", "policies"), ("list", "suites", "--format", "json"), ("config", "schema")])
def test_a_plain_listing_into_a_closed_pipe_ends_quietly(args: tuple[str, ...]) -> None:
    proc = _into_closed_pipe(*args)
    assert (proc.returncode, proc.stderr) == (EXIT_PIPE_CLOSED, ""), proc.stderr


def test_a_rich_table_into_a_closed_pipe_ends_quietly(run_dir: Path) -> None:
    for args in (("status", str(run_dir)), ("report", str(run_dir))):
        proc = _into_closed_pipe(*args)
        assert (proc.returncode, proc.stderr) == (EXIT_PIPE_CLOSED, ""), (args, proc.stderr)


def test_a_broken_pipe_that_is_not_stdout_is_still_a_bug(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A socket or a child's pipe breaking is no reader leaving: its traceback and exit 70 stay."""
    from fasteval.cli import catalog

    def broken(a: object) -> int:
        raise BrokenPipeError(32, "a child's stdin")

    monkeypatch.setattr(catalog, "cmd_list", broken)
    assert main(["list", "policies"]) == 70
    assert "internal error (a bug in fasteval): BrokenPipeError" in capsys.readouterr().err
