"""``fasteval tool run``: one tool call by hand, exactly as the agent loop makes it."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import uvloop

from fasteval.cli.commands import HELP
from fasteval.cli.common import print_json
from fasteval.core.exitcodes import EXIT_OK


def cmd_tool_run(a: argparse.Namespace) -> int:
    """An unknown tool, a missing image or bad ``--args`` is a UsageError (one line, exit 2, in
    cli/main.py); anything else is a bug of ours (exit 70 with its trace)."""
    from fasteval.cli.common import json_object
    from fasteval.engine.run.toolrun import run_tool_once

    args = json_object(a.args, "--args")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="fasteval-tool-"))
    print_json(uvloop.run(run_tool_once(a.name, args, [Path(p) for p in a.image], a.fidelity, out)))
    return EXIT_OK


def add_parser(sub: Any) -> None:
    t = sub.add_parser("tool", help=HELP["tool"])
    tsub = t.add_subparsers(dest="tool_command", required=True)
    tr = tsub.add_parser("run", help="run one tool exactly as the agent loop would")
    tr.add_argument("name")
    tr.add_argument("--args", default="{}")
    tr.add_argument("--image", action="append", default=[])
    tr.add_argument("--fidelity", choices=["reference", "fixed"], default="reference")
    tr.add_argument("--out")
    tr.set_defaults(func=cmd_tool_run)
