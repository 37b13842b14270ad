"""``fasteval merge``: join shard run folders into one."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from fasteval.cli.commands import HELP
from fasteval.cli.common import print_error, print_json, private_run_files
from fasteval.core.exitcodes import EXIT_OK, exit_code_for
from fasteval.core.terminal import clean
from fasteval.runfolder.lock import run_folder_lock


def cmd_merge(a: argparse.Namespace) -> int:
    from fasteval.config.load import config_diff
    from fasteval.runfolder.merge import MergeConflict, merge_runs
    from fasteval.view.completion import run_completion

    sources = [Path(s) for s in a.sources]
    try:
        with private_run_files(a.shared_run_dir), contextlib.ExitStack() as held:  # the merged folder holds
            for src in sources:  # what the shards held; a source still being written is not merged
                if src.is_dir():
                    held.enter_context(run_folder_lock(src, "merge"))
            out = merge_runs(Path(a.out), sources, config_diff)
    except MergeConflict as e:
        print_error(e)
        return exit_code_for(e)
    # A shard that did not finish makes a merged run that did not either: say which, and how far.
    merged = run_completion(Path(a.out))
    if a.format == "json":
        print_json({**out, "completion": merged})
        return EXIT_OK
    print(clean(f"{a.out}: {out['records']} records from {out['sources']} sources, {out['blobs_copied']} blobs"))
    if merged.get("line"):
        print(clean(f"{a.out}: {merged['line']}"), file=sys.stderr)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    m = sub.add_parser("merge", help=HELP["merge"])
    m.add_argument("out")
    m.add_argument("sources", nargs="+")
    m.add_argument("--shared-run-dir", action="store_true",
                   help="create the merged folder with your umask instead of 0700 with 0600 files")
    m.add_argument("--format", choices=["table", "json"], default="table",
                   help="json: counts, the merged run's completion and each partial source's")
    m.set_defaults(func=cmd_merge)
