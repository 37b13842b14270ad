"""``fasteval score-file``: score a reference harness's own output file, item by item."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.table import Table

from fasteval.cli.commands import HELP
from fasteval.cli.common import console, fmt, print_json
from fasteval.core.exitcodes import EXIT_OK
from fasteval.core.terminal import plain


def cmd_score_file(a: argparse.Namespace) -> int:
    """Our errors (an unknown suite, a missing or malformed file, bad ``--options``) are UsageErrors:
    one line and exit 2 in cli/main.py; anything else is a bug of ours (exit 70 with its trace)."""
    from fasteval.cli.common import json_object
    from fasteval.suites.base import score_output

    options = json_object(a.options, "--options") if a.options else {}
    result = score_output(a.suite, [Path(f) for f in a.file], a.fidelity, options)
    if a.format == "json":
        print_json(result)
    else:
        t = Table(title=plain(f"{' + '.join(a.file)}: overall {fmt(result.get('overall'), pct=False)}"))
        t.add_column("category")
        t.add_column("score")
        for k, v in (result.get("by_category") or {}).items():
            t.add_row(plain(k), fmt(v, pct=False) if isinstance(v, int | float) else plain(v))
        console().print(t)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    sf = sub.add_parser("score-file", help=HELP["score-file"])
    sf.add_argument("file", nargs="+", help="one file, or several pooled (e.g. single- and multi-turn)")
    sf.add_argument("--suite", required=True)
    sf.add_argument("--fidelity", choices=["reference", "fixed"], default="reference")
    sf.add_argument("--options", help="JSON object of suite-specific options (e.g. rubrics path)")
    sf.add_argument("--format", choices=["table", "json"], default="table")
    sf.set_defaults(func=cmd_score_file)
