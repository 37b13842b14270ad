"""``fasteval status``: what is done and what remains in a run folder (from the index)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fasteval.cli.commands import HELP
from fasteval.cli.common import console, print_control, print_error, print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import plain
from fasteval.view.report import status


def cmd_status(a: argparse.Namespace) -> int:
    try:
        st = status(Path(a.run_dir))
    except FileNotFoundError as e:
        print_error(e)
        return EXIT_USAGE
    from fasteval.runfolder.batch_journal import batch_rows

    batches = [r for r in batch_rows(Path(a.run_dir)) if r["state"] in ("submitting", "submitted")]
    if a.format == "json":
        print_json({**st, "batches": batches} if batches else st)
        return EXIT_OK
    from rich.table import Table  # tables only: the JSON form never loads Rich
    t = Table(title=plain(f"{a.run_dir}: {st['done']} done, {st['error']} error, {st['remaining']} remaining "
                          f"of {st['total']}"))
    for col in ("group", "value", "total", "done", "error", "remaining"):
        t.add_column(col)
    for dim in ("model", "suite", "setting", "seed"):
        for k, v in st[f"by_{dim}"].items():
            t.add_row(dim, plain(k), *(plain(v[c]) for c in ("total", "done", "error", "remaining")))
    console().print(t)
    if st.get("superseded"):
        print(f"{st['superseded']} record(s) kept aside as superseded: their model, suite and setting are in the config "
              "under another fingerprint now (not counted; still readable: fasteval show RUN JOB_ID)", file=sys.stderr)
    if st.get("bad_lines"):
        print(f"{st['bad_lines']} line(s) of records.jsonl are not records any reader can take (kept, skipped; "
              "status --format json: bad_lines)", file=sys.stderr)
    if st.get("errors_by_kind"):
        errs = Table(title="errors by model and kind", title_justify="left")
        for col in ("model", "error_kind", "jobs", "example"):
            errs.add_column(col, overflow="fold")
        for row in st["errors_by_kind"]:
            errs.add_row(plain(row["model"]), plain(row["error_kind"]), plain(row["jobs"]),
                         plain(str(row["example"] or "")[:200]))
        console().print(errs)
    print_control(st.get("control"))
    if batches:
        bt = Table(title="batches at the provider (batch mode)", title_justify="left")
        for col in ("model", "batch_id", "requests", "state", "age"):
            bt.add_column(col)
        for r in batches:
            bt.add_row(plain(r["model"]), plain(r["batch_id"] or "-"), plain(r["requests"]), plain(r["state"]),
                       f"{r['age_s'] / 60:.0f} min")  # a batch id is the provider's word: markup off
        console().print(bt)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    s = sub.add_parser("status", help=HELP["status"])
    s.add_argument("run_dir")
    s.add_argument("--format", choices=["table", "json"], default="table")
    s.set_defaults(func=cmd_status)
