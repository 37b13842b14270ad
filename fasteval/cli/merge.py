"""``fasteval merge``: join shard run folders into one."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from fasteval.cli.common import print_error, print_json, private_run_files
from fasteval.core.exitcodes import EXIT_OK, exit_code_for
from fasteval.runfolder.lock import run_folder_lock


def cmd_merge(a: argparse.Namespace) -> int:
    from fasteval.runfolder.merge import MergeConflict, merge_runs

    sources = [Path(s) for s in a.sources]
    try:
        with private_run_files(a.shared_run_dir), contextlib.ExitStack() as held:  # the merged folder holds
            for src in sources:  # what the shards held; a source still being written is not merged
                if src.is_dir():
                    held.enter_context(run_folder_lock(src, "merge"))
            out = merge_runs(Path(a.out), sources)
    except MergeConflict as e:
        print_error(e)
        return exit_code_for(e)
    print_json(out)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    m = sub.add_parser("merge", help="join shard run folders into one")
    m.add_argument("out")
    m.add_argument("sources", nargs="+")
    m.add_argument("--shared-run-dir", action="store_true",
                   help="create the merged folder with your umask instead of 0700 with 0600 files")
    m.set_defaults(func=cmd_merge)
