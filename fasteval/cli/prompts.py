"""``fasteval suite prompts NAME``: every text a suite would send, with where it came from.

Prints ``{"texts": [{"role", "name", "text", "source": {"file", "symbol"}}]}`` so a run's
prompts, tool descriptions, judge/extractor templates, demos and tool error strings can be
diffed against the reference repository. Template fields show as ``{expr}``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from fasteval.cli.commands import HELP
from fasteval.core.exitcodes import EXIT_OK


def add_parser(sub: Any) -> None:
    """Register ``suite prompts`` (called from fasteval.cli.main's COMMAND_MODULES)."""
    s = sub.add_parser("suite", help=HELP["suite"])
    ssub = s.add_subparsers(dest="suite_command", required=True)
    p = ssub.add_parser("prompts", help="print every text a suite sends (prompts, tool specs, judge texts)")
    p.add_argument("name")
    p.add_argument("--setting", help="one of the suite's settings (default: the first)")
    p.add_argument("--options", default="{}", help="JSON object of suite options (reference_repo, texts, ...)")
    p.add_argument("--fidelity", choices=["reference", "fixed"])
    p.add_argument("--format", choices=["json", "text"], default="json")
    p.set_defaults(func=cmd_suite_prompts)


def suite_texts(name: str, options: dict[str, Any], setting_name: str | None) -> list[dict[str, Any]]:
    """The listing for one suite and setting; a UsageError (exit 2) says what the user got wrong."""
    from fasteval.core.errors import BadInput
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.suites.base import SUITES, make_suite

    if name not in SUITES:
        raise BadInput(f"unknown suite {name!r}; known: {', '.join(sorted(SUITES.names()))}")
    with tempfile.TemporaryDirectory(prefix="fasteval-prompts-") as tmp:
        placeholder = {} if "source" in options else {"path": "unused"}  # texts need no data
        suite = make_suite(name, {**placeholder, **options}, BlobStore(Path(tmp)))  # ConfigError: its options
        settings = suite.default_settings()
        chosen = settings[0] if setting_name is None else next((s for s in settings if s.name == setting_name), None)
        if chosen is None:
            raise BadInput(f"suite {name!r} has no setting {setting_name!r}; known: {[s.name for s in settings]}")
        return suite.text_listing(chosen)


def cmd_suite_prompts(a: argparse.Namespace) -> int:
    """Our errors are UsageErrors (cli/main.py: one line, exit 2); anything else is a bug (exit 70)."""
    from fasteval.cli.common import json_object

    options = json_object(a.options, "--options")
    if a.fidelity:
        options["fidelity"] = a.fidelity
    texts = suite_texts(a.name, options, a.setting)
    if a.format == "json":
        sys.stdout.write(orjson.dumps({"texts": texts}, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for t in texts:
            src = t["source"]
            where = f"{src['file']} :: {src['symbol']}" if "file" in src else "our wording"
            sys.stdout.write(f"== {t['role']} {t['name']} ({where})\n{t['text']}\n\n")
    return EXIT_OK
