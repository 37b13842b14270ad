"""``fasteval tool run``: one tool call by hand, exactly as the agent loop makes it."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import uvloop

from fasteval.cli.common import print_json
from fasteval.core.exitcodes import EXIT_OK, EXIT_USAGE
from fasteval.core.terminal import clean


def cmd_tool_run(a: argparse.Namespace) -> int:
    from fasteval.engine.run.toolrun import run_tool_once

    try:
        args = orjson.loads(a.args)
    except orjson.JSONDecodeError as e:
        print(f"error: --args is not valid JSON: {e}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(args, dict):
        print("error: --args must be a JSON object", file=sys.stderr)
        return EXIT_USAGE
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="fasteval-tool-"))
    try:
        result = uvloop.run(run_tool_once(a.name, args, [Path(p) for p in a.image], a.fidelity, out))
    except (KeyError, FileNotFoundError) as e:
        print(f"error: {clean(e)}", file=sys.stderr)
        return EXIT_USAGE
    print_json(result)
    return EXIT_OK


def add_parser(sub: Any) -> None:
    t = sub.add_parser("tool", help="tools by hand")
    tsub = t.add_subparsers(dest="tool_command", required=True)
    tr = tsub.add_parser("run", help="run one tool exactly as the agent loop would")
    tr.add_argument("name")
    tr.add_argument("--args", default="{}")
    tr.add_argument("--image", action="append", default=[])
    tr.add_argument("--fidelity", choices=["reference", "fixed"], default="reference")
    tr.add_argument("--out")
    tr.set_defaults(func=cmd_tool_run)
