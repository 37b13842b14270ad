"""``fasteval data fetch``: a benchmark's official files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fasteval.cli.commands import HELP
from fasteval.core.exitcodes import EXIT_OK


def cmd_data_fetch(a: argparse.Namespace) -> int:
    """An unknown name or a fetch that cannot be done here is a UsageError (one line, exit 2, in
    cli/main.py); anything else is a bug of ours (exit 70 with its trace)."""
    from fasteval.suites.data_fetch import fetch

    path = fetch(a.name, Path(a.dest) if a.dest else None, revision=a.revision)
    print(path)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    d = sub.add_parser("data", help=HELP["data"])
    dsub = d.add_subparsers(dest="data_command", required=True)
    df = dsub.add_parser("fetch", help="download a benchmark's official files (needs huggingface_hub and a network)")
    df.add_argument("name")
    df.add_argument("--dest", help="folder (default: where the shipped configs read it, data/<benchmark>)")
    df.add_argument("--revision")
    df.set_defaults(func=cmd_data_fetch)
