"""``fasteval status``: what is done and what remains in a run folder (from the index)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.table import Table

from fasteval.cli.common import console, print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.view.report import status


def cmd_status(a: argparse.Namespace) -> int:
    try:
        st = status(Path(a.run_dir))
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if a.format == "json":
        print_json(st)
        return EXIT_OK
    t = Table(title=f"{a.run_dir}: {st['done']} done, {st['error']} error, {st['remaining']} remaining of {st['total']}")
    for col in ("group", "value", "total", "done", "error", "remaining"):
        t.add_column(col)
    for dim in ("model", "suite", "setting", "seed"):
        for k, v in st[f"by_{dim}"].items():
            t.add_row(dim, k, str(v["total"]), str(v["done"]), str(v["error"]), str(v["remaining"]))
    console().print(t)
    if st.get("errors_by_kind"):
        errs = Table(title="errors by model and kind", title_justify="left")
        for col in ("model", "error_kind", "jobs", "example"):
            errs.add_column(col, overflow="fold")
        for row in st["errors_by_kind"]:
            errs.add_row(str(row["model"]), str(row["error_kind"]), str(row["jobs"]), str(row["example"] or "")[:200])
        console().print(errs)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    s = sub.add_parser("status", help="what is done and what remains in a run folder")
    s.add_argument("run_dir")
    s.add_argument("--format", choices=["table", "json"], default="table")
    s.set_defaults(func=cmd_status)
