"""``fasteval list suites|tools|providers|policies`` and ``fasteval config schema``.

What a config may name, with one line each, read from the same registries and declarations the
config validator uses, so the list can never disagree with what a run accepts.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

import orjson

from fasteval.cli.commands import HELP
from fasteval.core.exitcodes import EXIT_OK, exit_code_for


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0].strip() if (doc or "").strip() else ""


def _first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph: a docstring may wrap its opening
    sentence over several lines, and its first line alone would be cut mid-phrase."""
    paragraph = (doc or "").strip().split("\n\n")[0]
    text = " ".join(line.strip() for line in paragraph.splitlines())
    return re.split(r"(?<=[.!?])\s+(?=[A-Z`])", text, maxsplit=1)[0] if text else ""


def catalog(kind: str) -> dict[str, str]:
    """Name -> one-line description for one kind of component."""

    if kind == "suites":
        from fasteval.suites.base import SUITES

        return {n: _first_sentence(c.__doc__) for n, c in sorted(SUITES.items())}
    if kind == "tools":
        from fasteval.tools.base import TOOLS

        return {n: _first_line(getattr(c, "description", None) or c.__doc__) for n, c in sorted(TOOLS.items())}
    if kind == "policies":
        from providers import POLICIES

        return {n: _first_sentence(f.__doc__).replace("``", "`") for n, f in sorted(POLICIES.items())}
    from providers import providers

    return {n: k.description for n, k in sorted(providers().items())}


def cmd_list(a: argparse.Namespace) -> int:
    items = catalog(a.kind)
    if a.format == "json":
        sys.stdout.write(orjson.dumps(items, option=orjson.OPT_INDENT_2).decode() + "\n")
        return EXIT_OK
    width = max((len(n) for n in items), default=0)
    for name, doc in items.items():
        print(f"{name.ljust(width)}  {doc}".rstrip())
    return EXIT_OK


def cmd_config_schema(a: argparse.Namespace) -> int:
    from fasteval.config.schema import config_json_schema

    sys.stdout.write(orjson.dumps(config_json_schema(), option=orjson.OPT_INDENT_2).decode() + "\n")
    return EXIT_OK


def cmd_config_check(a: argparse.Namespace) -> int:
    from fasteval.cli.common import print_config_error, print_pending
    from fasteval.config.load import load_config
    from fasteval.core.errors import ConfigError

    try:
        cfg = load_config(a.config)
        placement = _serve_placement(cfg)  # a served model that cannot run here: a ServeConfigError
    except ConfigError as e:  # ours only: a bug is an internal error (cli/main.py), never "fix your config"
        print_config_error(e)
        return exit_code_for(e)
    print(f"{a.config}: ok")
    for line in placement:
        print(f"  {line}")
    print_pending(cfg.pending)
    return EXIT_OK


def _serve_placement(cfg: Any) -> list[str]:
    """What the served models will run where; a ConfigError (ServeConfigError, GpuConfigError) when
    they cannot run on this node."""
    from pathlib import Path

    from fasteval.engine.run.serving import Serving

    serving = Serving.from_config(cfg, Path("runs") / "config-check")
    if serving is None:
        return []
    serving.preflight()
    return serving.placement()


def add_parser(sub: Any) -> None:
    ls = sub.add_parser("list", help=HELP["list"])
    ls.add_argument("kind", choices=["suites", "tools", "providers", "policies"])
    ls.add_argument("--format", choices=["table", "json"], default="table")
    ls.set_defaults(func=cmd_list)
    cfg = sub.add_parser("config", help=HELP["config"])
    csub = cfg.add_subparsers(dest="config_command", required=True)
    schema = csub.add_parser("schema", help="print the JSON Schema of sweep configs (for editors)")
    schema.set_defaults(func=cmd_config_schema)
    check = csub.add_parser("check", help="validate a config (keys, names, data paths) without running it")
    check.add_argument("config")
    check.set_defaults(func=cmd_config_check)
