"""``fasteval index rebuild RUN``: throw a run folder's index away and build it from the records."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from fasteval.cli.commands import HELP
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.runfolder.index import RECORDS, rebuild_index
from fasteval.runfolder.names import MANIFEST


def cmd_rebuild(a: argparse.Namespace) -> int:
    run_dir = Path(a.run_dir)
    if not (run_dir / MANIFEST).exists() and not (run_dir / RECORDS).exists():
        print(f"error: {run_dir} is not a run folder (no manifest.json or {RECORDS})", file=sys.stderr)
        return EXIT_USAGE
    if not (run_dir.is_dir() and os.access(run_dir, os.W_OK)):
        print(f"error: {run_dir} is not writable; readers index it in memory instead", file=sys.stderr)
        return EXIT_USAGE
    stats = rebuild_index(run_dir)
    sys.stdout.write(orjson.dumps(stats).decode() + "\n")
    return EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("index", help=HELP["index"])
    isub = p.add_subparsers(dest="index_command", required=True)
    r = isub.add_parser("rebuild", help="rebuild index.sqlite from records.jsonl")
    r.add_argument("run_dir")
    r.set_defaults(func=cmd_rebuild)
