"""``fasteval score-file``: score a reference harness's own output file, item by item."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson
from rich.table import Table

from fasteval.cli.common import console, fmt, print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean, plain


def cmd_score_file(a: argparse.Namespace) -> int:
    from fasteval.suites.base import SUITES

    cls = SUITES.get(a.suite)
    if cls is None:
        print(f"error: unknown suite {a.suite!r}; known: {sorted(SUITES)}", file=sys.stderr)
        return EXIT_USAGE
    options = dict(orjson.loads(a.options)) if a.options else {}
    try:
        files = [Path(f) for f in a.file]
        # several files pool (VisualToolBench single- and multi-turn); suites that take one say so
        result = cls.score_file(files[0] if len(files) == 1 else files, a.fidelity, options)  # type: ignore[arg-type]
    except (ValueError, OSError, KeyError) as e:
        print(f"error: {clean(e)}", file=sys.stderr)
        return EXIT_USAGE
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
    sf = sub.add_parser("score-file", help="score a reference harness's own output file, item by item")
    sf.add_argument("file", nargs="+", help="one file, or several pooled (e.g. single- and multi-turn)")
    sf.add_argument("--suite", required=True)
    sf.add_argument("--fidelity", choices=["reference", "fixed"], default="reference")
    sf.add_argument("--options", help="JSON object of suite-specific options (e.g. rubrics path)")
    sf.add_argument("--format", choices=["table", "json"], default="table")
    sf.set_defaults(func=cmd_score_file)
