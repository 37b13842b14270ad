"""``fasteval batches list|cancel RUN``: a run's provider batches, from its journal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fasteval.cli.common import console, print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import plain


def cmd_list(a: argparse.Namespace) -> int:
    from rich.table import Table

    from fasteval.runfolder.batch_journal import batch_rows

    run_dir = Path(a.run_dir)
    if not run_dir.is_dir():
        print(f"error: no run folder {run_dir}", file=sys.stderr)
        return EXIT_USAGE
    rows = batch_rows(run_dir)
    if a.format == "json":
        print_json(rows)
        return EXIT_OK
    t = Table(title=plain(f"{run_dir}: {len(rows)} batch(es)"))
    for col in ("model", "batch_id", "requests", "succeeded", "state", "age"):
        t.add_column(col)
    for r in rows:
        t.add_row(*(plain(r[c] if c != "batch_id" else r[c] or "-") for c in
                    ("model", "batch_id", "requests", "succeeded", "state")), f"{r['age_s'] / 60:.0f} min")
    console().print(t)
    return EXIT_OK


def cmd_cancel(a: argparse.Namespace) -> int:
    import uvloop

    from fasteval.engine.batch_admin import cancel_batches

    run_dir = Path(a.run_dir)
    if not run_dir.is_dir():
        print(f"error: no run folder {run_dir}", file=sys.stderr)
        return EXIT_USAGE

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    from fasteval.cli.common import private_run_files
    from fasteval.runfolder.lock import run_folder_lock

    # the journal's new lines, like every run folder file; never beside a run that polls the same batches
    with private_run_files(shared=False), run_folder_lock(run_dir, "batches cancel"):
        cancelled, kept = uvloop.run(cancel_batches(run_dir, poll_s=a.poll_s, say=say))
    say(f"{cancelled} batch(es) cancelled; {kept} finished result(s) collected into the journal; a rerun of the "
        "sweep resubmits the cancelled requests")
    return EXIT_OK


def add_parser(sub: Any) -> None:
    b = sub.add_parser("batches", help="a run's provider batches (batch mode)")
    bs = b.add_subparsers(dest="batches_command", required=True)
    ls = bs.add_parser("list", help="the run's batches, from its journal")
    ls.add_argument("run_dir")
    ls.add_argument("--format", choices=["table", "json"], default="table")
    ls.set_defaults(func=cmd_list)
    c = bs.add_parser("cancel", help="cancel the run's open batches and collect their partial results")
    c.add_argument("run_dir")
    c.add_argument("--poll-s", type=float, default=5.0, help="seconds between polls while the cancels finish")
    c.set_defaults(func=cmd_cancel)
