"""``fasteval store ls | import | gc``: the results store shared across runs (docs/run-folder.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fasteval.cli.commands import HELP
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean, json_text


def _store(a: argparse.Namespace) -> Path | None:
    from fasteval.store.segments import MARKER

    root = Path(a.store)
    if not (root / MARKER).exists():
        print(f"error: {clean(root)} is not a results store (no {MARKER}); a run with store: {clean(root)} "
              "or `fasteval store import` makes one", file=sys.stderr)
        return None
    return root


def cmd_ls(a: argparse.Namespace) -> int:
    """Every fingerprint the store holds, per job, with the run it came from (streamed)."""
    from fasteval.store.manage import listing, summary

    root = _store(a)
    if root is None:
        return EXIT_USAGE
    head = summary(root)
    print(f"{head['store']}: {head['fingerprints']} job(s) ({head['ok']} ok) in {head['segments']} segment(s), "
          f"{head['lines']} line(s)", file=sys.stderr)
    out = sys.stdout
    if a.json:
        out.write("[")
        for n, row in enumerate(listing(root)):
            out.write(("," if n else "") + "\n" + json_text(row, indent=False))
        out.write("\n]\n")
        return EXIT_OK
    cols = ("fingerprint", "model", "suite", "setting", "task_id", "seed", "status", "score", "run", "at")
    out.write("\t".join(cols) + "\n")
    for row in listing(root):
        row["fingerprint"] = str(row["fingerprint"])[:12]
        out.write("\t".join(clean("-" if row[c] is None else row[c]) for c in cols) + "\n")
    return EXIT_OK


def cmd_import(a: argparse.Namespace) -> int:
    from fasteval.runfolder.names import MANIFEST, RECORDS
    from fasteval.store.manage import import_run

    run_dir = Path(a.run_dir)
    if not (run_dir / MANIFEST).exists() and not (run_dir / RECORDS).exists():
        print(f"error: {clean(run_dir)} is not a run folder (no manifest.json or {RECORDS})", file=sys.stderr)
        return EXIT_USAGE
    done = import_run(Path(a.store), run_dir)
    line = f"{clean(a.store)}: {done.added} record(s) of {clean(run_dir)} added, {done.already} already held"
    if done.unkeyed:
        line += f", {done.unkeyed} from before fingerprints left out (nothing to key them by)"
    print(line, file=sys.stderr)
    return EXIT_OK


def cmd_gc(a: argparse.Namespace) -> int:
    from fasteval.store.manage import gc

    root = _store(a)
    if root is None:
        return EXIT_USAGE
    if a.stale_hours <= 0:
        print("error: --stale-hours must be positive", file=sys.stderr)
        return EXIT_USAGE
    c = gc(root, stale_s=a.stale_hours * 3600)
    print(f"{clean(root)}: {c.segments_before} segment(s) -> {c.segments_after}, {c.lines_before} line(s) of idle "
          f"segments -> {c.lines_after}; {c.left_alone} segment(s) still being written left alone", file=sys.stderr)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("store", help=HELP["store"])
    ssub = p.add_subparsers(dest="store_command", required=True)
    ls = ssub.add_parser("ls", help="what the store holds: one line per job, with its run of origin")
    ls.add_argument("store")
    ls.add_argument("--json", action="store_true", help="a JSON array of the same entries")
    ls.set_defaults(func=cmd_ls)
    imp = ssub.add_parser("import", help="put a run folder's records into the store (the ones it lacks)")
    imp.add_argument("store")
    imp.add_argument("run_dir")
    imp.set_defaults(func=cmd_import)
    g = ssub.add_parser("gc", help="compact the segments no writer appends to any more")
    g.add_argument("store")
    g.add_argument("--stale-hours", type=float, default=24.0,
                   help="an unsealed segment of another host untouched this long is taken as abandoned (default 24)")
    g.set_defaults(func=cmd_gc)
