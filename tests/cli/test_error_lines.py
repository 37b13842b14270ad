"""A multi-line error keeps its lines on the terminal; control characters in it are escaped.

The changed-config refusal listed one change a line; printed through ``clean`` as one line it read
``...started with (runs/x):\\x0a  suites[0]...\\x0ause --force ...`` (#39 item 9). A changed config
now reruns its changed jobs (no refusal); merge's refusal of different configs is such an error
today (tests/cli/test_merge_cli.py reads its lines).
"""

from __future__ import annotations

import argparse

import pytest

from fasteval.cli import status as status_command
from fasteval.cli.main import main
from fasteval.core.errors import UsageError
from fasteval.core.exitcodes import EXIT_USAGE


def test_an_error_from_any_command_escapes_controls_but_keeps_newlines(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(a: argparse.Namespace) -> int:
        raise UsageError("first line \x1b]0;owned\x07\n  second line\r\x1b[2J")

    monkeypatch.setattr(status_command, "cmd_status", refuse)
    assert main(["status", "anywhere"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "error: first line \\x1b]0;owned\\x07\n  second line\\x0d\\x1b[2J\n", err
