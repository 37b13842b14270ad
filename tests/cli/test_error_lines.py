"""A multi-line error keeps its lines on the terminal; control characters in it are escaped.

The changed-config refusal lists one change a line; printed through ``clean`` as one line it read
``...started with (runs/x):\\x0a  suites[0]...\\x0ause --force ...`` (#39 item 9).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from fasteval.cli import status as status_command
from fasteval.cli.main import main
from fasteval.core.errors import UsageError
from fasteval.core.exitcodes import EXIT_USAGE


def _config(path: Path, n_tasks: int) -> Path:
    path.write_text(yaml.safe_dump({
        "seeds": 1, "models": [{"name": "sim-direct", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [32, 24]}}],
        "run": {"max_concurrency": 2, "fsync": "never"}}))
    return path


def test_changed_config_refusal_lists_its_changes_on_lines_of_their_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    cfg = _config(tmp_path / "sweep.yaml", 1)
    assert main(["run", str(cfg), "--run-dir", str(run_dir), "--no-progress"]) == 0
    capsys.readouterr()
    _config(cfg, 2)
    assert main(["run", str(cfg), "--run-dir", str(run_dir), "--no-progress"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "\\x0a" not in err, err
    lines = err.splitlines()
    assert lines[0].startswith("error: the config differs"), err
    assert "  suites[0].options.n_tasks: 1 -> 2" in lines, err
    assert any(line.startswith("use --force") for line in lines), err


def test_an_error_from_any_command_escapes_controls_but_keeps_newlines(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(a: argparse.Namespace) -> int:
        raise UsageError("first line \x1b]0;owned\x07\n  second line\r\x1b[2J")

    monkeypatch.setattr(status_command, "cmd_status", refuse)
    assert main(["status", "anywhere"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "error: first line \\x1b]0;owned\\x07\n  second line\\x0d\\x1b[2J\n", err
