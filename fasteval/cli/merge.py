"""``fasteval merge``: join shard run folders into one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fasteval.cli.common import print_json, private_run_files
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean


def cmd_merge(a: argparse.Namespace) -> int:
    from fasteval.runfolder.merge import MergeConflict, merge_runs

    try:
        with private_run_files(a.shared_run_dir):  # the merged folder holds what the shards held
            out = merge_runs(Path(a.out), [Path(s) for s in a.sources])
    except MergeConflict as e:
        print(f"error: {clean(e)}", file=sys.stderr)
        return EXIT_USAGE
    print_json(out)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    m = sub.add_parser("merge", help="join shard run folders into one")
    m.add_argument("out")
    m.add_argument("sources", nargs="+")
    m.add_argument("--shared-run-dir", action="store_true",
                   help="create the merged folder with your umask instead of 0700 with 0600 files")
    m.set_defaults(func=cmd_merge)
