"""``fasteval list suites|tools|providers|policies`` and ``fasteval config schema``.

What a config may name, with one line each, read from the same registries and declarations the
config validator uses, so the list can never disagree with what a run accepts.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0].strip() if (doc or "").strip() else ""


def catalog(kind: str) -> dict[str, str]:
    """Name -> one-line description for one kind of component."""
    import fasteval.suites
    import fasteval.tools  # noqa: F401  (registers the tools)

    if kind == "suites":
        from fasteval.suites.base import SUITES

        return {n: _first_line(c.__doc__) for n, c in sorted(SUITES.items())}
    if kind == "tools":
        from fasteval.tools.base import TOOLS

        return {n: _first_line(getattr(c, "description", None) or c.__doc__) for n, c in sorted(TOOLS.items())}
    if kind == "policies":
        from providers.sim import POLICIES

        return {n: _first_line(f.__doc__) for n, f in sorted(POLICIES.items())}
    from fasteval.config_schema import provider_schemas

    described = {"sim": "the embedded scripted OpenAI-compatible server (no keys, no network)",
                 "openai": "any OpenAI-compatible endpoint (OpenAI, gateways)",
                 "openai_compat": "alias of openai", "vllm": "a vLLM server (OpenAI-compatible)",
                 "sglang": "an SGLang server (OpenAI-compatible)", "anthropic": "the Anthropic Messages API, natively",
                 "gemini": "the Gemini API, natively"}
    return {n: described.get(n, "") for n in sorted(provider_schemas())}


def cmd_list(a: argparse.Namespace) -> int:
    items = catalog(a.kind)
    if a.format == "json":
        sys.stdout.write(orjson.dumps(items, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    width = max((len(n) for n in items), default=0)
    for name, doc in items.items():
        print(f"{name.ljust(width)}  {doc}".rstrip())
    return 0


def cmd_config_schema(a: argparse.Namespace) -> int:
    from fasteval.config_schema import config_json_schema

    sys.stdout.write(orjson.dumps(config_json_schema(), option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def cmd_config_check(a: argparse.Namespace) -> int:
    from fasteval.config import ConfigError, load_config

    try:
        cfg = load_config(a.config)
        placement = _serve_placement(cfg)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # a served model that cannot run here (no vllm, too few GPUs or cores)
        print(f"error: {a.config}: {e}", file=sys.stderr)
        return 2
    print(f"{a.config}: ok")
    for line in placement:
        print(f"  {line}")
    return 0


def _serve_placement(cfg: Any) -> list[str]:
    """What the served models will run where; raises ValueError when they cannot run on this node."""
    from pathlib import Path

    from fasteval.serving import Serving

    serving = Serving.from_config(cfg, Path("runs") / "config-check")
    if serving is None:
        return []
    serving.preflight()
    return serving.placement()


def add_parser(sub: Any) -> None:
    ls = sub.add_parser("list", help="what a config may name: suites, tools, providers, sim policies")
    ls.add_argument("kind", choices=["suites", "tools", "providers", "policies"])
    ls.add_argument("--format", choices=["table", "json"], default="table")
    ls.set_defaults(func=cmd_list)
    cfg = sub.add_parser("config", help="config schema and checks")
    csub = cfg.add_subparsers(dest="config_command", required=True)
    schema = csub.add_parser("schema", help="print the JSON Schema of sweep configs (for editors)")
    schema.set_defaults(func=cmd_config_schema)
    check = csub.add_parser("check", help="validate a config (keys, names, data paths) without running it")
    check.add_argument("config")
    check.set_defaults(func=cmd_config_check)
